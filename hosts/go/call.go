package lockwarden

import (
	"context"
	"fmt"
	"slices"

	"github.com/lockwarden/lockwarden/hosts/go/internal/component"
	"github.com/tetratelabs/wazero/api"
)

// call calls an exported function under the deadline with flat
// parameters, lifts its result (returned through memory) as type result,
// then calls its post-return.
func (e *evaluation) call(lifted component.Lifted, params []uint64, result *abiType) (value any, err error) {
	fn := e.function(&lifted.Core)
	if fn == nil {
		return nil, fmt.Errorf("policy %s exports no core function %q", e.p.name, lifted.Core.Name)
	}
	def := fn.Definition()
	want := slices.Repeat([]api.ValueType{i32}, len(params))
	if !slices.Equal(def.ParamTypes(), want) || !slices.Equal(def.ResultTypes(), []api.ValueType{i32}) {
		return nil, fmt.Errorf("policy %s: %s has another signature than the contract's", e.p.name, lifted.Core.Name)
	}
	ctx, cancel := context.WithTimeout(e.ctx, e.p.limits.Deadline)
	defer cancel()
	g := e.guest(lifted.Options)
	g.ctx = ctx
	out, err := e.guarded(ctx, func() ([]uint64, error) { return fn.Call(ctx, params...) })
	if err != nil {
		return nil, e.failure(ctx, err)
	}
	if value, err = g.load(uint32(out[0]), result); err != nil {
		return nil, failure(ErrTrap, "policy %s crashed (%v)", e.p.name, err)
	}
	if post := e.function(lifted.Options.PostReturn); post != nil {
		if _, err := e.guarded(ctx, func() ([]uint64, error) { return post.Call(ctx, out[0]) }); err != nil {
			return nil, e.failure(ctx, err)
		}
	}
	return value, nil
}

// guarded runs f, turning a panic of a host function outside the guest
// (none is expected) into an error.
func (e *evaluation) guarded(ctx context.Context, f func() ([]uint64, error)) (out []uint64, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	return f()
}

// lowerRequest writes the request into the policy's memory as evaluate's
// flat parameters.
func (e *evaluation) lowerRequest(lifted component.Lifted, req *Request) (params []uint64, err error) {
	g := e.guest(lifted.Options)
	defer func() {
		if r := recover(); r != nil {
			err = e.failure(e.ctx, fmt.Errorf("%v", r))
		}
	}()
	params, err = g.lowerFlat(tRequest, requestValue(req))
	if err != nil {
		return nil, e.failure(e.ctx, err)
	}
	return params, nil
}

// callInfo instantiates the policy afresh and calls its info.
func (p *Policy) callInfo(ctx context.Context) (PolicyInfo, error) {
	lifted, err := p.policyExport("info")
	if err != nil {
		return PolicyInfo{}, err
	}
	e := &evaluation{}
	defer e.close()
	if err := p.start(ctx, e); err != nil {
		return PolicyInfo{}, fmt.Errorf("cannot load policy %s: %w", p.name, err)
	}
	value, err := e.call(lifted, nil, tInfo)
	if err != nil {
		return PolicyInfo{}, err
	}
	return policyInfo(value), nil
}
