package lockwarden

import (
	"encoding/binary"
	"fmt"
	"math"
)

// store writes v, of type t, at ptr, allocating strings and lists with
// the policy's realloc.
func (g *guest) store(ptr uint32, t *abiType, v any) error {
	b := make([]byte, t.size())
	switch t.kind {
	case kindBool:
		if v.(bool) {
			b[0] = 1
		}
	case kindU32:
		binary.LittleEndian.PutUint32(b, v.(uint32))
	case kindS64:
		binary.LittleEndian.PutUint64(b, uint64(v.(int64)))
	case kindU64:
		binary.LittleEndian.PutUint64(b, v.(uint64))
	case kindString, kindList:
		p, n, err := g.storeSequence(t, v)
		if err != nil {
			return err
		}
		binary.LittleEndian.PutUint32(b, p)
		binary.LittleEndian.PutUint32(b[4:], n)
	case kindRecord:
		return g.storeRecord(ptr, t, v.([]any))
	case kindVariant:
		return g.storeVariant(ptr, t, v.(variantValue))
	}
	return g.write(ptr, b)
}

// storeSequence allocates and writes a string's bytes or a list's elements,
// returning where and how many.
func (g *guest) storeSequence(t *abiType, v any) (ptr, n uint32, err error) {
	if t.kind == kindString {
		s := v.(string)
		if len(s) > math.MaxInt32 {
			return 0, 0, fmt.Errorf("a string of %d bytes", len(s))
		}
		if ptr, err = g.alloc(1, uint32(len(s))); err != nil {
			return 0, 0, err
		}
		return ptr, uint32(len(s)), g.write(ptr, []byte(s))
	}
	items := v.([]any)
	size := uint64(t.elem.size()) * uint64(len(items))
	if size > math.MaxInt32 {
		return 0, 0, fmt.Errorf("a list of %d bytes", size)
	}
	if ptr, err = g.alloc(t.elem.align(), uint32(size)); err != nil {
		return 0, 0, err
	}
	for i, item := range items {
		if err := g.store(ptr+uint32(i)*t.elem.size(), t.elem, item); err != nil {
			return 0, 0, err
		}
	}
	return ptr, uint32(len(items)), nil
}

func (g *guest) storeRecord(ptr uint32, t *abiType, fields []any) error {
	var off uint32
	for i, f := range t.fields {
		off = alignTo(off, f.align())
		if err := g.store(ptr+off, f, fields[i]); err != nil {
			return err
		}
		off += f.size()
	}
	return nil
}

func (g *guest) storeVariant(ptr uint32, t *abiType, v variantValue) error {
	b := make([]byte, t.discSize())
	switch len(b) {
	case 1:
		b[0] = byte(v.tag)
	case 2:
		binary.LittleEndian.PutUint16(b, uint16(v.tag))
	default:
		binary.LittleEndian.PutUint32(b, v.tag)
	}
	if err := g.write(ptr, b); err != nil {
		return err
	}
	if c := t.cases[v.tag]; c != nil {
		return g.store(ptr+t.payloadOffset(), c, v.payload)
	}
	return nil
}

// lowerFlat turns a parameter into core values, as the canonical ABI passes
// parameters when they flatten to at most 16 values. The contract passes
// records, strings, lists and numbers this way; strings' and lists'
// contents are written into the policy's memory.
func (g *guest) lowerFlat(t *abiType, v any) ([]uint64, error) {
	switch t.kind {
	case kindBool:
		if v.(bool) {
			return []uint64{1}, nil
		}
		return []uint64{0}, nil
	case kindU32:
		return []uint64{uint64(v.(uint32))}, nil
	case kindS64:
		return []uint64{uint64(v.(int64))}, nil
	case kindU64:
		return []uint64{v.(uint64)}, nil
	case kindString, kindList:
		p, n, err := g.storeSequence(t, v)
		return []uint64{uint64(p), uint64(n)}, err
	case kindRecord:
		var out []uint64
		for i, f := range t.fields {
			flat, err := g.lowerFlat(f, v.([]any)[i])
			if err != nil {
				return nil, err
			}
			out = append(out, flat...)
		}
		return out, nil
	}
	return nil, fmt.Errorf("cannot pass a variant as a flat parameter")
}
