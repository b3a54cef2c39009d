package lockwarden

import "time"

// Contract is the contract version this host implements: the WIT package
// lockwarden:policy in wit/policy.wit.
const Contract = "0.2.0"

// Lock is one lock file the host read and decrypted.
type Lock struct {
	// ID is the lock file's name (64 lowercase hex digits).
	ID string `json:"id"`
	// Time is when the holder wrote the lock, by the holder's clock.
	Time time.Time `json:"time"`
	// Exclusive is true for an exclusive lock (prune, check, ...).
	Exclusive bool `json:"exclusive"`
	// Hostname is the holder's hostname; under Kubernetes, the pod name.
	Hostname string `json:"hostname"`
	// Username is the holder's user name.
	Username string `json:"username"`
	// PID is the holder's process id in its own pid namespace.
	PID int64 `json:"pid"`
	// UID and GID are the holder's user and group id.
	UID uint32 `json:"uid"`
	GID uint32 `json:"gid"`
	// FirstSeen is when the host first saw this lock id, if it keeps a record.
	FirstSeen *time.Time `json:"first_seen,omitempty"`
	// StoredAt is when the storage last modified the file, if it says.
	StoredAt *time.Time `json:"stored_at,omitempty"`
}

// UnreadableLock is a file under locks/ that the host could not read.
type UnreadableLock struct {
	// ID is the file's name.
	ID string `json:"id"`
	// Size is its size in bytes.
	Size uint64 `json:"size"`
	// Problem says what is wrong with it, as one phrase.
	Problem string `json:"problem"`
	// StoredAt is when the storage last modified the file, if it says.
	StoredAt *time.Time `json:"stored_at,omitempty"`
	// FirstSeen is when the host first saw it, if it keeps a record.
	FirstSeen *time.Time `json:"first_seen,omitempty"`
}

// Repository is the repository the locks belong to.
type Repository struct {
	// ID is the repository id from its config file.
	ID string `json:"id"`
	// Location is where it is, credentials removed.
	Location string `json:"location"`
	// Backend is "local", "rest" or restic's scheme name.
	Backend string `json:"backend"`
	// Version is the repository format version.
	Version uint32 `json:"version"`
}

// Request is everything a policy gets for one evaluation but the facts it
// asks for through the capabilities.
type Request struct {
	Repository Repository       `json:"repository"`
	Locks      []Lock           `json:"locks"`
	Unreadable []UnreadableLock `json:"unreadable"`
	// Settings are the user's settings; keys not given take their defaults.
	Settings map[string]string `json:"settings"`
}

// Action is what to do with one lock.
type Action string

// The actions.
const (
	Keep   Action = "keep"
	Remove Action = "remove"
)

// Verdict is a policy's decision about one lock or unreadable file.
type Verdict struct {
	// ID names the lock or file (the host pairs it; policies name none).
	ID     string `json:"id"`
	Action Action `json:"action"`
	// Rule is a stable machine-readable name, such as "expired".
	Rule string `json:"rule"`
	// Reason is one sentence for humans.
	Reason string `json:"reason"`
}

// Verdicts are the checked decisions, in the request's order.
type Verdicts struct {
	Locks      []Verdict `json:"locks"`
	Unreadable []Verdict `json:"unreadable"`
}

// All returns every verdict, locks first, as lockwarden reports them.
func (v Verdicts) All() []Verdict {
	return append(append([]Verdict{}, v.Locks...), v.Unreadable...)
}

// SettingInfo describes one setting a policy accepts.
type SettingInfo struct {
	Name         string `json:"name"`
	DefaultValue string `json:"default_value"`
	Help         string `json:"help"`
}

// PolicyInfo is what a policy says about itself.
type PolicyInfo struct {
	Name            string        `json:"name"`
	Version         string        `json:"version"`
	ContractVersion string        `json:"contract_version"`
	Description     string        `json:"description"`
	Settings        []SettingInfo `json:"settings"`
}
