package lockwarden

import (
	"fmt"
	"sort"
	"time"
)

// The host's bounds on verdicts, as lockwarden's.
const (
	maxRule          = 128
	maxReason        = 4096
	unreadableMinAge = 30 * time.Minute
)

// checkUniqueIDs refuses a request naming an id twice, so that each verdict
// is about one file.
func checkUniqueIDs(req *Request) error {
	ids := make([]string, 0, len(req.Locks)+len(req.Unreadable))
	for _, l := range req.Locks {
		ids = append(ids, l.ID)
	}
	for _, u := range req.Unreadable {
		ids = append(ids, u.ID)
	}
	sort.Strings(ids)
	for i := 1; i < len(ids); i++ {
		if ids[i] == ids[i-1] {
			return failure(ErrBadRequest, "cannot evaluate: lock id `%s` appears twice in the request", ids[i])
		}
	}
	return nil
}

// validate checks the verdicts against the request: one per input, rules
// short, and no removal of an unreadable file without 30 minutes of the
// host's own age evidence (stored-at or first-seen) against now.
func validate(req *Request, now int64, v Verdicts) error {
	if len(v.Locks) != len(req.Locks) {
		return fmt.Errorf("%d verdicts for %d locks", len(v.Locks), len(req.Locks))
	}
	if len(v.Unreadable) != len(req.Unreadable) {
		return fmt.Errorf("%d verdicts for %d unreadable files", len(v.Unreadable), len(req.Unreadable))
	}
	for _, verdict := range v.All() {
		if len(verdict.Rule) > maxRule {
			return fmt.Errorf("a rule of %d bytes: a rule is a name of at most %d bytes", len(verdict.Rule), maxRule)
		}
	}
	for i, file := range req.Unreadable {
		if v.Unreadable[i].Action == Remove && !oldEnough(file, now) {
			return fmt.Errorf("`remove` for `%s`, an unreadable file for which the host holds no age evidence "+
				"of at least 30m: the host removes an unreadable file only then, whatever a policy says", file.ID)
		}
	}
	return nil
}

func oldEnough(file UnreadableLock, now int64) bool {
	for _, at := range []*time.Time{file.StoredAt, file.FirstSeen} {
		if at != nil && now-at.UnixNano() >= int64(unreadableMinAge) {
			return true
		}
	}
	return false
}

// paired gives each verdict its input's id and cuts its reason.
func paired(req *Request, v Verdicts) Verdicts {
	for i := range v.Locks {
		v.Locks[i].ID = req.Locks[i].ID
		v.Locks[i].Reason = cut(v.Locks[i].Reason, maxReason)
	}
	for i := range v.Unreadable {
		v.Unreadable[i].ID = req.Unreadable[i].ID
		v.Unreadable[i].Reason = cut(v.Unreadable[i].Reason, maxReason)
	}
	return v
}
