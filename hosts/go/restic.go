package lockwarden

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"time"
)

// The bounds on what restic prints that RequestFromRestic reads.
const (
	maxLocks      = 100_000
	maxLockOutput = 64 << 10
)

// lockID is a lock file's name as restic lists it.
var lockID = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ParseLockIDs reads what `restic list locks` prints: one lock id per line.
func ParseLockIDs(out []byte) ([]string, error) {
	var ids []string
	scanner := bufio.NewScanner(bytes.NewReader(out))
	for scanner.Scan() {
		line := scanner.Text()
		if line == "" {
			continue
		}
		if !lockID.MatchString(line) {
			return nil, fmt.Errorf("restic list locks printed %q, which is no lock id", line)
		}
		if len(ids) == maxLocks {
			return nil, fmt.Errorf("restic list locks printed more than %d ids", maxLocks)
		}
		ids = append(ids, line)
	}
	return ids, scanner.Err()
}

// ParseLock reads what `restic cat lock ID` prints: the lock's JSON.
func ParseLock(id string, out []byte) (Lock, error) {
	if len(out) > maxLockOutput {
		return Lock{}, fmt.Errorf("lock %s: %d bytes", id, len(out))
	}
	var raw struct {
		Time      *time.Time `json:"time"`
		Exclusive bool       `json:"exclusive"`
		Hostname  string     `json:"hostname"`
		Username  string     `json:"username"`
		PID       int64      `json:"pid"`
		UID       uint32     `json:"uid"`
		GID       uint32     `json:"gid"`
	}
	if err := json.Unmarshal(out, &raw); err != nil {
		return Lock{}, fmt.Errorf("lock %s: %w", id, err)
	}
	if raw.Time == nil {
		return Lock{}, fmt.Errorf("lock %s has no time", id)
	}
	return Lock{ID: id, Time: *raw.Time, Exclusive: raw.Exclusive, Hostname: raw.Hostname,
		Username: raw.Username, PID: raw.PID, UID: raw.UID, GID: raw.GID}, nil
}

// ParseConfig reads what `restic cat config` prints: the repository's id
// and format version.
func ParseConfig(out []byte) (id string, version uint32, err error) {
	var raw struct {
		ID      string `json:"id"`
		Version uint32 `json:"version"`
	}
	if err := json.Unmarshal(out, &raw); err != nil {
		return "", 0, fmt.Errorf("restic cat config: %w", err)
	}
	return raw.ID, raw.Version, nil
}

// Restic runs restic: the arguments, and what it printed on stdout. A Go
// program runs `restic` with exec.CommandContext under a timeout.
type Restic func(args ...string) ([]byte, error)

// RequestFromRestic builds a request from what restic prints: `cat
// config`, `list locks`, and `cat lock ID` for each lock, so that a Go
// program needs no lock decoder of its own. A lock restic cannot print or
// that does not parse is an unreadable file (restic does not say its size
// or storage time, so the policy may not remove it). Location and backend
// are the caller's.
func RequestFromRestic(restic Restic, location, backend string, settings map[string]string) (*Request, error) {
	config, err := restic("cat", "config", "--no-lock")
	if err != nil {
		return nil, fmt.Errorf("restic cat config: %w", err)
	}
	id, version, err := ParseConfig(config)
	if err != nil {
		return nil, err
	}
	list, err := restic("list", "locks", "--no-lock")
	if err != nil {
		return nil, fmt.Errorf("restic list locks: %w", err)
	}
	ids, err := ParseLockIDs(list)
	if err != nil {
		return nil, err
	}
	req := &Request{Repository: Repository{ID: id, Location: location, Backend: backend, Version: version},
		Settings: settings}
	for _, id := range ids {
		out, err := restic("cat", "lock", id, "--no-lock")
		var lock Lock
		if err == nil {
			lock, err = ParseLock(id, out)
		}
		if err != nil {
			req.Unreadable = append(req.Unreadable, UnreadableLock{ID: id, Problem: err.Error()})
			continue
		}
		req.Locks = append(req.Locks, lock)
	}
	return req, nil
}
