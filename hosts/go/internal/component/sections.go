package component

import (
	"bytes"
	"errors"
	"fmt"
)

// The preamble of a component (layer 1) and of a core module (layer 0).
var (
	componentPreamble = []byte{0x00, 'a', 's', 'm', 0x0d, 0x00, 0x01, 0x00}
	modulePreamble    = []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00}
)

// ErrNotComponent says the bytes are no component (a core module, or no
// WebAssembly at all).
var ErrNotComponent = errors.New("not a WebAssembly component")

// Read plans how to run the component in binary. When it cannot, the plan
// it returns with the error still names the imports read so far, so that a
// caller can say which import it does not provide.
func Read(binary []byte) (*Plan, error) {
	if !bytes.HasPrefix(binary, componentPreamble) {
		return nil, ErrNotComponent
	}
	plan := &Plan{Exports: map[string]map[string]Lifted{}, HostTypes: map[string]FuncType{}}
	s := newScope(plan, 0, nil)
	if err := s.read(binary[len(componentPreamble):]); err != nil {
		return plan, err
	}
	for name, it := range s.exports {
		if it.sort != sortInstance {
			continue
		}
		funcs := map[string]Lifted{}
		for fname, f := range it.inst.exports {
			if f.sort == sortFunc && f.fn.lifted != nil {
				funcs[fname] = *f.fn.lifted
			}
		}
		plan.Exports[name] = funcs
	}
	return plan, nil
}

// read reads a component's sections in order.
func (s *scope) read(body []byte) error {
	r := &reader{data: body}
	for !r.done() {
		id, err := r.byte()
		if err != nil {
			return err
		}
		size, err := r.u32()
		if err != nil {
			return err
		}
		content, err := r.bytes(size)
		if err != nil {
			return err
		}
		if err := s.section(id, &reader{data: content}); err != nil {
			return fmt.Errorf("section %d at byte %d: %w", id, r.pos, err)
		}
	}
	return nil
}

// section reads one section.
func (s *scope) section(id byte, r *reader) error {
	switch id {
	case 0, 3, 7: // custom, core types, types: the host knows its types
		return nil
	case 1:
		if !bytes.HasPrefix(r.data, modulePreamble) {
			return errors.New("a core module that is not WebAssembly 1.0")
		}
		s.modules = append(s.modules, r.data)
		return nil
	case 4:
		if !bytes.HasPrefix(r.data, componentPreamble) {
			return errors.New("a nested component without its preamble")
		}
		return s.push(item{sort: sortComponent, component: r.data[len(componentPreamble):]})
	}
	readers := map[byte]func(*reader) error{
		2: s.coreInstance, 5: s.instance, 6: s.alias, 8: s.canon,
		10: s.importOne, 11: s.exportOne,
	}
	read, ok := readers[id]
	if !ok {
		return fmt.Errorf("section %d is not supported", id)
	}
	return vector(r, read)
}

// vector reads a vector of entries, each with read, and checks nothing is left.
func vector(r *reader, read func(*reader) error) error {
	n, err := r.u32()
	if err != nil {
		return err
	}
	for range n {
		if err := read(r); err != nil {
			return err
		}
	}
	if !r.done() {
		return errors.New("bytes left after the section's entries")
	}
	return nil
}

// sortIndex reads a sortidx: the sort (0x00 and a core sort for core items)
// and an index.
func sortIndex(r *reader) (sort, core byte, idx uint32, err error) {
	if sort, err = r.byte(); err != nil {
		return
	}
	if sort == sortCore {
		if core, err = r.byte(); err != nil {
			return
		}
	}
	idx, err = r.u32()
	return
}
