package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// syncBuffer collects output written by the server goroutine.
type syncBuffer struct{ apitest.Buffer }

// await returns the submatches of re in the output as soon as it matches;
// nil if stop is closed (the writer is gone) or within passes first.
func (s *syncBuffer) await(re *regexp.Regexp, within time.Duration, stop <-chan struct{}) []string {
	var m []string
	s.Await(within, stop, func(text string) bool {
		m = re.FindStringSubmatch(text)
		return m != nil
	})
	return m
}

// listening matches the line serve prints once it listens.
var listening = regexp.MustCompile(`on (http://[^/\s]+)/`)

// unknownVersionCopy is a copy of the 0.7 store src that claims ZVF 1.0.0,
// a version no server knows: a store that does not open.
func unknownVersionCopy(t *testing.T, src string) string {
	t.Helper()
	dir := zvftest.CopyTree(t, src)
	root := filepath.Join(dir, "zarr.json")
	b, err := os.ReadFile(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(root, []byte(strings.Replace(string(b), `"0.7.0"`, `"1.0.0"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestServeBadStoreBesideGood: serve starts with a store that does not
// open, serves it as a problem beside a healthy one, and picks it up by
// itself (--revalidate) once it is fixed.
func TestServeBadStoreBesideGood(t *testing.T) {
	t.Parallel()
	good := "../../testdata/zvf-reference/graph.zarrvectors"
	bad := unknownVersionCopy(t, good)
	s := startServe(t, "--revalidate", "50ms", "good="+good, "bad="+bad)
	s.exitsClean(t)
	base, errs := s.base, s.errs
	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	const q = "/bbox?min=390,223,585&max=480,313,675"
	code, want := get("/api/v1/stores/good" + q)
	if n := graphBoxCount(t); code != 200 || !strings.Contains(want, fmt.Sprintf(`"count":%d,`, n)) {
		t.Fatalf("good store: %d, the reader counts %d: %.200s", code, n, want)
	}
	want = strings.Replace(want, `"store":"good"`, `"store":"bad"`, 1)
	if code, body := get("/api/v1/stores/bad" + q); code != http.StatusUnprocessableEntity || !strings.Contains(body, "zv_version") {
		t.Fatalf("bad store: %d %.200s", code, body)
	}
	if !strings.Contains(errs.String(), "store does not open") {
		t.Fatalf("the log does not say which store failed: %s", errs.String())
	}
	// The replica is not ready while a store it serves does not open: a
	// load balancer sends its traffic to replicas that can answer it.
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || body != "1 of 2 stores not serving: bad\n" {
		t.Fatalf("/readyz with a store that does not open: %d %q", code, body)
	}
	zvftest.CopyInto(t, filepath.Join(good, "zarr.json"), filepath.Join(bad, "zarr.json"))
	if errs.await(regexp.MustCompile(`store opens; serving it" store=bad`), 10*time.Second, s.exited) == nil {
		t.Fatalf("the fixed store was not picked up: %s", errs.String())
	}
	if code, body := get("/api/v1/stores/bad" + q); code != 200 || body != want {
		t.Fatalf("the fixed store: %d %.200s", code, body)
	}
	if code, body := get("/readyz"); code != http.StatusOK || body != "ready\n" {
		t.Fatalf("/readyz once every store opened: %d %q", code, body)
	}
}

// TestServeReadinessAny: --readiness any keeps a replica ready while one
// of its stores serves, and its /readyz still names the one that does
// not; an unknown value is a usage error.
func TestServeReadinessAny(t *testing.T) {
	t.Parallel()
	bad := zvftest.CopyTree(t, graphStore)
	if err := os.WriteFile(filepath.Join(bad, "zarr.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, "--readiness", "any", "good="+graphStore, "bad="+bad)
	if code, body, _ := httpGet(t, s.base+"/readyz"); code != http.StatusOK || body != "ready; 1 of 2 stores not serving: bad\n" {
		t.Fatalf("/readyz: %d %q", code, body)
	}
	if _, stderr, code := runCmd(t, "serve", "--readiness", "most", graphStore); code != 2 || !strings.Contains(stderr, "--readiness") {
		t.Fatalf("--readiness most: exit %d: %s", code, stderr)
	}
}

// graphBoxCount is the number of vertices of the graph fixture in the box
// 390,223,585 – 480,313,675, as the reader counts them.
func graphBoxCount(t *testing.T) int64 {
	t.Helper()
	ctx := context.Background()
	st := zvftest.Store(t, graphStore)
	l := zvftest.OpenLevel(t, st, zvf.Options{Name: "graph"}, 0)
	res, err := l.BBox(ctx, zvf.BBoxQuery{Min: []float64{390, 223, 585}, Max: []float64{480, 313, 675}}, func(*zvf.Batch) error { return nil })
	if err != nil || res.Count == 0 {
		t.Fatalf("reader: %d vertices, %v", res.Count, err)
	}
	return res.Count
}

func TestReadConcurrency(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		flag   int
		target string
		want   int
	}{
		{0, "./data/x.zarrvectors", 8}, {0, "file:///data/x", 8}, {0, "mem://", 8},
		{0, "s3://bucket/x?region=us-east-1", 32}, {0, "gs://b/x", 32}, {0, "azblob://c/x", 32},
		{4, "s3://bucket/x", 4}, {64, "./x", 64},
	} {
		if got := readConcurrency(tc.flag, tc.target); got != tc.want {
			t.Errorf("readConcurrency(%d, %q) = %d, want %d", tc.flag, tc.target, got, tc.want)
		}
	}
}
