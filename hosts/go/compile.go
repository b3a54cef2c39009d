package lockwarden

import (
	"context"
	"fmt"
	"strings"

	"github.com/lockwarden/lockwarden/hosts/go/internal/component"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// compile makes the policy's runtime, compiles every core module the plan
// instantiates (each once) and instantiates the host module its lowered
// imports call. Nothing else is linked: no WASI.
func (p *Policy) compile(ctx context.Context, cache wazero.CompilationCache) error {
	// WebAssembly 2.0 and extended constant expressions, which
	// componentize-py's dynamically linked modules use.
	features := api.CoreFeaturesV2 | experimental.CoreFeaturesExtendedConst
	config := wazero.NewRuntimeConfig().WithCloseOnContextDone(true).WithCoreFeatures(features)
	if cache != nil {
		config = config.WithCompilationCache(cache)
	}
	p.runtime = wazero.NewRuntimeWithConfig(ctx, config)
	compiled := map[string]wazero.CompiledModule{}
	for i, inst := range p.plan.Instances {
		key := string(inst.Module)
		if m, ok := compiled[key]; ok {
			p.modules = append(p.modules, m)
			continue
		}
		m, err := p.runtime.CompileModule(ctx, inst.Module)
		if err != nil {
			return fmt.Errorf("core instance %d: %w", i, err)
		}
		compiled[key] = m
		p.modules = append(p.modules, m)
	}
	host, err := p.hostModule(ctx)
	if err != nil {
		return err
	}
	p.host = host
	return nil
}

// hostModule instantiates the host functions the policy's instances
// import: one per canon lower, each reading its evaluation from the
// context, and a no-op per resource.drop. Each gets the signature its
// importing module declares; the contract's must be the canonical ABI's.
func (p *Policy) hostModule(ctx context.Context) (api.Module, error) {
	b := p.runtime.NewHostModuleBuilder(component.HostModule)
	for name, sig := range p.plan.HostTypes {
		var impl hostImpl
		var index int
		if _, err := fmt.Sscanf(name, "drop%d", &index); err == nil {
			impl = func(*evaluation, int, []uint64) {}
		} else if _, err := fmt.Sscanf(name, "lower%d", &index); err == nil && index < len(p.plan.Lowered) {
			lowered := p.plan.Lowered[index]
			if impl, err = hostFunction(lowered); err != nil {
				return nil, err
			}
			want, contract := contractSignatures[lowered.Func]
			if got := signature(sig); contract && !strings.HasPrefix(lowered.Interface, "wasi:") && got != want {
				return nil, fmt.Errorf("%s#%s has core signature %s, not the contract's %s", lowered.Interface, lowered.Func, got, want)
			}
		} else {
			return nil, fmt.Errorf("unknown host function %q", name)
		}
		b.NewFunctionBuilder().
			WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, _ api.Module, stack []uint64) {
				impl(evaluationOf(ctx), index, stack)
			}), valueTypes(sig.Params), valueTypes(sig.Results)).
			Export(name)
	}
	return b.Instantiate(ctx)
}

// valueTypes are core value types as wazero names them (the same bytes).
func valueTypes(b []byte) []api.ValueType {
	return append([]api.ValueType(nil), b...)
}

// signature is a core signature as "i32,i32->i64".
func signature(sig component.FuncType) string {
	names := func(b []byte) string {
		out := make([]string, len(b))
		for i, t := range b {
			out[i] = api.ValueTypeName(t)
		}
		return strings.Join(out, ",")
	}
	return names(sig.Params) + "->" + names(sig.Results)
}
