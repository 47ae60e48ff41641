package zvftest

import (
	"os"
	"testing"
)

// EndToEnd skips tb unless the end-to-end tests were asked for:
// ZVFSERVE_E2E=1 (.ci/run sets it). They start server processes, nginx or
// an image build, or run for many seconds, so a plain go test ./... leaves
// them out. require names the test's ZVFSERVE_REQUIRE_... variable, if it
// has one: set to 1, it also runs the test (and makes a missing tool a
// failure, which the test checks itself).
func EndToEnd(tb testing.TB, require ...string) {
	tb.Helper()
	if os.Getenv("ZVFSERVE_E2E") == "1" {
		return
	}
	for _, v := range require {
		if os.Getenv(v) == "1" {
			return
		}
	}
	tb.Skip("end-to-end test: set ZVFSERVE_E2E=1 to run it")
}
