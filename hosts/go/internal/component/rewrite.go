package component

import (
	"errors"
	"fmt"
	"strconv"
)

// rewriteImports returns a copy of a core module whose every import
// (module, field) is renamed to what resolve says it is: the instance's
// index as the module name and the export's name as the field, or
// HostModule and the lowered function's name. The rest of the binary is
// kept byte for byte. The signatures of functions imported from HostModule
// are recorded in hostTypes.
func rewriteImports(module []byte, resolve func(module, field string) (CoreRef, error), hostTypes map[string]FuncType) ([]byte, error) {
	r := &reader{data: module, pos: len(modulePreamble)}
	out := append([]byte(nil), module[:len(modulePreamble)]...)
	var types []FuncType
	for !r.done() {
		start := r.pos
		id, err := r.byte()
		if err != nil {
			return nil, err
		}
		size, err := r.u32()
		if err != nil {
			return nil, err
		}
		content, err := r.bytes(size)
		if err != nil {
			return nil, err
		}
		if id == 1 {
			if types, err = funcTypes(&reader{data: content}); err != nil {
				return nil, fmt.Errorf("type section: %w", err)
			}
		}
		if id != 2 {
			out = append(out, module[start:r.pos]...)
			continue
		}
		section, err := renameImports(&reader{data: content}, resolve, func(name string, typeIdx uint32) error {
			if int(typeIdx) >= len(types) {
				return fmt.Errorf("no function type %d", typeIdx)
			}
			hostTypes[name] = types[typeIdx]
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("import section: %w", err)
		}
		out = append(out, 2)
		out = appendULEB(out, uint64(len(section)))
		out = append(out, section...)
	}
	return out, nil
}

// renameImports returns the import section's content with every import renamed.
func renameImports(r *reader, resolve func(module, field string) (CoreRef, error), hostFunc func(string, uint32) error) ([]byte, error) {
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	out := appendULEB(nil, uint64(n))
	for range n {
		module, err := r.name()
		if err != nil {
			return nil, err
		}
		field, err := r.name()
		if err != nil {
			return nil, err
		}
		start := r.pos
		if err := skipImportDesc(r); err != nil {
			return nil, err
		}
		ref, err := resolve(module, field)
		if err != nil {
			return nil, err
		}
		if ref.Instance < 0 {
			desc := &reader{data: r.data[start:r.pos]}
			if kind, _ := desc.byte(); kind != 0x00 {
				return nil, fmt.Errorf("%s.%s: a host item that is not a function", module, field)
			}
			typeIdx, _ := desc.u32()
			if err := hostFunc(ref.Name, typeIdx); err != nil {
				return nil, err
			}
		}
		out = appendName(out, RefModule(ref))
		out = appendName(out, ref.Name)
		out = append(out, r.data[start:r.pos]...)
	}
	if !r.done() {
		return nil, errors.New("bytes left after the imports")
	}
	return out, nil
}

// RefModule is the module name a rewritten module imports ref from: the
// instance's index in decimal, or HostModule.
func RefModule(ref CoreRef) string {
	if ref.Instance < 0 {
		return HostModule
	}
	return strconv.Itoa(ref.Instance)
}

// skipImportDesc reads past an import's description: a function's type
// index, a table's, memory's or global's type.
func skipImportDesc(r *reader) error {
	kind, err := r.byte()
	if err != nil {
		return err
	}
	switch kind {
	case 0x00: // function: type index
		_, err = r.u32()
		return err
	case 0x01: // table: reference type, limits
		if _, err := r.byte(); err != nil {
			return err
		}
		return skipLimits(r)
	case 0x02: // memory: limits
		return skipLimits(r)
	case 0x03: // global: value type, mutability
		if _, err := r.byte(); err != nil {
			return err
		}
		_, err = r.byte()
		return err
	}
	return fmt.Errorf("import kind 0x%02x is not supported", kind)
}

// skipLimits reads past limits: flags (bit 0: a maximum follows), a minimum
// and maybe a maximum.
func skipLimits(r *reader) error {
	flags, err := r.byte()
	if err != nil {
		return err
	}
	if flags > 0x07 {
		return fmt.Errorf("limits flags 0x%02x", flags)
	}
	for range 1 + int(flags&1) {
		if _, err := r.uleb(64); err != nil {
			return err
		}
	}
	return nil
}

func appendULEB(out []byte, v uint64) []byte {
	for {
		b := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			out = append(out, b|0x80)
			continue
		}
		return append(out, b)
	}
}

func appendName(out []byte, name string) []byte {
	return append(appendULEB(out, uint64(len(name))), name...)
}

// funcTypes reads a type section's function types.
func funcTypes(r *reader) ([]FuncType, error) {
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	types := make([]FuncType, 0, min(n, 1<<16))
	for range n {
		if form, err := r.byte(); err != nil || form != 0x60 {
			return nil, errors.New("a type that is not a function type")
		}
		var ft FuncType
		for _, into := range []*[]byte{&ft.Params, &ft.Results} {
			count, err := r.u32()
			if err != nil {
				return nil, err
			}
			if *into, err = r.bytes(count); err != nil {
				return nil, err
			}
		}
		types = append(types, ft)
	}
	return types, nil
}
