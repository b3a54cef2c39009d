package lockwarden

import (
	"context"
	"time"
)

// Clock gives a policy the time: the only clock it has. Evaluate reads it
// once and gives the policy that time for the whole evaluation.
type Clock interface {
	Now() time.Time
}

// State is what the host knows of a lock's holder.
type State string

// The states.
const (
	Alive   State = "alive"
	Dead    State = "dead"
	Unknown State = "unknown"
)

// Answer is evidence about a holder: its state, and how the host knows,
// in words fit for a verdict's reason.
type Answer struct {
	State  State
	Detail string
}

// QuestionKind says what a question asks.
type QuestionKind int

// The kinds of question.
const (
	// ProcessQuestion asks whether process PID on Hostname still holds
	// the lock written at Since.
	ProcessQuestion QuestionKind = iota
	// HostQuestion asks whether the host (machine or pod) Hostname that
	// wrote a lock at Since still exists.
	HostQuestion
)

// Question is one question about a lock's holder.
type Question struct {
	Kind     QuestionKind
	Hostname string
	PID      int64 // ProcessQuestion only
	Since    time.Time
}

// Liveness answers a policy's questions about holders: all of an
// evaluation's questions in one batch, exactly one answer each, in order.
// An operator answers from its pod informer.
type Liveness interface {
	// LocalHostname is the hostname of the machine the host runs on, if
	// it knows it.
	LocalHostname() (string, bool)
	// Ask answers every question, in order.
	Ask(ctx context.Context, questions []Question) ([]Answer, error)
}

// Level is how important a logged message is.
type Level string

// The levels.
const (
	Debug Level = "debug"
	Info  Level = "info"
	Warn  Level = "warn"
	Error Level = "error"
)

// Log receives what a policy logs.
type Log interface {
	Log(level Level, message string)
}

// Capabilities are what a policy may reach: nothing else is linked.
type Capabilities struct {
	Clock    Clock
	Liveness Liveness
	// Log may be nil: messages are then dropped (Evaluate still returns them).
	Log Log
}

// LogLine is one message a policy logged.
type LogLine struct {
	Level   Level  `json:"level"`
	Message string `json:"message"`
}

// SystemClock is the machine's clock.
type SystemClock struct{}

// Now implements Clock.
func (SystemClock) Now() time.Time { return time.Now() }
