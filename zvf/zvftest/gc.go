package zvftest

import (
	"os"
	"runtime/debug"

	"github.com/zvfserve/zvfserve/zvf/zvftest/alloctest"
)

// CollectLess makes the garbage collector of a test binary run a quarter
// as often (GOGC=400) under a soft 2 GiB cap, unless GOGC or GOMEMLIMIT
// say otherwise. The heaviest packages' tests spent 6-10 % of their CPU
// in the collector; go test ./... on 2 cores is CPU-bound, and their peak
// (0.2-0.5 GB, 1.0-1.3 GB with this) has room. The cap is a guard, not a
// target: a limit the heap reaches makes the collector and the scavenger
// work harder than the default pacing. Tests of allocation count bytes
// allocated (testing.AllocsPerRun, TotalAlloc), which the pacing does not
// change. Call it first in TestMain. Under the race detector it does
// nothing: its shadow memory multiplies every heap, and CI's race step
// runs these packages two at a time.
func CollectLess() {
	if alloctest.Race {
		return
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(2 << 30)
	}
}
