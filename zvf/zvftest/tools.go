package zvftest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The tests that run outside tools (node and npm packages, Draco's
// decoder, Chromium, Python) skip without them, unless their
// ZVFSERVE_REQUIRE_... variable is set (.ci/run sets them, having
// installed the tools): then a missing tool is a failure.

// SkipOrFail skips tb for want of an outside tool (msg says which), or
// fails it when the environment variable require is set.
func SkipOrFail(tb testing.TB, require, msg string) {
	tb.Helper()
	if os.Getenv(require) != "" {
		tb.Fatal(require + " is set but " + msg)
	}
	tb.Skip(msg)
}

// Tool is the path of the first of names found on PATH; without any,
// SkipOrFail(tb, require, msg).
func Tool(tb testing.TB, require, msg string, names ...string) string {
	tb.Helper()
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	SkipOrFail(tb, require, msg)
	return ""
}

// CICache is the folder .ci/run installs npm packages and builds into,
// outside the checkout: $ZVFSERVE_CI_CACHE, else ~/.cache/zvfserve-ci.
func CICache(tb testing.TB) string {
	tb.Helper()
	if root := os.Getenv("ZVFSERVE_CI_CACHE"); root != "" {
		return root
	}
	home, err := os.UserHomeDir()
	if err != nil {
		tb.Fatal(err)
	}
	return filepath.Join(home, ".cache", "zvfserve-ci")
}

// NeuroglancerLib is the lib folder of the npm neuroglancer package that
// .ci/build-neuroglancer installs beside the page it builds,
// $ZVFSERVE_NEUROGLANCER_DIST (.ci/run exports it; locally: export
// ZVFSERVE_NEUROGLANCER_DIST=$(.ci/build-neuroglancer)), checked to hold
// file (a path inside lib). Without it the test is skipped, or fails
// when ZVFSERVE_REQUIRE_NEUROGLANCER is set.
func NeuroglancerLib(tb testing.TB, file string) string {
	tb.Helper()
	const require = "ZVFSERVE_REQUIRE_NEUROGLANCER"
	dist := os.Getenv("ZVFSERVE_NEUROGLANCER_DIST")
	if dist == "" {
		SkipOrFail(tb, require, "ZVFSERVE_NEUROGLANCER_DIST is not set: export ZVFSERVE_NEUROGLANCER_DIST=$(.ci/build-neuroglancer)")
	}
	lib := filepath.Join(filepath.Dir(dist), "node_modules", "neuroglancer", "lib")
	if _, err := os.Stat(filepath.Join(lib, file)); err != nil {
		SkipOrFail(tb, require, fmt.Sprintf("Neuroglancer's npm package has no %s in %s: run .ci/build-neuroglancer", file, lib))
	}
	return lib
}
