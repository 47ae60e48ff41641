package sharding

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// neuroglancerLib finds the lib folder of the npm neuroglancer package
// .ci/build-neuroglancer installs beside the page it builds,
// ZVFSERVE_NEUROGLANCER_DIST (.ci/run exports it; locally:
// export ZVFSERVE_NEUROGLANCER_DIST=$(.ci/build-neuroglancer)). Without it,
// or without node, the test is skipped, unless ZVFSERVE_REQUIRE_NEUROGLANCER
// is set (CI sets it).
func neuroglancerLib(t *testing.T) string {
	t.Helper()
	msg := "ZVFSERVE_NEUROGLANCER_DIST is not set: export ZVFSERVE_NEUROGLANCER_DIST=$(.ci/build-neuroglancer)"
	if dist := os.Getenv("ZVFSERVE_NEUROGLANCER_DIST"); dist != "" {
		lib := filepath.Join(filepath.Dir(dist), "node_modules", "neuroglancer", "lib")
		_, err := os.Stat(filepath.Join(lib, "util", "hash.js"))
		_, nerr := exec.LookPath("node")
		if err == nil && nerr == nil {
			return lib
		}
		msg = fmt.Sprintf("Neuroglancer's npm package is not at %s or node is missing: run .ci/build-neuroglancer", lib)
	}
	if os.Getenv("ZVFSERVE_REQUIRE_NEUROGLANCER") != "" {
		t.Fatal("ZVFSERVE_REQUIRE_NEUROGLANCER is set but " + msg)
	}
	t.Skip(msg)
	return ""
}

// TestHashMatchesNeuroglancer hashes random keys with Neuroglancer's own
// function and compares.
func TestHashMatchesNeuroglancer(t *testing.T) {
	lib := neuroglancerLib(t)
	rng := rand.New(rand.NewPCG(28, 5))
	keys := []uint64{0, 1, math.MaxUint64, 1 << 32, 1<<32 - 1}
	for range 2000 {
		keys = append(keys, rng.Uint64()>>rng.UintN(64))
	}
	var in strings.Builder
	for _, k := range keys {
		fmt.Fprintln(&in, k)
	}
	cmd := exec.Command("node", filepath.Join("testdata", "ngmurmur.mjs"), filepath.Join(lib, "util", "hash.js"))
	cmd.Stdin = strings.NewReader(in.String())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	lines := strings.Fields(string(out))
	if len(lines) != len(keys) {
		t.Fatalf("%d hashes for %d keys", len(lines), len(keys))
	}
	s := Spec{Hash: Murmur}
	for i, k := range keys {
		want, err := strconv.ParseUint(lines[i], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.HashKey(k); got != want {
			t.Fatalf("key %d: %#x, Neuroglancer %#x", k, got, want)
		}
	}
}
