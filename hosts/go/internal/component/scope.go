package component

import "fmt"

// Limits on what a component may contain, so that a hostile one cannot make
// the host plan without end.
const (
	maxDepth     = 8
	maxInstances = 4096
	maxItems     = 1 << 20
)

// Component-level sorts (the binary format's sort bytes).
const (
	sortCore      = 0x00
	sortFunc      = 0x01
	sortValue     = 0x02
	sortType      = 0x03
	sortComponent = 0x04
	sortInstance  = 0x05
)

// Core sorts.
const (
	coreFunc     = 0x00
	coreTable    = 0x01
	coreMemory   = 0x02
	coreGlobal   = 0x03
	coreType     = 0x10
	coreModule   = 0x11
	coreInstance = 0x12
)

// function is a component-level function: imported or lifted.
type function struct {
	importFrom string // the imported instance, when imported
	name       string // its name in that instance
	lifted     *Lifted
}

// instance is a component-level instance: imported (by name) or made of
// exports.
type instance struct {
	imported string
	exports  map[string]item
}

// item is anything a component-level index space holds that the plan needs.
// Types are kept as items with nothing in them.
type item struct {
	sort      byte
	fn        *function
	inst      *instance
	component []byte
}

// coreInst is a core instance: one the plan creates (real >= 0), or one
// made of other instances' exports.
type coreInst struct {
	real    int
	exports map[string]CoreRef
}

// scope holds the index spaces of one component while it is read; nested
// components get a scope of their own, sharing the plan.
type scope struct {
	plan          *Plan
	depth         int
	args          map[string]item
	modules       [][]byte
	coreInstances []coreInst
	core          map[byte][]CoreRef // functions, tables, memories, globals
	funcs         []*function
	instances     []*instance
	components    [][]byte
	exports       map[string]item
}

func newScope(plan *Plan, depth int, args map[string]item) *scope {
	return &scope{plan: plan, depth: depth, args: args,
		core: map[byte][]CoreRef{}, exports: map[string]item{}}
}

// push adds an item to its index space.
func (s *scope) push(it item) error {
	if len(s.funcs)+len(s.instances)+len(s.components) > maxItems {
		return fmt.Errorf("more than %d items", maxItems)
	}
	switch it.sort {
	case sortFunc:
		s.funcs = append(s.funcs, it.fn)
	case sortInstance:
		s.instances = append(s.instances, it.inst)
	case sortComponent:
		s.components = append(s.components, it.component)
	case sortType:
	default:
		return fmt.Errorf("items of sort 0x%02x are not supported", it.sort)
	}
	return nil
}

// get returns item idx of a component-level sort.
func (s *scope) get(sort byte, idx uint32) (item, error) {
	i := int(idx)
	switch {
	case sort == sortFunc && i < len(s.funcs):
		return item{sort: sort, fn: s.funcs[i]}, nil
	case sort == sortInstance && i < len(s.instances):
		return item{sort: sort, inst: s.instances[i]}, nil
	case sort == sortComponent && i < len(s.components):
		return item{sort: sort, component: s.components[i]}, nil
	case sort == sortType:
		return item{sort: sort}, nil
	}
	return item{}, fmt.Errorf("no item %d of sort 0x%02x", idx, sort)
}

// coreGet returns core item idx of sort kind.
func (s *scope) coreGet(kind byte, idx uint32) (CoreRef, error) {
	space := s.core[kind]
	if int(idx) >= len(space) {
		return CoreRef{}, fmt.Errorf("no core item %d of sort 0x%02x", idx, kind)
	}
	return space[idx], nil
}

// corePush adds a core item to its index space.
func (s *scope) corePush(kind byte, ref CoreRef) error {
	switch kind {
	case coreFunc, coreTable, coreMemory, coreGlobal:
		if len(s.core[kind]) >= maxItems {
			return fmt.Errorf("more than %d core items", maxItems)
		}
		s.core[kind] = append(s.core[kind], ref)
		return nil
	case coreType:
		return nil
	}
	return fmt.Errorf("core items of sort 0x%02x are not supported here", kind)
}

// coreExport is export name of core instance idx.
func (s *scope) coreExport(idx uint32, name string) (CoreRef, error) {
	if int(idx) >= len(s.coreInstances) {
		return CoreRef{}, fmt.Errorf("no core instance %d", idx)
	}
	ci := s.coreInstances[idx]
	if ci.real >= 0 {
		return CoreRef{Instance: ci.real, Name: name}, nil
	}
	ref, ok := ci.exports[name]
	if !ok {
		return CoreRef{}, fmt.Errorf("core instance %d exports no %q", idx, name)
	}
	return ref, nil
}
