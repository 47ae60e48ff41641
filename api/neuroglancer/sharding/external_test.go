package sharding

import (
	"crypto/sha256"
	"encoding/hex"
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

// neuroglancerLib finds the npm neuroglancer package's lib folder that
// .ci/build-neuroglancer installs beside the built page
// (ZVFSERVE_NEUROGLANCER_DIST, or the cache folder named after the harness
// files, as api/neuroglancer's browser test finds it). Without it the test
// is skipped, unless ZVFSERVE_REQUIRE_NEUROGLANCER is set (CI sets it).
func neuroglancerLib(t *testing.T) string {
	t.Helper()
	dist := os.Getenv("ZVFSERVE_NEUROGLANCER_DIST")
	if dist == "" {
		harness := filepath.Join("..", "testdata", "ngclient")
		h := sha256.New()
		for _, f := range []string{"package.json", "vite.config.js", "index.html", "src/main.js"} {
			b, err := os.ReadFile(filepath.Join(harness, f))
			if err != nil {
				t.Fatal(err)
			}
			h.Write(b)
		}
		root := os.Getenv("ZVFSERVE_CI_CACHE")
		if root == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				t.Fatal(err)
			}
			root = filepath.Join(home, ".cache", "zvfserve-ci")
		}
		dist = filepath.Join(root, "neuroglancer-"+hex.EncodeToString(h.Sum(nil))[:12], "dist")
	}
	lib := filepath.Join(filepath.Dir(dist), "node_modules", "neuroglancer", "lib")
	_, err := os.Stat(filepath.Join(lib, "util", "hash.js"))
	if _, nerr := exec.LookPath("node"); err != nil || nerr != nil {
		msg := fmt.Sprintf("Neuroglancer's npm package is not at %s or node is missing: run .ci/build-neuroglancer", lib)
		if os.Getenv("ZVFSERVE_REQUIRE_NEUROGLANCER") != "" {
			t.Fatal("ZVFSERVE_REQUIRE_NEUROGLANCER is set but " + msg)
		}
		t.Skip(msg)
	}
	return lib
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
