package benchtest_test

import (
	"flag"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/zvftest/benchtest"
)

// TestLoop: Loop warms once outside the timed loop, then calls f once per
// iteration, and reports allocations and CPU time per call.
func TestLoop(t *testing.T) {
	// A fixed count instead of the default second of iterations: the test
	// checks the loop's shape, not its speed. (Not parallel: the flag is
	// the process's.)
	bt := flag.Lookup("test.benchtime")
	old := bt.Value.String()
	if err := bt.Value.Set("100x"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bt.Value.Set(old) })
	calls := 0
	var sink []byte
	r := testing.Benchmark(func(b *testing.B) {
		calls = 0
		benchtest.Loop(b, func() {
			calls++
			sink = make([]byte, 64+calls%2)
		})
	})
	if r.N != 100 || calls != r.N+1 {
		t.Fatalf("f ran %d times for %d iterations; want one warming call more", calls, r.N)
	}
	if _, ok := r.Extra["cpu-ns/op"]; !ok {
		t.Errorf("no cpu-ns/op reported: %v", r.Extra)
	}
	if r.AllocsPerOp() < 1 {
		t.Errorf("allocations not reported: %d allocs/op", r.AllocsPerOp())
	}
	_ = sink
}
