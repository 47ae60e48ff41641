package zvftest

import (
	"os"
	"runtime/debug"
)

// CollectLess makes the garbage collector of a test binary run a quarter
// as often (GOGC=400), its heap held near 1 GiB (a soft limit), unless
// GOGC or GOMEMLIMIT say otherwise. The heaviest packages' tests spent
// 6-10 % of their CPU in the collector; go test ./... on 2 cores is
// CPU-bound, and their peak heap (0.2-0.5 GB) has room to grow. Tests of
// allocation count bytes allocated (testing.AllocsPerRun, TotalAlloc),
// which the collector's pacing does not change. Call it first in TestMain.
func CollectLess() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(1 << 30)
	}
}
