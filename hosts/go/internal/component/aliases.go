package component

import "fmt"

// alias reads one alias: an export of a component instance (0x00), of a
// core instance (0x01), or an item of an enclosing component (0x02, types
// only).
func (s *scope) alias(r *reader) error {
	sort, core, err := aliasSort(r)
	if err != nil {
		return err
	}
	target, err := r.byte()
	if err != nil {
		return err
	}
	switch target {
	case 0x00:
		return s.aliasExport(r, sort)
	case 0x01:
		idx, err := r.u32()
		if err != nil {
			return err
		}
		name, err := r.name()
		if err != nil {
			return err
		}
		if sort != sortCore {
			return fmt.Errorf("core export alias of sort 0x%02x", sort)
		}
		ref, err := s.coreExport(idx, name)
		if err != nil {
			return err
		}
		return s.corePush(core, ref)
	case 0x02:
		if _, err := r.u32(); err != nil {
			return err
		}
		if _, err := r.u32(); err != nil {
			return err
		}
		if sort != sortType && !(sort == sortCore && core == coreType) {
			return fmt.Errorf("outer alias of sort 0x%02x is not supported", sort)
		}
		return nil
	}
	return fmt.Errorf("alias target 0x%02x is not supported", target)
}

// aliasSort reads an alias's sort.
func aliasSort(r *reader) (sort, core byte, err error) {
	if sort, err = r.byte(); err != nil || sort != sortCore {
		return
	}
	core, err = r.byte()
	return
}

// aliasExport reads an alias of export name of component instance idx.
func (s *scope) aliasExport(r *reader, sort byte) error {
	idx, err := r.u32()
	if err != nil {
		return err
	}
	name, err := r.name()
	if err != nil {
		return err
	}
	if int(idx) >= len(s.instances) {
		return fmt.Errorf("no instance %d", idx)
	}
	inst := s.instances[idx]
	if inst.imported != "" {
		switch sort {
		case sortFunc:
			return s.push(item{sort: sortFunc, fn: &function{importFrom: inst.imported, name: name}})
		case sortType:
			return nil
		}
		return fmt.Errorf("%s: alias of %q of sort 0x%02x is not supported", inst.imported, name, sort)
	}
	it, ok := inst.exports[name]
	if !ok || it.sort != sort {
		return fmt.Errorf("instance %d exports no %q of sort 0x%02x", idx, name, sort)
	}
	return s.push(it)
}
