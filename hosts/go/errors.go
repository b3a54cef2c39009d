package lockwarden

import (
	"errors"
	"fmt"
	"time"
)

// The kinds of failure, for errors.Is. Each error says more.
var (
	// ErrNotAPolicy: the file is no component exporting lockwarden:policy/policy.
	ErrNotAPolicy = errors.New("not a lockwarden policy")
	// ErrContract: the policy implements a contract version this host does not run.
	ErrContract = errors.New("unsupported contract version")
	// ErrForbiddenImport: the policy imports what the host does not provide (WASI).
	ErrForbiddenImport = errors.New("forbidden import")
	// ErrDeadline: the policy did not finish in time and was stopped.
	ErrDeadline = errors.New("deadline exceeded")
	// ErrMemoryLimit: the policy tried to grow its memory over the cap.
	ErrMemoryLimit = errors.New("memory limit exceeded")
	// ErrTrap: the policy crashed.
	ErrTrap = errors.New("policy crashed")
	// ErrBadVerdicts: the verdicts break the contract; nothing may be removed.
	ErrBadVerdicts = errors.New("bad verdicts")
	// ErrBadRequest: the request cannot be evaluated (an id twice).
	ErrBadRequest = errors.New("bad request")
)

// kindError is an error of one of the kinds above, with the words for it.
type kindError struct {
	kind    error
	message string
}

func (e *kindError) Error() string { return e.message }
func (e *kindError) Unwrap() error { return e.kind }

func failure(kind error, format string, args ...any) error {
	return &kindError{kind: kind, message: fmt.Sprintf(format, args...)}
}

// RefusedError is a policy's own refusal to decide.
type RefusedError struct {
	// Policy names the policy.
	Policy string
	// Kind is "invalid-setting" or "failed".
	Kind string
	// Message is the policy's sentence.
	Message string
}

func (e *RefusedError) Error() string {
	if e.Kind == "invalid-setting" {
		return "policy " + e.Policy + " refused the request: invalid setting: " + e.Message
	}
	return "policy " + e.Policy + " refused the request: " + e.Message
}

func deadlineError(policy string, limit time.Duration) error {
	return failure(ErrDeadline, "policy %s did not finish within %d ms and was stopped", policy, limit.Milliseconds())
}

func memoryError(policy string, limit, asked uint64) error {
	return failure(ErrMemoryLimit,
		"policy %s tried to grow its memory to %d bytes, over the limit of %d bytes, and was stopped", policy, asked, limit)
}
