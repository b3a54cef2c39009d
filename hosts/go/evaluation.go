package lockwarden

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/lockwarden/lockwarden/hosts/go/internal/component"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// evaluation is one evaluation's state: its fresh instances, the time the
// policy is given, what it may still ask, what it logged.
type evaluation struct {
	p             *Policy
	ctx           context.Context
	caps          Capabilities
	now           int64
	questionsLeft int
	logs          []LogLine
	mods          []api.Module
	memory        *memoryCap
	stderr        []byte
	failed        error
}

type evaluationKey struct{}

// evaluationOf is the evaluation a host function is called in.
func evaluationOf(ctx context.Context) *evaluation {
	return ctx.Value(evaluationKey{}).(*evaluation)
}

// start instantiates every core instance of the plan afresh, in order,
// under the deadline; the returned context carries the evaluation.
func (p *Policy) start(ctx context.Context, e *evaluation) error {
	e.p, e.memory = p, &memoryCap{limit: p.limits.Memory}
	ctx = context.WithValue(ctx, evaluationKey{}, e)
	ctx = experimental.WithMemoryAllocator(ctx, e.memory)
	ctx = experimental.WithImportResolver(ctx, func(name string) api.Module {
		if name == component.HostModule {
			return nil // instantiated under this name in the runtime
		}
		if i, err := strconv.Atoi(name); err == nil && i >= 0 && i < len(e.mods) {
			return e.mods[i]
		}
		return nil
	})
	deadline, cancel := context.WithTimeout(ctx, p.limits.Deadline)
	defer cancel()
	config := wazero.NewModuleConfig().WithName("").WithStartFunctions()
	for i, compiled := range p.modules {
		m, err := p.runtime.InstantiateModule(deadline, compiled, config)
		if err != nil {
			return e.failure(deadline, fmt.Errorf("core instance %d: %w", i, err))
		}
		e.mods = append(e.mods, m)
	}
	e.ctx = ctx
	return nil
}

// close closes the evaluation's instances.
func (e *evaluation) close() {
	for i := len(e.mods) - 1; i >= 0; i-- {
		e.mods[i].Close(context.Background())
	}
}

// failure is what an error of a call under ctx means: the memory cap, the
// deadline, a host-side failure, or a crash.
func (e *evaluation) failure(ctx context.Context, err error) error {
	if asked := e.memory.refused(); asked > 0 {
		return memoryError(e.p.name, e.memory.limit, asked)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return deadlineError(e.p.name, e.p.limits.Deadline)
	}
	if e.failed != nil {
		return e.failed
	}
	return e.crash(err)
}

// crash is the error of a policy that crashed: the cause, and what it
// wrote to stderr.
func (e *evaluation) crash(cause error) error {
	stderr := ""
	if len(e.stderr) > 0 {
		stderr = "; it wrote to stderr: " + strings.TrimSpace(string(e.stderr))
	}
	return failure(ErrTrap, "policy %s crashed (%v)%s", e.p.name, cause, stderr)
}

// check stops the policy when a host function fails: the call returns err.
func (e *evaluation) check(err error) {
	if err != nil {
		if e.failed == nil {
			e.failed = e.crash(err)
		}
		panic(err)
	}
}

// ref is the core item ref of this evaluation's instances.
func (e *evaluation) function(ref *component.CoreRef) api.Function {
	if ref == nil || ref.Instance < 0 {
		return nil
	}
	return e.mods[ref.Instance].ExportedFunction(ref.Name)
}

// guest is the memory and realloc a lift's or lower's options name.
func (e *evaluation) guest(opts component.Options) *guest {
	g := &guest{ctx: e.ctx, realloc: e.function(opts.Realloc)}
	if opts.Memory != nil && opts.Memory.Instance >= 0 {
		g.mem = e.mods[opts.Memory.Instance].ExportedMemory(opts.Memory.Name)
	}
	if g.mem == nil {
		e.check(errors.New("the policy names no memory for a value that needs one"))
	}
	return g
}
