package lockwarden

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BenchmarkEvaluate measures what make bench measures in wasmtime: a fresh
// instance and one evaluation of the first suite's component, on each of
// the fixtures' bench cases (bench/src/go_host.rs writes them and runs
// `go test -run '^$' -bench BenchmarkEvaluate`).
func BenchmarkEvaluate(b *testing.B) {
	f := loadFixturesB(b)
	if len(f.BenchCases) == 0 {
		b.Skip("the fixtures name no bench cases")
	}
	policy, err := f.load(b, "default", f.Suites[0].Component, Limits{Deadline: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	defer policy.Close(context.Background())
	for _, path := range f.BenchCases {
		c, err := readCase(filepath.Dir(path), strings.TrimSuffix(filepath.Base(path), ".json"))
		if err != nil {
			b.Fatal(err)
		}
		req, caps := c.prepare()
		b.Run(fmt.Sprintf("locks=%d", len(req.Locks)), func(b *testing.B) {
			for b.Loop() {
				if _, err := policy.Evaluate(context.Background(), caps, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
