// Package lockwarden runs lockwarden stale-lock policies in Go programs,
// without cgo: a policy is a WebAssembly component implementing the
// contract lockwarden:policy@0.2.0 (wit/policy.wit), run on wazero.
//
// The host keeps lockwarden's promises: every evaluation runs in fresh
// instances, under a deadline and a memory cap; the policy reaches nothing
// but the capabilities it is given (Clock, Liveness, Log) and components
// importing anything else (WASI) are refused at Load; verdicts are checked
// before they are returned. RequestFromRestic builds a request from what
// `restic list locks` and `restic cat lock` print.
//
// wazero runs core WebAssembly only, so the component is taken apart here
// (internal/component) and its values lifted and lowered with the
// canonical ABI for exactly the contract's types.
package lockwarden
