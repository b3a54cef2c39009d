package lockwarden

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/tetratelabs/wazero/api"
)

// guest reads and writes values in a policy's linear memory, every access
// checked against the memory's bounds; realloc allocates there (nil when
// the call's options name none).
type guest struct {
	ctx     context.Context
	mem     api.Memory
	realloc api.Function
}

// errBounds is what an access outside the memory returns.
var errBounds = errors.New("the policy pointed outside its memory")

func (g *guest) read(ptr, n uint32) ([]byte, error) {
	b, ok := g.mem.Read(ptr, n)
	if !ok {
		return nil, errBounds
	}
	return b, nil
}

func (g *guest) write(ptr uint32, b []byte) error {
	if !g.mem.Write(ptr, b) {
		return errBounds
	}
	return nil
}

// alloc allocates size bytes aligned to align with the policy's realloc.
func (g *guest) alloc(align, size uint32) (uint32, error) {
	if g.realloc == nil {
		return 0, errors.New("the policy gave no realloc for a value that needs memory")
	}
	out, err := g.realloc.Call(g.ctx, 0, 0, uint64(align), uint64(size))
	if err != nil {
		return 0, err
	}
	ptr := uint32(out[0])
	if ptr%align != 0 || uint64(ptr)+uint64(size) > uint64(g.mem.Size()) {
		return 0, fmt.Errorf("the policy's realloc returned %d for %d bytes aligned to %d", ptr, size, align)
	}
	return ptr, nil
}

// load reads a value of type t at ptr.
func (g *guest) load(ptr uint32, t *abiType) (any, error) {
	if ptr%t.align() != 0 {
		return nil, fmt.Errorf("misaligned pointer %d", ptr)
	}
	b, err := g.read(ptr, t.size())
	if err != nil {
		return nil, err
	}
	switch t.kind {
	case kindBool:
		return b[0] != 0, nil
	case kindU32:
		return binary.LittleEndian.Uint32(b), nil
	case kindS64:
		return int64(binary.LittleEndian.Uint64(b)), nil
	case kindU64:
		return binary.LittleEndian.Uint64(b), nil
	case kindString:
		return g.loadString(binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint32(b[4:]))
	case kindList:
		return g.loadList(binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint32(b[4:]), t.elem)
	case kindRecord:
		return g.loadRecord(ptr, t)
	}
	return g.loadVariant(ptr, b, t)
}

func (g *guest) loadString(ptr, n uint32) (string, error) {
	b, err := g.read(ptr, n)
	if err != nil {
		return "", err
	}
	if !utf8.Valid(b) {
		return "", errors.New("the policy returned a string that is not UTF-8")
	}
	return string(b), nil
}

func (g *guest) loadList(ptr, n uint32, elem *abiType) ([]any, error) {
	size := uint64(elem.size())
	if uint64(ptr)+uint64(n)*size > uint64(g.mem.Size()) {
		return nil, errBounds
	}
	out := make([]any, n)
	for i := range out {
		v, err := g.load(ptr+uint32(uint64(i)*size), elem)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

func (g *guest) loadRecord(ptr uint32, t *abiType) ([]any, error) {
	out := make([]any, len(t.fields))
	var off uint32
	for i, f := range t.fields {
		off = alignTo(off, f.align())
		v, err := g.load(ptr+off, f)
		if err != nil {
			return nil, err
		}
		out[i], off = v, off+f.size()
	}
	return out, nil
}

func (g *guest) loadVariant(ptr uint32, b []byte, t *abiType) (variantValue, error) {
	var tag uint32
	switch t.discSize() {
	case 1:
		tag = uint32(b[0])
	case 2:
		tag = uint32(binary.LittleEndian.Uint16(b))
	default:
		tag = binary.LittleEndian.Uint32(b)
	}
	if tag >= uint32(len(t.cases)) {
		return variantValue{}, fmt.Errorf("the policy returned case %d of a variant of %d", tag, len(t.cases))
	}
	c := t.cases[tag]
	if c == nil {
		return variantValue{tag: tag}, nil
	}
	payload, err := g.load(ptr+t.payloadOffset(), c)
	return variantValue{tag: tag, payload: payload}, err
}
