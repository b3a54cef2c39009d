package lockwarden

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/lockwarden/lockwarden/hosts/go/internal/component"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// Limits are the hard limits every evaluation runs under; lockwarden's
// defaults are DefaultLimits.
type Limits struct {
	// Deadline is how long instantiation may take, and then how long the
	// call may take.
	Deadline time.Duration
	// Memory is how large each of the policy's memories may grow, in bytes.
	Memory uint64
}

// DefaultLimits are lockwarden's: 1 s and 64 MiB.
var DefaultLimits = Limits{Deadline: time.Second, Memory: 64 << 20}

// Options configure Load. The zero value is lockwarden's defaults.
type Options struct {
	// Name names the policy in errors (default "policy").
	Name string
	// Limits; zero fields take DefaultLimits'.
	Limits Limits
	// Cache, if set, keeps compiled code between loads (wazero's
	// compilation cache, such as wazero.NewCompilationCacheWithDir).
	Cache wazero.CompilationCache
}

// Policy is a loaded policy component. Each evaluation runs in fresh
// instances; evaluations may run concurrently.
type Policy struct {
	name    string
	limits  Limits
	runtime wazero.Runtime
	plan    *component.Plan
	modules []wazero.CompiledModule
	host    api.Module
	export  string
	info    PolicyInfo
}

// Load compiles a policy component and checks that it implements the
// contract and imports nothing but the contract's capabilities. It calls
// the policy's info once, in a fresh instance.
func Load(ctx context.Context, binary []byte, opts Options) (*Policy, error) {
	p := &Policy{name: opts.Name, limits: opts.Limits}
	if p.name == "" {
		p.name = "policy"
	}
	if p.limits.Deadline <= 0 {
		p.limits.Deadline = DefaultLimits.Deadline
	}
	if p.limits.Memory == 0 {
		p.limits.Memory = DefaultLimits.Memory
	}
	plan, err := component.Read(binary)
	if err := checkImports(p.name, plan); err != nil {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("cannot load policy %s: %w; is it a WebAssembly component (docs/writing-a-policy.md says how to build one)?", p.name, err)
	}
	p.plan = plan
	if p.export, err = checkExports(p.name, plan); err != nil {
		return nil, err
	}
	if err := p.compile(ctx, opts.Cache); err != nil {
		p.Close(ctx)
		return nil, fmt.Errorf("cannot load policy %s: %w", p.name, err)
	}
	if p.info, err = p.callInfo(ctx); err != nil {
		p.Close(ctx)
		return nil, err
	}
	return p, nil
}

// Info is what the policy says about itself.
func (p *Policy) Info() PolicyInfo { return p.info }

// Close releases the compiled policy.
func (p *Policy) Close(ctx context.Context) error {
	if p.runtime == nil {
		return nil
	}
	return p.runtime.Close(ctx)
}

// contractInterfaces are the instances a policy may import, by name.
func contractInterfaces() map[string]bool {
	ok := map[string]bool{}
	for _, name := range []string{"types", "clock", "liveness", "log"} {
		ok["lockwarden:policy/"+name+"@"+Contract] = true
	}
	return ok
}

// checkImports refuses a component that imports anything but the
// contract's interfaces and the WASI streams a standard library needs
// (wasi.go): no clocks, files, randomness, sockets or HTTP. It names them.
func checkImports(name string, plan *component.Plan) error {
	if plan == nil {
		return nil
	}
	var others []string
	for _, imp := range plan.Imports {
		if !wasiProvides(imp) && !strings.HasPrefix(imp, "lockwarden:policy/") {
			others = append(others, imp)
		}
	}
	if len(others) == 0 {
		return nil
	}
	sort.Strings(others)
	return failure(ErrForbiddenImport, "cannot load policy %s: it imports %s, which lockwarden does not provide: "+
		"a policy gets the time only through lockwarden:policy/clock and may not use files, the environment, "+
		"WASI clocks, randomness or sockets", name, strings.Join(others, ", "))
}

// checkExports finds the exported policy interface and checks its contract
// version: this host runs 0.2.x.
func checkExports(name string, plan *component.Plan) (string, error) {
	var exports []string
	for export := range plan.Exports {
		found, ok := strings.CutPrefix(export, "lockwarden:policy/policy@")
		if !ok {
			exports = append(exports, export)
			continue
		}
		if !strings.HasPrefix(found+".", "0.2.") {
			return "", failure(ErrContract, "cannot load policy %s: it implements contract lockwarden:policy@%s, "+
				"but this host runs lockwarden:policy 0.2.x; rebuild the policy against wit/ of lockwarden %s",
				name, found, Contract)
		}
		for _, imp := range plan.Imports {
			if !contractInterfaces()[imp] && !wasiProvides(imp) {
				return "", failure(ErrContract, "cannot load policy %s: it imports %s, but implements %s", name, imp, export)
			}
		}
		return export, nil
	}
	sort.Strings(exports)
	return "", failure(ErrNotAPolicy, "cannot load policy %s: it does not export lockwarden:policy/policy (it exports %s); is it a lockwarden policy?",
		name, strings.Join(exports, ", "))
}

// policyExport is the exported policy interface's function fn.
func (p *Policy) policyExport(fn string) (component.Lifted, error) {
	f, ok := p.plan.Exports[p.export][fn]
	if !ok {
		return f, errors.New("the policy interface has no " + fn)
	}
	return f, nil
}
