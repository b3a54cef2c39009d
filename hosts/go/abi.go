package lockwarden

// The canonical ABI for exactly the contract's types: how each is laid out
// in a policy's linear memory. Values travel as a small tree: bool, uint32,
// int64, uint64, string, []any (a list's elements or a record's fields) and
// variantValue (variants, enums, options and results).

// kind is an ABI type's shape.
type kind int

const (
	kindBool kind = iota
	kindU32
	kindS64
	kindU64
	kindString
	kindList
	kindRecord
	kindVariant
)

// abiType is one contract type. A variant's case is nil when it carries
// nothing; enums and options are variants.
type abiType struct {
	kind   kind
	elem   *abiType
	fields []*abiType
	cases  []*abiType
}

// variantValue is a variant's case and its payload (nil when none).
type variantValue struct {
	tag     uint32
	payload any
}

var (
	tBool   = &abiType{kind: kindBool}
	tU32    = &abiType{kind: kindU32}
	tS64    = &abiType{kind: kindS64}
	tU64    = &abiType{kind: kindU64}
	tString = &abiType{kind: kindString}
)

func list(elem *abiType) *abiType        { return &abiType{kind: kindList, elem: elem} }
func record(fields ...*abiType) *abiType { return &abiType{kind: kindRecord, fields: fields} }
func variant(cases ...*abiType) *abiType { return &abiType{kind: kindVariant, cases: cases} }
func option(t *abiType) *abiType         { return variant(nil, t) }
func enum(n int) *abiType                { return variant(make([]*abiType, n)...) }

func alignTo(n, align uint32) uint32 { return (n + align - 1) / align * align }

// size and align are the type's size and alignment in memory.
func (t *abiType) size() uint32 {
	switch t.kind {
	case kindBool:
		return 1
	case kindU32:
		return 4
	case kindS64, kindU64, kindString, kindList:
		return 8
	case kindRecord:
		var n uint32
		for _, f := range t.fields {
			n = alignTo(n, f.align()) + f.size()
		}
		return alignTo(n, t.align())
	}
	var payload uint32
	for _, c := range t.cases {
		if c != nil {
			payload = max(payload, c.size())
		}
	}
	return alignTo(t.payloadOffset()+payload, t.align())
}

func (t *abiType) align() uint32 {
	switch t.kind {
	case kindBool:
		return 1
	case kindU32, kindString, kindList:
		return 4
	case kindS64, kindU64:
		return 8
	}
	a := uint32(1)
	if t.kind == kindVariant {
		a = t.discSize()
	}
	for _, f := range append(append([]*abiType(nil), t.fields...), t.cases...) {
		if f != nil {
			a = max(a, f.align())
		}
	}
	return a
}

// discSize is a variant's discriminant size.
func (t *abiType) discSize() uint32 {
	switch n := len(t.cases); {
	case n <= 1<<8:
		return 1
	case n <= 1<<16:
		return 2
	}
	return 4
}

// payloadOffset is where a variant's payload starts.
func (t *abiType) payloadOffset() uint32 {
	a := uint32(1)
	for _, c := range t.cases {
		if c != nil {
			a = max(a, c.align())
		}
	}
	return alignTo(t.discSize(), a)
}
