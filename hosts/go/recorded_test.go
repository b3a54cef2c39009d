package lockwarden

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// recordedCase is one conformance case (tests/conformance/*.json): a
// request, the time, and the evidence answers recorded per lock.
type recordedCase struct {
	Contract      string            `json:"contract"`
	Now           time.Time         `json:"now"`
	LocalHostname *string           `json:"local_hostname"`
	Repository    Repository        `json:"repository"`
	Settings      map[string]string `json:"settings"`
	Locks         []struct {
		Lock
		Process *recordedAnswer `json:"process"`
		Host    *recordedAnswer `json:"host"`
	} `json:"locks"`
	Unreadable []UnreadableLock `json:"unreadable"`
}

type recordedAnswer struct {
	State  State  `json:"state"`
	Detail string `json:"detail"`
}

// UnmarshalJSON reads an answer recorded as a state alone ("dead") or
// as {"state", "detail"}.
func (a *recordedAnswer) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, &a.State); err == nil {
		return nil
	}
	type plain recordedAnswer
	return json.Unmarshal(b, (*plain)(a))
}

func (a *recordedAnswer) answer() Answer {
	if a == nil {
		return Answer{State: Unknown, Detail: "recorded in the request"}
	}
	detail := a.Detail
	if detail == "" {
		detail = "recorded in the request"
	}
	return Answer{State: a.State, Detail: detail}
}

// recordedEvidence answers from the recorded answers, as lockwarden's
// `policy eval` does: where two locks ask the same question with different
// answers, the safer one wins (alive over unknown over dead).
type recordedEvidence struct {
	local   *string
	answers map[string]Answer
}

func (r *recordedEvidence) LocalHostname() (string, bool) {
	if r.local == nil {
		return "", false
	}
	return *r.local, true
}

func (r *recordedEvidence) Ask(_ context.Context, qs []Question) ([]Answer, error) {
	out := make([]Answer, len(qs))
	for i, q := range qs {
		a, ok := r.answers[questionKey(q)]
		if !ok {
			a = Answer{State: Unknown, Detail: "no answer recorded"}
		}
		out[i] = a
	}
	return out, nil
}

func questionKey(q Question) string {
	if q.Kind == ProcessQuestion {
		return fmt.Sprintf("p\x00%s\x00%d\x00%d", q.Hostname, q.PID, q.Since.UnixNano())
	}
	return fmt.Sprintf("h\x00%s\x00%d", q.Hostname, q.Since.UnixNano())
}

func (r *recordedEvidence) merge(key string, a Answer) {
	safety := map[State]int{Dead: 0, Unknown: 1, Alive: 2}
	if old, ok := r.answers[key]; !ok || safety[a.State] > safety[old.State] {
		r.answers[key] = a
	}
}

type fixedClock time.Time

func (c fixedClock) Now() time.Time { return time.Time(c) }

// prepare turns a recorded case into a request and capabilities.
func (c *recordedCase) prepare() (*Request, Capabilities) {
	evidence := &recordedEvidence{local: c.LocalHostname, answers: map[string]Answer{}}
	req := &Request{Repository: c.Repository, Unreadable: c.Unreadable, Settings: c.Settings}
	for _, l := range c.Locks {
		req.Locks = append(req.Locks, l.Lock)
		process := Question{Kind: ProcessQuestion, Hostname: l.Hostname, PID: l.PID, Since: l.Time}
		host := Question{Kind: HostQuestion, Hostname: l.Hostname, Since: l.Time}
		evidence.merge(questionKey(process), l.Process.answer())
		evidence.merge(questionKey(host), l.Host.answer())
	}
	return req, Capabilities{Clock: fixedClock(c.Now), Liveness: evidence}
}

// observed is what every lockwarden host reports for a case.
func observed(res Result, err error) map[string]any {
	if refused, ok := err.(*RefusedError); ok {
		return map[string]any{"error": map[string]any{"kind": refused.Kind, "message": refused.Message}}
	}
	if err != nil {
		return map[string]any{"host-error": err.Error()}
	}
	logs := []map[string]any{}
	for _, l := range res.Logs {
		logs = append(logs, map[string]any{"level": string(l.Level), "message": l.Message})
	}
	verdicts := []map[string]any{}
	for _, v := range res.Verdicts.All() {
		verdicts = append(verdicts, map[string]any{"id": v.ID, "action": string(v.Action), "rule": v.Rule, "reason": v.Reason})
	}
	return map[string]any{"verdicts": verdicts, "logs": logs}
}

// caseFiles are the *.json files of dir, sorted, by name without .json.
func caseFiles(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = strings.TrimSuffix(filepath.Base(f), ".json")
	}
	return names, nil
}

func readCase(dir, name string) (*recordedCase, error) {
	b, err := os.ReadFile(filepath.Join(dir, name+".json"))
	if err != nil {
		return nil, err
	}
	var c recordedCase
	return &c, json.Unmarshal(b, &c)
}
