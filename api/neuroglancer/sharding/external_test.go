package sharding

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// neuroglancerLib is the lib folder of the npm neuroglancer package
// .ci/build-neuroglancer installs; the test needs node too.
func neuroglancerLib(t *testing.T) string {
	t.Helper()
	zvftest.Tool(t, "ZVFSERVE_REQUIRE_NEUROGLANCER", "node is not on PATH", "node")
	return zvftest.NeuroglancerLib(t, filepath.Join("util", "hash.js"))
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
