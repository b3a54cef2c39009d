package lockwarden

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/tetratelabs/wazero"
)

// FixturesVariable names the JSON file that tells the tests where the
// components and lockwarden's own answers are. tests/e2e/go_host.rs writes
// it and runs `go test`; `go test -short` without it skips the tests that
// need it.
const FixturesVariable = "LOCKWARDEN_GO_HOST_FIXTURES"

// fixtures is that file's content.
type fixtures struct {
	// Suites are components, each with a directory of cases and
	// `lockwarden policy conformance --json`'s answers on them.
	Suites []struct {
		Name      string `json:"name"`
		Component string `json:"component"`
		Cases     string `json:"cases"`
		Rust      string `json:"rust"`
	} `json:"suites"`
	// Guests are the misbehaving test guests by name (spin, hog, panic,
	// wrong-contract, misbehave-python, misbehave-js-wasi, ...).
	Guests map[string]string `json:"guests"`
	// CacheDir keeps compiled code between test runs.
	CacheDir string `json:"cache_dir"`
	// BenchCases are recorded cases (conformance files) that
	// BenchmarkEvaluate evaluates with the first suite's component: make
	// bench writes the requests it also times in lockwarden.
	BenchCases []string `json:"bench_cases"`
}

// loadFixturesB is loadFixtures for a benchmark: skipped without them.
func loadFixturesB(b *testing.B) *fixtures {
	path := os.Getenv(FixturesVariable)
	if path == "" {
		b.Skipf("%s is not set", FixturesVariable)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	var f fixtures
	if err := json.Unmarshal(raw, &f); err != nil {
		b.Fatal(err)
	}
	return &f
}

// loadFixtures reads the fixtures, failing (or, with -short, skipping) the
// test when the variable is unset.
func loadFixtures(t *testing.T) *fixtures {
	t.Helper()
	path := os.Getenv(FixturesVariable)
	if path == "" {
		if testing.Short() {
			t.Skipf("%s is not set (tests/e2e/go_host.rs sets it)", FixturesVariable)
		}
		t.Fatalf("%s is not set: run these tests through `cargo test ... --test e2e go_host` (make test), "+
			"or with -short to skip the tests that need built components", FixturesVariable)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f fixtures
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &f
}

// load loads the component at path.
func (f *fixtures) load(t testing.TB, name, path string, limits Limits) (*Policy, error) {
	t.Helper()
	binary, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Name: name, Limits: limits}
	if f.CacheDir != "" {
		cache, err := wazero.NewCompilationCacheWithDir(f.CacheDir)
		if err != nil {
			t.Fatal(err)
		}
		opts.Cache = cache
	}
	return Load(context.Background(), binary, opts)
}

// mustLoad loads the component at path or fails the test.
func (f *fixtures) mustLoad(t *testing.T, name, path string) *Policy {
	t.Helper()
	p, err := f.load(t, name, path, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(context.Background()) })
	return p
}

// guest is the path of the test guest name.
func (f *fixtures) guest(t *testing.T, name string) string {
	t.Helper()
	path, ok := f.Guests[name]
	if !ok {
		t.Fatalf("the fixtures name no guest %q", name)
	}
	return path
}
