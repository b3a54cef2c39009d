package lockwarden

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/lockwarden/lockwarden/hosts/go/internal/component"
	"github.com/tetratelabs/wazero/api"
)

// The bounds on what a policy logs in one evaluation, as lockwarden's.
const (
	maxLogLines = 1000
	maxLogLine  = 1024
)

// hostImpl is one lowered import's implementation: the evaluation, the
// lowered function's index and the core stack.
type hostImpl func(e *evaluation, lowered int, stack []uint64)

var i32 = api.ValueTypeI32

// hostFunction is the implementation of a lowered import: the contract's
// functions, and the WASI functions a standard library imports.
func hostFunction(l component.Lowered) (hostImpl, error) {
	if l.Options.Encoding != "utf8" {
		return nil, fmt.Errorf("%s#%s uses string encoding %s; this host supports utf8", l.Interface, l.Func, l.Options.Encoding)
	}
	if iface, ok := strings.CutPrefix(l.Interface, "wasi:"); ok && wasiProvides(l.Interface) {
		iface, _, _ = strings.Cut(iface, "@")
		return wasiFunction(iface, l.Func), nil
	}
	switch l.Interface + "#" + l.Func {
	case "lockwarden:policy/clock@" + Contract + "#now":
		return hostNow, nil
	case "lockwarden:policy/liveness@" + Contract + "#local-hostname":
		return hostLocalHostname, nil
	case "lockwarden:policy/liveness@" + Contract + "#ask":
		return hostAsk, nil
	case "lockwarden:policy/log@" + Contract + "#log":
		return hostLog, nil
	}
	return nil, fmt.Errorf("the policy imports %s from %s, which this host does not provide", l.Func, l.Interface)
}

// contractSignatures are the core signatures of the contract's imports, as
// the canonical ABI flattens them.
var contractSignatures = map[string]string{
	"now": "->i64", "local-hostname": "i32->", "ask": "i32,i32,i32->", "log": "i32,i32,i32->",
}

func hostNow(e *evaluation, _ int, stack []uint64) {
	stack[0] = uint64(e.now)
}

func hostLocalHostname(e *evaluation, lowered int, stack []uint64) {
	g := e.guest(e.p.plan.Lowered[lowered].Options)
	value := variantValue{}
	if e.caps.Liveness != nil {
		if name, ok := e.caps.Liveness.LocalHostname(); ok {
			value = variantValue{tag: 1, payload: name}
		}
	}
	e.check(g.store(uint32(stack[0]), tHostname, value))
}

func hostAsk(e *evaluation, lowered int, stack []uint64) {
	g := e.guest(e.p.plan.Lowered[lowered].Options)
	asked, err := g.loadList(uint32(stack[0]), uint32(stack[1]), tQuestion)
	e.check(err)
	answers, err := e.answer(asked)
	e.check(err)
	ptr, n, err := g.storeSequence(list(tLiveness), answers)
	e.check(err)
	out := make([]byte, 8)
	binary.LittleEndian.PutUint32(out, ptr)
	binary.LittleEndian.PutUint32(out[4:], n)
	e.check(g.write(uint32(stack[2]), out))
}

func hostLog(e *evaluation, lowered int, stack []uint64) {
	g := e.guest(e.p.plan.Lowered[lowered].Options)
	levels := []Level{Debug, Info, Warn, Error}
	level := uint32(stack[0])
	if level >= uint32(len(levels)) {
		e.check(errors.New("the policy logged at an unknown level"))
	}
	message, err := g.loadString(uint32(stack[1]), uint32(stack[2]))
	e.check(err)
	if len(e.logs) >= maxLogLines {
		return
	}
	line := LogLine{Level: levels[level], Message: cut(message, maxLogLine)}
	e.logs = append(e.logs, line)
	if e.caps.Log != nil {
		e.caps.Log.Log(line.Level, line.Message)
	}
}

// cut cuts text to at most max bytes at a character boundary, marking the cut.
func cut(text string, max int) string {
	if len(text) <= max {
		return text
	}
	end := max
	for end > 0 && text[end]&0xc0 == 0x80 {
		end--
	}
	return text[:end] + "…"
}
