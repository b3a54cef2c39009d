package lockwarden

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkEvaluate measures what lockwarden's `policy bench` measures in
// wasmtime: fresh instances and one evaluation of the default policy, with
// 1 and 10,000 locks (run through tests/e2e/go_host.rs's fixtures:
// LOCKWARDEN_GO_HOST_FIXTURES=... go test -run - -bench .).
func BenchmarkEvaluate(b *testing.B) {
	f := loadFixturesB(b)
	policy, err := f.load(b, "default", f.Suites[0].Component, Limits{Deadline: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	defer policy.Close(context.Background())
	for _, n := range []int{1, 10_000} {
		req := sampleRequest(0, nil)
		req.Locks = make([]Lock, n)
		for i := range req.Locks {
			req.Locks[i] = Lock{ID: fmt.Sprintf("%064x", i), Time: testNow.Add(-time.Duration(i) * time.Second),
				Hostname: "other-host", Username: "root", PID: int64(i)}
		}
		b.Run(fmt.Sprintf("locks=%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := policy.Evaluate(context.Background(), testCaps(), req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
