package component

import (
	"errors"
	"fmt"
)

// coreInstance reads one core instance: a module instantiated with named
// instances as its imports (0x00), or a bundle of exports (0x01).
func (s *scope) coreInstance(r *reader) error {
	tag, err := r.byte()
	if err != nil {
		return err
	}
	switch tag {
	case 0x00:
		return s.instantiateModule(r)
	case 0x01:
		exports, err := s.coreExports(r)
		if err != nil {
			return err
		}
		s.coreInstances = append(s.coreInstances, coreInst{real: -1, exports: exports})
		return nil
	}
	return fmt.Errorf("core instance form 0x%02x is not supported", tag)
}

// coreExports reads a vector of core inline exports: (name, core sort, index).
func (s *scope) coreExports(r *reader) (map[string]CoreRef, error) {
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	exports := map[string]CoreRef{}
	for range n {
		name, err := r.name()
		if err != nil {
			return nil, err
		}
		kind, err := r.byte()
		if err != nil {
			return nil, err
		}
		idx, err := r.u32()
		if err != nil {
			return nil, err
		}
		if exports[name], err = s.coreGet(kind, idx); err != nil {
			return nil, err
		}
	}
	return exports, nil
}

// instantiateModule reads a module instantiation and plans it: every import
// of the module is renamed to the item its argument instance provides.
func (s *scope) instantiateModule(r *reader) error {
	idx, err := r.u32()
	if err != nil {
		return err
	}
	if int(idx) >= len(s.modules) {
		return fmt.Errorf("no core module %d", idx)
	}
	n, err := r.u32()
	if err != nil {
		return err
	}
	args := map[string]uint32{}
	for range n {
		name, err := r.name()
		if err != nil {
			return err
		}
		if kind, err := r.byte(); err != nil || kind != coreInstance {
			return errors.New("a module argument that is not an instance")
		}
		if args[name], err = r.u32(); err != nil {
			return err
		}
	}
	if len(s.plan.Instances) >= maxInstances {
		return fmt.Errorf("more than %d core instances", maxInstances)
	}
	module, err := rewriteImports(s.modules[idx], func(module, field string) (CoreRef, error) {
		instance, ok := args[module]
		if !ok {
			return CoreRef{}, fmt.Errorf("core module %d imports from %q, which it is not given", idx, module)
		}
		return s.coreExport(instance, field)
	}, s.plan.HostTypes)
	if err != nil {
		return err
	}
	s.plan.Instances = append(s.plan.Instances, Instantiation{Module: module, ModuleIndex: int(idx)})
	s.coreInstances = append(s.coreInstances, coreInst{real: len(s.plan.Instances) - 1})
	return nil
}

// instance reads one component-level instance: a nested component
// instantiated (0x00) or a bundle of exports (0x01).
func (s *scope) instance(r *reader) error {
	tag, err := r.byte()
	if err != nil {
		return err
	}
	if tag == 0x00 {
		return s.instantiateComponent(r)
	}
	if tag != 0x01 {
		return fmt.Errorf("instance form 0x%02x is not supported", tag)
	}
	exports, err := s.namedItems(r, (*reader).externName)
	if err != nil {
		return err
	}
	return s.push(item{sort: sortInstance, inst: &instance{exports: exports}})
}

// namedItems reads a vector of (name, sortidx) pairs.
func (s *scope) namedItems(r *reader, name func(*reader) (string, error)) (map[string]item, error) {
	n, err := r.u32()
	if err != nil {
		return nil, err
	}
	items := map[string]item{}
	for range n {
		key, err := name(r)
		if err != nil {
			return nil, err
		}
		sort, _, idx, err := sortIndex(r)
		if err != nil {
			return nil, err
		}
		if items[key], err = s.get(sort, idx); err != nil {
			return nil, err
		}
	}
	return items, nil
}

// instantiateComponent reads a nested component's instantiation and reads
// that component in a scope of its own, its imports bound to the arguments.
func (s *scope) instantiateComponent(r *reader) error {
	idx, err := r.u32()
	if err != nil {
		return err
	}
	if int(idx) >= len(s.components) {
		return fmt.Errorf("no component %d", idx)
	}
	args, err := s.namedItems(r, (*reader).name)
	if err != nil {
		return err
	}
	if s.depth >= maxDepth {
		return fmt.Errorf("components nested deeper than %d", maxDepth)
	}
	nested := newScope(s.plan, s.depth+1, args)
	if err := nested.read(s.components[idx]); err != nil {
		return fmt.Errorf("nested component %d: %w", idx, err)
	}
	return s.push(item{sort: sortInstance, inst: &instance{exports: nested.exports}})
}
