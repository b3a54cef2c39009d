package component

import (
	"errors"
	"fmt"
)

// canon reads one canonical function: a lift (0x00 0x00) of a core function
// into a component function, a lower (0x01 0x00) of an imported component
// function into a core function, or a resource.drop (0x03: the WASI
// streams a Rust policy's standard library imports). Nothing else
// (threads, async) is supported.
func (s *scope) canon(r *reader) error {
	tag, err := r.byte()
	if err != nil {
		return err
	}
	if tag == 0x03 { // resource.drop: the host keeps no resources, so it is a no-op
		if _, err := r.u32(); err != nil {
			return err
		}
		name := fmt.Sprintf("drop%d", s.plan.Drops)
		s.plan.Drops++
		return s.corePush(coreFunc, CoreRef{Instance: -1, Name: name})
	}
	if tag != 0x00 && tag != 0x01 {
		return fmt.Errorf("canonical function 0x%02x is not supported", tag)
	}
	if b, err := r.byte(); err != nil || b != 0x00 {
		return errors.New("malformed canon lift or lower")
	}
	idx, err := r.u32()
	if err != nil {
		return err
	}
	opts, err := s.options(r)
	if err != nil {
		return err
	}
	if tag == 0x00 {
		if _, err := r.u32(); err != nil { // the function's type
			return err
		}
		core, err := s.coreGet(coreFunc, idx)
		if err != nil {
			return err
		}
		return s.push(item{sort: sortFunc, fn: &function{lifted: &Lifted{Core: core, Options: opts}}})
	}
	if int(idx) >= len(s.funcs) || s.funcs[idx].importFrom == "" {
		return fmt.Errorf("lowers function %d, which is not imported", idx)
	}
	f := s.funcs[idx]
	n := len(s.plan.Lowered)
	s.plan.Lowered = append(s.plan.Lowered, Lowered{Interface: f.importFrom, Func: f.name, Options: opts})
	return s.corePush(coreFunc, CoreRef{Instance: -1, Name: fmt.Sprintf("lower%d", n)})
}

// options reads a canon's options.
func (s *scope) options(r *reader) (Options, error) {
	opts := Options{Encoding: "utf8"}
	n, err := r.u32()
	if err != nil {
		return opts, err
	}
	for range n {
		tag, err := r.byte()
		if err != nil {
			return opts, err
		}
		if tag <= 0x02 {
			opts.Encoding = []string{"utf8", "utf16", "latin1+utf16"}[tag]
			continue
		}
		if tag > 0x05 {
			return opts, fmt.Errorf("canon option 0x%02x is not supported", tag)
		}
		idx, err := r.u32()
		if err != nil {
			return opts, err
		}
		kind := map[byte]byte{0x03: coreMemory, 0x04: coreFunc, 0x05: coreFunc}[tag]
		ref, err := s.coreGet(kind, idx)
		if err != nil {
			return opts, err
		}
		*map[byte]**CoreRef{0x03: &opts.Memory, 0x04: &opts.Realloc, 0x05: &opts.PostReturn}[tag] = &ref
	}
	return opts, nil
}

// importOne reads one import. At the top, instances are recorded as the
// component's imports; in a nested component, imports are its arguments.
func (s *scope) importOne(r *reader) error {
	name, err := r.externName()
	if err != nil {
		return err
	}
	sort, err := externDesc(r)
	if err != nil {
		return err
	}
	if s.depth > 0 {
		arg, ok := s.args[name]
		if !ok && sort != sortType {
			return fmt.Errorf("nested component imports %q, which it is not given", name)
		}
		if sort == sortType {
			arg = item{sort: sortType}
		}
		return s.push(arg)
	}
	switch sort {
	case sortInstance:
		s.plan.Imports = append(s.plan.Imports, name)
		return s.push(item{sort: sortInstance, inst: &instance{imported: name}})
	case sortType:
		return nil
	}
	return fmt.Errorf("imports %q of sort 0x%02x; a policy imports instances only", name, sort)
}

// exportOne reads one export and adds the exported item to its index space.
func (s *scope) exportOne(r *reader) error {
	name, err := r.externName()
	if err != nil {
		return err
	}
	sort, _, idx, err := sortIndex(r)
	if err != nil {
		return err
	}
	if sort == sortCore {
		return fmt.Errorf("exports core item %q", name)
	}
	ascribed, err := r.byte()
	if err != nil {
		return err
	}
	if ascribed == 0x01 {
		if _, err := externDesc(r); err != nil {
			return err
		}
	}
	it, err := s.get(sort, idx)
	if err != nil {
		return err
	}
	s.exports[name] = it
	return s.push(it)
}

// externDesc reads an externdesc and returns its sort.
func externDesc(r *reader) (byte, error) {
	sort, err := r.byte()
	if err != nil {
		return 0, err
	}
	switch sort {
	case 0x00:
		if b, err := r.byte(); err != nil || b != coreModule {
			return 0, errors.New("malformed core module type")
		}
	case sortType:
		bound, err := r.byte()
		if err != nil || bound != 0x00 {
			return 0, errors.New("only type equality bounds are supported")
		}
	case sortFunc, sortComponent, sortInstance:
	default:
		return 0, fmt.Errorf("extern of sort 0x%02x is not supported", sort)
	}
	_, err = r.u32()
	return sort, err
}
