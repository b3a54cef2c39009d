package lockwarden

import (
	"context"
	"errors"
	"time"
)

// Result is one evaluation's checked verdicts and what the policy logged.
type Result struct {
	Verdicts Verdicts
	Logs     []LogLine
}

// Evaluate asks the policy about every lock and unreadable file of req, in
// fresh instances, under the deadline and the memory cap, with caps as its
// only reach. The verdicts are checked as lockwarden checks them: one per
// input in order (each given its input's id), a rule of at most 128 bytes,
// no removal of an unreadable file without 30 minutes of the host's own age
// evidence; reasons are cut to 4096 bytes. On any error nothing may be
// removed.
func (p *Policy) Evaluate(ctx context.Context, caps Capabilities, req *Request) (Result, error) {
	if err := checkUniqueIDs(req); err != nil {
		return Result{}, err
	}
	lifted, err := p.policyExport("evaluate")
	if err != nil {
		return Result{}, err
	}
	now := time.Now()
	if caps.Clock != nil {
		now = caps.Clock.Now()
	}
	e := &evaluation{caps: caps, now: now.UnixNano(), questionsLeft: 2 * len(req.Locks)}
	defer e.close()
	if err := p.start(ctx, e); err != nil {
		return Result{}, err
	}
	params, err := e.lowerRequest(lifted, req)
	if err != nil {
		return Result{}, err
	}
	value, err := e.call(lifted, params, tEvaluated)
	if err != nil {
		return Result{Logs: e.logs}, err
	}
	verdicts, err := evaluated(value)
	if refused, ok := err.(*RefusedError); ok {
		refused.Policy = p.name
		return Result{Logs: e.logs}, refused
	}
	if err := validate(req, e.now, verdicts); err != nil {
		return Result{Logs: e.logs}, failure(ErrBadVerdicts, "policy %s returned bad verdicts: %v", p.name, err)
	}
	return Result{Verdicts: paired(req, verdicts), Logs: e.logs}, nil
}

// answer answers the policy's questions through the Liveness capability,
// at most two per lock of the request; the rest are answered unknown.
func (e *evaluation) answer(asked []any) ([]any, error) {
	questions := make([]Question, 0, len(asked))
	for _, q := range asked[:min(len(asked), e.questionsLeft)] {
		questions = append(questions, question(q))
	}
	e.questionsLeft -= len(questions)
	var answers []Answer
	if e.caps.Liveness != nil && len(questions) > 0 {
		var err error
		if answers, err = e.caps.Liveness.Ask(e.ctx, questions); err != nil {
			return nil, err
		}
		if len(answers) != len(questions) {
			return nil, errors.New("the liveness capability gave another number of answers than questions")
		}
	}
	out := make([]any, len(asked))
	for i := range asked {
		a := Answer{State: Unknown, Detail: "not asked: more questions than the locks of this request raise"}
		switch {
		case i < len(answers):
			a = answers[i]
		case i < len(questions):
			a = Answer{State: Unknown, Detail: "no liveness source"}
		}
		v, err := answerValue(a)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}
