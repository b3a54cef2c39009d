package lockwarden

import (
	"errors"
	"sort"
	"time"
)

// The contract's types (wit/policy.wit) as the canonical ABI lays them out.
var (
	tTimestamp  = tS64
	tOptionTime = option(tTimestamp)
	tLock       = record(tString, tTimestamp, tBool, tString, tString, tS64, tU32, tU32, tOptionTime, tOptionTime)
	tUnreadable = record(tString, tU64, tString, tOptionTime, tOptionTime)
	tRepository = record(tString, tString, tString, tU32)
	tRequest    = record(tRepository, list(tLock), list(tUnreadable), list(record(tString, tString)))
	tVerdict    = record(enum(2), tString, tString)
	tVerdicts   = record(list(tVerdict), list(tVerdict))
	tPolicyErr  = variant(tString, tString)
	tEvaluated  = variant(tVerdicts, tPolicyErr)
	tInfo       = record(tString, tString, tString, tString, list(record(tString, tString, tString)))
	tQuestion   = variant(record(tString, tS64, tTimestamp), record(tString, tTimestamp))
	tLiveness   = variant(tString, tString, tString)
	tHostname   = option(tString)
)

func nanos(t time.Time) int64 { return t.UnixNano() }

func optionalTime(t *time.Time) variantValue {
	if t == nil {
		return variantValue{}
	}
	return variantValue{tag: 1, payload: nanos(*t)}
}

// requestValue is req as the contract's evaluate-request; settings in byte
// order of their keys, as lockwarden passes them.
func requestValue(req *Request) []any {
	locks := make([]any, len(req.Locks))
	for i, l := range req.Locks {
		locks[i] = []any{l.ID, nanos(l.Time), l.Exclusive, l.Hostname, l.Username, l.PID,
			l.UID, l.GID, optionalTime(l.FirstSeen), optionalTime(l.StoredAt)}
	}
	unreadable := make([]any, len(req.Unreadable))
	for i, u := range req.Unreadable {
		unreadable[i] = []any{u.ID, u.Size, u.Problem, optionalTime(u.StoredAt), optionalTime(u.FirstSeen)}
	}
	keys := make([]string, 0, len(req.Settings))
	for k := range req.Settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	settings := make([]any, len(keys))
	for i, k := range keys {
		settings[i] = []any{k, req.Settings[k]}
	}
	r := req.Repository
	return []any{[]any{r.ID, r.Location, r.Backend, r.Version}, locks, unreadable, settings}
}

// verdictList is a lifted list<verdict>.
func verdictList(v any) []Verdict {
	items := v.([]any)
	out := make([]Verdict, len(items))
	for i, item := range items {
		f := item.([]any)
		action := Keep
		if f[0].(variantValue).tag == 1 {
			action = Remove
		}
		out[i] = Verdict{Action: action, Rule: f[1].(string), Reason: f[2].(string)}
	}
	return out
}

// evaluated is a lifted result<verdicts, policy-error>.
func evaluated(v any) (Verdicts, error) {
	result := v.(variantValue)
	if result.tag == 1 {
		e := result.payload.(variantValue)
		kind := []string{"invalid-setting", "failed"}[e.tag]
		return Verdicts{}, &RefusedError{Kind: kind, Message: e.payload.(string)}
	}
	f := result.payload.([]any)
	return Verdicts{Locks: verdictList(f[0]), Unreadable: verdictList(f[1])}, nil
}

// policyInfo is a lifted policy-info.
func policyInfo(v any) PolicyInfo {
	f := v.([]any)
	info := PolicyInfo{Name: f[0].(string), Version: f[1].(string),
		ContractVersion: f[2].(string), Description: f[3].(string)}
	for _, s := range f[4].([]any) {
		s := s.([]any)
		info.Settings = append(info.Settings, SettingInfo{s[0].(string), s[1].(string), s[2].(string)})
	}
	return info
}

// question is a lifted question.
func question(v any) Question {
	q := v.(variantValue)
	f := q.payload.([]any)
	if q.tag == 0 {
		return Question{Kind: ProcessQuestion, Hostname: f[0].(string), PID: f[1].(int64), Since: time.Unix(0, f[2].(int64)).UTC()}
	}
	return Question{Kind: HostQuestion, Hostname: f[0].(string), Since: time.Unix(0, f[1].(int64)).UTC()}
}

// answerValue is a as the contract's liveness.
func answerValue(a Answer) (variantValue, error) {
	tags := map[State]uint32{Alive: 0, Dead: 1, Unknown: 2}
	tag, ok := tags[a.State]
	if !ok {
		return variantValue{}, errors.New("an answer that is not alive, dead or unknown")
	}
	return variantValue{tag: tag, payload: a.Detail}, nil
}
