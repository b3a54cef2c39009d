package lockwarden

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// What a policy built with a language's standard library imports from
// WASI (wasi:cli and wasi:io, for its standard streams), answered as
// lockwarden answers it: no arguments, an empty environment, no terminal,
// an empty stdin, stdout discarded, stderr kept (bounded) for the crash
// report. Every other WASI function is linked as a stub that stops the
// policy when called; clocks, files, randomness, sockets and HTTP are
// refused at load.

// wasiProvided are the WASI interfaces a policy may import.
var wasiProvided = []string{"wasi:cli/", "wasi:io/"}

// maxStderr is how much of what a policy writes to stderr is kept.
const maxStderr = 4096

// The handles of the standard streams.
const (
	stdinHandle = iota + 1
	stdoutHandle
	stderrHandle
	pollableHandle
)

// wasiFunction is the implementation of a WASI import, by its name.
func wasiFunction(iface, name string) hostImpl {
	switch iface + "#" + name {
	case "cli/environment#get-environment", "cli/environment#get-arguments",
		"cli/environment#initial-cwd", "cli/terminal-stdin#get-terminal-stdin",
		"cli/terminal-stdout#get-terminal-stdout", "cli/terminal-stderr#get-terminal-stderr":
		return wasiNothing // an empty list or none: zeros at the return pointer
	case "cli/stdin#get-stdin":
		return wasiHandle(stdinHandle)
	case "cli/stdout#get-stdout":
		return wasiHandle(stdoutHandle)
	case "cli/stderr#get-stderr":
		return wasiHandle(stderrHandle)
	case "io/streams#[method]output-stream.subscribe":
		return wasiHandle(pollableHandle)
	case "io/poll#[method]pollable.block":
		return func(*evaluation, int, []uint64) {}
	case "io/streams#[method]output-stream.check-write":
		return wasiCheckWrite
	case "io/streams#[method]output-stream.write", "io/streams#[method]output-stream.blocking-write-and-flush":
		return wasiWrite
	case "io/streams#[method]output-stream.flush", "io/streams#[method]output-stream.blocking-flush":
		return wasiOk(1)
	}
	return func(e *evaluation, _ int, _ []uint64) {
		e.check(fmt.Errorf("it called wasi:%s#%s, which lockwarden does not provide", iface, name))
	}
}

func wasiProvides(iface string) bool {
	for _, prefix := range wasiProvided {
		if strings.HasPrefix(iface, prefix) {
			return true
		}
	}
	return false
}

// wasiNothing writes 8 zero bytes at the return pointer, its last parameter.
func wasiNothing(e *evaluation, lowered int, stack []uint64) {
	g := e.guest(e.p.plan.Lowered[lowered].Options)
	e.check(g.write(uint32(stack[len(stack)-1]), make([]byte, 8)))
}

func wasiHandle(handle uint64) hostImpl {
	return func(_ *evaluation, _ int, stack []uint64) { stack[0] = handle }
}

// wasiOk writes result ok (a zero discriminant) at the return pointer,
// parameter ret.
func wasiOk(ret int) hostImpl {
	return func(e *evaluation, lowered int, stack []uint64) {
		g := e.guest(e.p.plan.Lowered[lowered].Options)
		e.check(g.write(uint32(stack[ret]), []byte{0}))
	}
}

// wasiCheckWrite says 4096 bytes may be written: ok(4096) at the return pointer.
func wasiCheckWrite(e *evaluation, lowered int, stack []uint64) {
	g := e.guest(e.p.plan.Lowered[lowered].Options)
	out := make([]byte, 16)
	binary.LittleEndian.PutUint64(out[8:], 4096)
	e.check(g.write(uint32(stack[1]), out))
}

// wasiWrite keeps what is written to stderr, drops the rest; ok.
func wasiWrite(e *evaluation, lowered int, stack []uint64) {
	g := e.guest(e.p.plan.Lowered[lowered].Options)
	b, err := g.read(uint32(stack[1]), uint32(stack[2]))
	e.check(err)
	if uint32(stack[0]) == stderrHandle && len(e.stderr) < maxStderr {
		e.stderr = append(e.stderr, b[:min(len(b), maxStderr-len(e.stderr))]...)
	}
	e.check(g.write(uint32(stack[3]), []byte{0}))
}
