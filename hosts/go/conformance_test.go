package lockwarden

import (
	"context"
	"encoding/json"
	"os"
	"reflect"
	"testing"
)

// rustAnswers is what `lockwarden policy conformance --json` printed.
type rustAnswers struct {
	Policy struct {
		Name string `json:"name"`
	} `json:"policy"`
	Cases []struct {
		Name     string         `json:"name"`
		Skipped  bool           `json:"skipped"`
		Observed map[string]any `json:"observed"`
	} `json:"cases"`
}

// TestConformance runs every case of every suite and requires lockwarden's
// answers exactly: verdicts with their reasons, log lines and refusals.
func TestConformance(t *testing.T) {
	f := loadFixtures(t)
	if len(f.Suites) == 0 {
		t.Fatal("no suites in the fixtures")
	}
	for _, suite := range f.Suites {
		t.Run(suite.Name, func(t *testing.T) {
			t.Parallel()
			policy, err := f.load(t, suite.Name, suite.Component, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			defer policy.Close(context.Background())
			var rust rustAnswers
			b, err := os.ReadFile(suite.Rust)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &rust); err != nil {
				t.Fatal(err)
			}
			if policy.Info().Name != rust.Policy.Name {
				t.Errorf("policy %q, lockwarden says %q", policy.Info().Name, rust.Policy.Name)
			}
			runSuite(t, policy, suite.Cases, &rust)
		})
	}
}

// runSuite compares every case's answer with lockwarden's.
func runSuite(t *testing.T, policy *Policy, dir string, rust *rustAnswers) {
	names, err := caseFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 || len(names) != len(rust.Cases) {
		t.Fatalf("%d cases in %s, lockwarden answered %d", len(names), dir, len(rust.Cases))
	}
	for i, name := range names {
		want := rust.Cases[i]
		if want.Name != name {
			t.Fatalf("case %d is %s here, %s in lockwarden's answers", i, name, want.Name)
		}
		if want.Skipped {
			continue
		}
		c, err := readCase(dir, name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		req, caps := c.prepare()
		res, err := policy.Evaluate(context.Background(), caps, req)
		got := roundTrip(t, observed(res, err))
		if !reflect.DeepEqual(got, roundTrip(t, want.Observed)) {
			t.Errorf("case %s: the hosts disagree\nlockwarden: %v\nGo:         %v", name, want.Observed, got)
		}
	}
}

// roundTrip is v as encoding/json decodes it, so that values compare equal
// whatever Go types built them.
func roundTrip(t *testing.T, v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
