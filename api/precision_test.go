package api_test

import (
	"crypto/sha256"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/api"
)

var updateUnquantized = flag.Bool("update-unquantized", false, "rewrite testdata/unquantized-bin.sha256 from this code's answers")

// binaryPaths are object and chunk answers in the binary format over the
// demo stores (paging's, every geometry): three objects and three chunks
// at every level. The bbox route's are in TestUnpagedAnswersUnchanged.
func binaryPaths(t *testing.T) []string {
	t.Helper()
	stores, err := pagingStores()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range stores {
		for _, n := range s.Levels() {
			l, err := s.Level(n)
			if err != nil {
				t.Fatal(err)
			}
			for id := range min(l.Info().ObjectCount, 3) {
				out = append(out, fmt.Sprintf("/api/v1/stores/%s/objects/%d?level=%d&attributes=*&f=bin", s.Name(), id, n))
			}
			keys := l.Keys()
			for _, k := range keys[:min(len(keys), 3)] {
				out = append(out, fmt.Sprintf("/api/v1/stores/%s/levels/%d/chunks/%s?attributes=*&f=bin", s.Name(), n, k))
			}
		}
	}
	return out
}

// TestBinaryWithoutPrecisionUnchanged: without precision= a binary object
// or chunk answer is byte for byte what it was before precision= existed
// (the SHA-256 of each body, against testdata written by the code before
// that change).
func TestBinaryWithoutPrecisionUnchanged(t *testing.T) {
	t.Parallel()
	stores, err := pagingStores()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := api.New(api.Options{Stores: stores, MaxVertices: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	for _, path := range binaryPaths(t) {
		code, _, body := serveFull(t, srv.Handler(), path)
		if code != http.StatusOK {
			t.Fatalf("%s: %d %.300s", path, code, body)
		}
		fmt.Fprintf(&got, "%x %s\n", sha256.Sum256(body), path)
	}
	const golden = "testdata/unquantized-bin.sha256"
	if *updateUnquantized {
		if err := os.WriteFile(golden, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	g, w := strings.Split(got.String(), "\n"), strings.Split(string(want), "\n")
	if len(g) != len(w) {
		t.Fatalf("%d answers, %s has %d", len(g), golden, len(w))
	}
	for i := range g {
		if g[i] != w[i] {
			t.Errorf("changed: %s\n   was: %s", g[i], w[i])
		}
	}
}
