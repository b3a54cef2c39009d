// Package component reads a WebAssembly component of the kind wit-component
// writes (what wit-bindgen, componentize-py and componentize-js produce) and
// plans how to run it on a core WebAssembly runtime: which core modules to
// instantiate in which order, each import wired to the export or host
// function the component names, and which core functions the component's
// imports lower to and its exports lift from.
//
// It knows the subset of the component model a policy uses: core modules
// and instances, aliases, canon lift and lower, imported and exported
// instances, and nested components that only re-export what they are given.
// Types are skipped: the host knows its contract's types, and the core
// signatures are checked when the plan is instantiated.
package component

// HostModule is the module name the plan's rewritten core modules import
// lowered functions from; each is named "lower<N>", N its index in
// Plan.Lowered.
const HostModule = "lockwarden:host"

// CoreRef names one core item (function, table, memory or global): an
// export of an instance the plan creates, or a lowered import.
type CoreRef struct {
	// Instance is the index in Plan.Instances of the instance exporting
	// it, or -1 for a lowered import.
	Instance int
	// Name is the export's name, or the host function's in HostModule.
	Name string
}

// Options are a canon lift's or lower's options. Nil refs are absent.
type Options struct {
	// Memory is the linear memory strings and lists live in.
	Memory *CoreRef
	// Realloc allocates in Memory.
	Realloc *CoreRef
	// PostReturn is called after a lifted function's results are read.
	PostReturn *CoreRef
	// Encoding is the string encoding: "utf8", "utf16" or "latin1+utf16".
	Encoding string
}

// Instantiation is one core instance the component creates, in order.
type Instantiation struct {
	// Module is the core module's binary, its imports renamed to
	// (instance index, export name) or (HostModule, "lower<N>").
	Module []byte
	// ModuleIndex identifies the original module (modules instantiated
	// twice share it).
	ModuleIndex int
}

// Lowered is a core function made by lowering one of the component's
// imported functions.
type Lowered struct {
	// Interface is the imported instance's name, such as
	// "lockwarden:policy/clock@0.2.0".
	Interface string
	// Func is the function's name in it, such as "now".
	Func string
	// Options are the lower's options.
	Options Options
}

// Lifted is an exported function lifted from a core function.
type Lifted struct {
	// Core is the core function.
	Core CoreRef
	// Options are the lift's options.
	Options Options
}

// Plan is how to run a component on a core runtime.
type Plan struct {
	// Instances are the core instances to create, in order.
	Instances []Instantiation
	// Lowered are the host functions the instances import.
	Lowered []Lowered
	// Drops is how many resource.drop functions the instances import from
	// HostModule, named "drop<N>".
	Drops int
	// HostTypes are the core signatures of the functions imported from
	// HostModule, by name, as the importing modules declare them.
	HostTypes map[string]FuncType
	// Imports are the names of the instances the component imports.
	Imports []string
	// Exports maps each exported instance's name to its functions.
	Exports map[string]map[string]Lifted
}

// FuncType is a core function's signature: value types as the binary
// format encodes them (0x7f i32, 0x7e i64, 0x7d f32, 0x7c f64).
type FuncType struct {
	Params  []byte
	Results []byte
}
