package lockwarden

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// fakeRestic answers as restic does for a repository with two locks, one
// of which restic cannot print.
func fakeRestic(args ...string) ([]byte, error) {
	a, b := strings.Repeat("a", 64), strings.Repeat("b", 64)
	switch strings.Join(args, " ") {
	case "cat config --no-lock":
		return []byte(`{"version":2,"id":"5e1f","chunker_polynomial":"3dea92648f6e83"}`), nil
	case "list locks --no-lock":
		return []byte(a + "\n" + b + "\n"), nil
	case "cat lock " + a + " --no-lock":
		return []byte(`{"time":"2026-11-30T12:58:01.5+01:00","exclusive":true,"hostname":"k8up-backup-x",` +
			`"username":"root","pid":42,"uid":1000,"gid":1001}`), nil
	case "cat lock " + b + " --no-lock":
		return nil, errors.New("exit status 1: ciphertext verification failed")
	}
	return nil, errors.New("unexpected restic " + strings.Join(args, " "))
}

func TestRequestFromRestic(t *testing.T) {
	req, err := RequestFromRestic(fakeRestic, "/srv/restic", "local", map[string]string{"stale-after": "1h"})
	if err != nil {
		t.Fatal(err)
	}
	if req.Repository != (Repository{ID: "5e1f", Location: "/srv/restic", Backend: "local", Version: 2}) {
		t.Errorf("repository %+v", req.Repository)
	}
	want := Lock{ID: strings.Repeat("a", 64), Time: time.Date(2026, 11, 30, 11, 58, 1, 5e8, time.UTC),
		Exclusive: true, Hostname: "k8up-backup-x", Username: "root", PID: 42, UID: 1000, GID: 1001}
	if len(req.Locks) != 1 || !req.Locks[0].Time.Equal(want.Time) || req.Locks[0].Hostname != want.Hostname ||
		req.Locks[0].PID != 42 || req.Locks[0].UID != 1000 || req.Locks[0].GID != 1001 || !req.Locks[0].Exclusive {
		t.Errorf("locks %+v", req.Locks)
	}
	if len(req.Unreadable) != 1 || !strings.Contains(req.Unreadable[0].Problem, "ciphertext") {
		t.Errorf("unreadable %+v", req.Unreadable)
	}
}

func TestResticOutputIsChecked(t *testing.T) {
	for _, out := range []string{"not-an-id\n", strings.Repeat("A", 64)} {
		if _, err := ParseLockIDs([]byte(out)); err == nil {
			t.Errorf("%q accepted", out)
		}
	}
	if _, err := ParseLock("x", []byte(`{"hostname":"h"}`)); err == nil {
		t.Error("a lock without a time accepted")
	}
	if _, err := ParseLock("x", []byte(`{"time":`)); err == nil {
		t.Error("broken JSON accepted")
	}
}
