package lockwarden

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

var testNow = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// sampleRequest is two locks (31 and 29 minutes old, on another host) and
// an empty lock file stored age ago (no age evidence when 0).
func sampleRequest(age time.Duration, settings map[string]string) *Request {
	lock := func(n int, old time.Duration) Lock {
		return Lock{ID: strings.Repeat(string(rune('a'+n)), 64), Time: testNow.Add(-old),
			Hostname: "other-host", Username: "root", PID: int64(n)}
	}
	req := &Request{
		Repository: Repository{ID: "5e1f", Location: "/srv/restic", Backend: "local", Version: 2},
		Locks:      []Lock{lock(1, 31*time.Minute), lock(2, 29*time.Minute)},
		Unreadable: []UnreadableLock{{ID: strings.Repeat("e", 64), Problem: "empty file"}},
		Settings:   settings,
	}
	if age > 0 {
		at := testNow.Add(-age)
		req.Unreadable[0].StoredAt = &at
	}
	return req
}

func testCaps() Capabilities {
	local := "vm"
	return Capabilities{Clock: fixedClock(testNow), Liveness: &recordedEvidence{local: &local, answers: map[string]Answer{}}}
}

// TestMisbehavingPoliciesAreStopped: each misbehaving guest fails as in
// lockwarden, within 2 s, twice (fresh instances each time), and the
// default policy still evaluates beside it.
func TestMisbehavingPoliciesAreStopped(t *testing.T) {
	f := loadFixtures(t)
	good := f.mustLoad(t, "default", f.Suites[0].Component)
	for _, c := range []struct {
		guest, setting string
		kind           error
		says           string
	}{
		{"spin", "", ErrDeadline, "did not finish within 1000 ms"},
		{"hog", "", ErrMemoryLimit, "over the limit of 67108864 bytes"},
		{"panic", "", ErrTrap, "policy bug: index out of range"},
		{"omit", "", ErrBadVerdicts, "1 verdicts for 2 locks"},
		{"duplicate", "", ErrBadVerdicts, "3 verdicts for 2 locks"},
		{"invent", "", ErrBadVerdicts, "2 verdicts for 1 unreadable files"},
		{"remove-unreadable", "", ErrBadVerdicts, "at least 30m"},
		{"misbehave-python", "spin", ErrDeadline, "did not finish within 1000 ms"},
		{"misbehave-python", "hog", ErrMemoryLimit, "over the limit of 67108864 bytes"},
		{"misbehave-js", "spin", ErrDeadline, "did not finish within 1000 ms"},
		{"misbehave-js", "hog", ErrMemoryLimit, "over the limit of 67108864 bytes"},
	} {
		t.Run(c.guest+"/"+c.setting, func(t *testing.T) {
			bad := f.mustLoad(t, c.guest, f.guest(t, c.guest))
			for round := range 2 {
				started := time.Now()
				_, err := bad.Evaluate(context.Background(), testCaps(), sampleRequest(0, map[string]string{"misbehave": c.setting}))
				if !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.says) {
					t.Fatalf("round %d: want %v saying %q, got %v", round, c.kind, c.says, err)
				}
				if took := time.Since(started); took > 2*time.Second {
					t.Errorf("round %d: the error took %v", round, took)
				}
				if res, err := good.Evaluate(context.Background(), testCaps(), sampleRequest(0, nil)); err != nil || len(res.Verdicts.All()) != 3 {
					t.Fatalf("the default policy after %s: %v %v", c.guest, res, err)
				}
			}
		})
	}
}

// TestRefusals: an error result is the policy's refusal; no environment
// or arguments are granted; an unreadable file is removed only with 30
// minutes of age evidence.
func TestRefusals(t *testing.T) {
	f := loadFixtures(t)
	for guest, says := range map[string]string{"fail": "the policy gave up on purpose", "snoop": "env vars: 0, args: 0"} {
		_, err := f.mustLoad(t, guest, f.guest(t, guest)).Evaluate(context.Background(), testCaps(), sampleRequest(0, nil))
		var refused *RefusedError
		if !errors.As(err, &refused) || !strings.Contains(err.Error(), says) {
			t.Errorf("%s: want a refusal saying %q, got %v", guest, says, err)
		}
	}
	remover := f.mustLoad(t, "remove-unreadable", f.guest(t, "remove-unreadable"))
	res, err := remover.Evaluate(context.Background(), testCaps(), sampleRequest(30*time.Minute, nil))
	if err != nil || res.Verdicts.Unreadable[0].Action != Remove {
		t.Errorf("30 minutes of storage age is enough: %v %v", res, err)
	}
}

// TestForbiddenComponentsAreRefusedAtLoad: WASI clocks, files, randomness,
// sockets and HTTP, and other contract versions, are refused naming them.
func TestForbiddenComponentsAreRefusedAtLoad(t *testing.T) {
	f := loadFixtures(t)
	for guest, c := range map[string]struct {
		kind error
		says []string
	}{
		"wall-clock":            {ErrForbiddenImport, []string{"wasi:clocks/", "lockwarden:policy/clock"}},
		"read-file":             {ErrForbiddenImport, []string{"wasi:filesystem/"}},
		"misbehave-python-wasi": {ErrForbiddenImport, []string{"wasi:clocks/wall-clock", "wasi:filesystem/preopens", "wasi:random/random", "wasi:sockets/tcp"}},
		"misbehave-js-wasi":     {ErrForbiddenImport, []string{"wasi:clocks/wall-clock", "wasi:filesystem/preopens", "wasi:random/random", "wasi:http/outgoing-handler"}},
		"wrong-contract":        {ErrContract, []string{"lockwarden:policy@0.9.0", "0.2.x"}},
	} {
		_, err := f.load(t, guest, f.guest(t, guest), Limits{})
		if !errors.Is(err, c.kind) {
			t.Errorf("%s: want %v, got %v", guest, c.kind, err)
			continue
		}
		for _, s := range c.says {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: %q does not name %s", guest, err, s)
			}
		}
	}
}
