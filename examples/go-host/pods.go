package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	lockwarden "github.com/lockwarden/lockwarden/hosts/go"
)

// startTolerance is how much later than a lock a pod may have started and
// still count as its writer: the kubelet and the lock's writer read
// different clocks (lockwarden's tolerance).
const startTolerance = 5 * time.Second

// pod is one pod of a pod list: what an operator's informer holds.
type pod struct {
	Name    string     `json:"name"`
	Started *time.Time `json:"started"`
	State   string     `json:"state"`
}

// pods answers host questions from a pod list as lockwarden's host
// inventory does: a pod that is gone, finished or started after the lock
// is dead; a running one may or may not still run the lock's holder.
// Process questions are unknown: an operator sees pods, not processes.
type pods map[string]pod

// readPods reads a pod list: [{"name", "started", "state"}].
func readPods(path string) (pods, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var list []pod
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := pods{}
	for _, p := range list {
		out[p.Name] = p
	}
	return out, nil
}

// LocalHostname implements lockwarden.Liveness: the operator runs on no
// host whose processes it could see.
func (pods) LocalHostname() (string, bool) { return "", false }

// Ask implements lockwarden.Liveness.
func (ps pods) Ask(_ context.Context, questions []lockwarden.Question) ([]lockwarden.Answer, error) {
	answers := make([]lockwarden.Answer, len(questions))
	for i, q := range questions {
		answers[i] = ps.answer(q)
	}
	return answers, nil
}

func (ps pods) answer(q lockwarden.Question) lockwarden.Answer {
	if q.Kind != lockwarden.HostQuestion {
		return lockwarden.Answer{State: lockwarden.Unknown, Detail: "the operator sees pods, not processes"}
	}
	p, ok := ps[q.Hostname]
	switch {
	case !ok:
		return lockwarden.Answer{State: lockwarden.Dead, Detail: fmt.Sprintf("pod %s no longer exists", q.Hostname)}
	case p.State == "succeeded" || p.State == "failed":
		return lockwarden.Answer{State: lockwarden.Dead, Detail: fmt.Sprintf("pod %s has %s", p.Name, p.State)}
	case p.Started != nil && p.Started.After(q.Since.Add(startTolerance)):
		return lockwarden.Answer{State: lockwarden.Dead, Detail: fmt.Sprintf(
			"pod %s started at %s, after the lock was written", p.Name, p.Started.UTC().Format(time.RFC3339Nano))}
	}
	return lockwarden.Answer{State: lockwarden.Unknown, Detail: fmt.Sprintf(
		"pod %s is %s, but whether the process that wrote the lock runs is unknown", p.Name, p.State)}
}
