package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf/storage"
)

// TestLoadSmall runs the load benchmark on small in-memory stores, with
// --trivial: every query kind answers without errors, streamlines
// included, and each warm binary query kind is replayed against a server
// that writes the same answers: same vertices and requests, no errors, and
// zvfserve's share of it printed.
func TestLoadSmall(t *testing.T) {
	t.Parallel()
	rep, b, stdout := benchJSON[benchReport](t, "load", "--points", "20000", "--rounds", "1", "--burst", "4", "--trivial")
	kinds := map[string]bool{}
	warm := map[string]benchResult{}
	for _, r := range rep.Results {
		if r.Errors != 0 || r.Vertices == 0 {
			t.Errorf("%s %s: %d errors, %d vertices a request", r.Phase, r.Query, r.Errors, r.Vertices)
		}
		kinds[r.Query] = true
		if r.Phase == "warm" {
			warm[r.Query] = r
		}
	}
	for _, k := range []string{"50k bin", "50k json", "streamlines 50k bin", "streamlines 50k json"} {
		if !kinds[k] {
			t.Errorf("no %q rows in %v", k, kinds)
		}
	}
	if rep.Streamlines != 4000 || !strings.Contains(string(b), "streamlines auto") {
		t.Errorf("report: %d streamline vertices", rep.Streamlines)
	}
	trivial, warmBin := 0, 0
	for q := range warm {
		if strings.HasSuffix(q, " bin") {
			warmBin++
		}
	}
	for _, r := range rep.Results {
		if r.Phase != "trivial" {
			continue
		}
		trivial++
		w, ok := warm[r.Query]
		if !ok || !strings.HasSuffix(r.Query, " bin") || r.Vertices != w.Vertices || r.Requests != w.Requests {
			t.Errorf("trivial %+v, warm %+v", r, w)
		}
		// In process, both phases' CPU per MB is known (Unix).
		if runtime.GOOS != "windows" && (r.CPUPerMB <= 0 || w.CPUPerMB <= 0) {
			t.Errorf("%s: CPU per MB %g trivial, %g warm", r.Query, r.CPUPerMB, w.CPUPerMB)
		}
	}
	// 1k, 50k, 500k and auto of points; 50k and auto of streamlines.
	if trivial != warmBin || trivial < 6 || !strings.Contains(stdout, "share of the trivial server's: 1k bin") ||
		runtime.GOOS != "windows" && !strings.Contains(stdout, "the same in CPU per MB (trivial's over zvfserve's, client included): 1k bin") {
		t.Errorf("%d trivial rows for %d warm binary kinds: %s", trivial, warmBin, stdout)
	}
}

// TestLoadTargetWithoutStreamlines: against a running server that has no
// 'streamlines' store, the streamline queries are skipped with a message
// and the point queries run, their boxes sized from the server's catalogue.
func TestLoadTargetWithoutStreamlines(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	points := points20k(t)
	base, stop, err := benchServe(ctx, map[string]storage.Store{"points": points}, cache.New(64<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	// --points is deliberately wrong: the catalogue's 20,000 sizes the boxes.
	stdout, stderr, code := runCmd(t, "load", "--target", base, "--points", "2000000", "--rounds", "1", "--burst", "2", "--only", "50k")
	if code != 0 {
		t.Fatalf("load: exit %d: %s %s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "no store 'streamlines'") {
		t.Errorf("no skip message: %q", stderr)
	}
	if strings.Contains(stdout, "streamlines 50k") || !strings.Contains(stdout, "50k json") {
		t.Errorf("rows:\n%s", stdout)
	}
	if !strings.Contains(stdout, "20000 points and 0 streamline vertices") {
		t.Errorf("header:\n%s", stdout)
	}
	for _, line := range strings.Split(stdout, "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && (f[0] == "cold" || f[0] == "warm") && (f[len(f)-1] != "0" || f[len(f)-7] == "0") {
			t.Errorf("errors or no vertices: %s", line)
		}
	}
}

// TestLoadCPUProfile: --cpuprofile writes a CPU profile of the warm
// bursts (a gzipped protobuf, as pprof reads), and an unwritable path is
// an error, not a silent run without one.
func TestLoadCPUProfile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "warm.prof")
	stdout, stderr, code := runCmd(t, "load", "--points", "20000", "--streamlines", "0", "--rounds", "2", "--burst", "2", "--only", "1k bin", "--cpuprofile", path)
	if code != 0 {
		t.Fatalf("load: exit %d: %s %s", code, stdout, stderr)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// A profile is a gzipped protobuf that starts with its sample types.
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("profile of %d bytes: %v", len(b), err)
	}
	if pb, err := io.ReadAll(zr); err != nil || len(pb) == 0 || !bytes.Contains(pb, []byte("nanoseconds")) {
		t.Errorf("profile: %d bytes unzipped, %v", len(pb), err)
	}
	_, stderr, code = runCmd(t, "load", "--points", "20000", "--streamlines", "0", "--rounds", "1", "--burst", "2", "--only", "1k bin",
		"--cpuprofile", filepath.Join(t.TempDir(), "no", "such", "dir", "p"))
	if code == 0 || !strings.Contains(stderr, "cpu profile") {
		t.Errorf("unwritable profile path: exit %d, %q", code, stderr)
	}
}
