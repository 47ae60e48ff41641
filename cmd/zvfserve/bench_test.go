package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/synth"
	"github.com/zvfserve/zvfserve/zvf/writer"
)

// benchJSON runs a bench command with --json and returns the report, its
// bytes and what the command printed.
func benchJSON[R any](t *testing.T, args ...string) (R, []byte, string) {
	t.Helper()
	var rep R
	out := filepath.Join(t.TempDir(), "report.json")
	stdout, stderr, code := runCmd(t, append(args, "--json", out)...)
	if code != 0 {
		t.Fatalf("%v: exit %d: %s %s", args, code, stdout, stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	return rep, b, stdout
}

// TestBenchSmall runs the load benchmark on small in-memory stores: every
// query kind answers without errors, streamlines included.
func TestBenchSmall(t *testing.T) {
	t.Parallel()
	rep, b, _ := benchJSON[benchReport](t, "bench", "--points", "20000", "--rounds", "1", "--burst", "4")
	kinds := map[string]bool{}
	for _, r := range rep.Results {
		if r.Errors != 0 || r.Vertices == 0 {
			t.Errorf("%s %s: %d errors, %d vertices a request", r.Phase, r.Query, r.Errors, r.Vertices)
		}
		kinds[r.Query] = true
	}
	for _, k := range []string{"50k bin", "50k json", "streamlines 50k bin", "streamlines 50k json"} {
		if !kinds[k] {
			t.Errorf("no %q rows in %v", k, kinds)
		}
	}
	if rep.Streamlines != 4000 || !strings.Contains(string(b), "streamlines auto") {
		t.Errorf("report: %d streamline vertices", rep.Streamlines)
	}
}

// TestBenchStoreReuse: a store under --store is written once (built, copied
// into a hidden folder, renamed into place), then reused without building;
// a folder holding no store is an error rather than silently reused.
func TestBenchStoreReuse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	builds := 0
	build := func() (*blobstore.Store, error) {
		builds++
		return synth.Streamlines(ctx, 2000, 1)
	}
	for i := 0; i < 2; i++ {
		if err := ensureBenchStore(ctx, dir, "streamlines", build); err != nil {
			t.Fatal(err)
		}
	}
	if builds != 1 {
		t.Errorf("built %d times, want once", builds)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Name() != "streamlines" {
		t.Errorf("folder holds %v, want only streamlines/", ents)
	}
	disk, err := blobstore.Open(ctx, filepath.Join(dir, "streamlines"))
	if err != nil {
		t.Fatal(err)
	}
	defer disk.Close()
	st, err := zvf.Open(ctx, disk, zvf.Options{Name: "streamlines"})
	if err != nil {
		t.Fatal(err)
	}
	if n := st.Info().Levels[0].VertexCount; n != 2000 || len(st.Levels()) != 3 {
		t.Errorf("reopened: %d vertices, levels %v", n, st.Levels())
	}
	if err := os.Mkdir(filepath.Join(dir, "points"), 0o755); err != nil {
		t.Fatal(err)
	}
	err = ensureBenchStore(ctx, dir, "points", func() (*blobstore.Store, error) { t.Fatal("built over a folder"); return nil, nil })
	if err == nil || !strings.Contains(err.Error(), "holds no store") {
		t.Errorf("folder without a store: %v", err)
	}
}

// TestBenchTargetWithoutStreamlines: against a running server that has no
// 'streamlines' store, the streamline queries are skipped with a message
// and the point queries run, their boxes sized from the server's catalogue.
func TestBenchTargetWithoutStreamlines(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem, err := synth.Points(ctx, 20000, 1, writer.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	base, stop, err := benchServe(ctx, map[string]storage.Store{"points": storage.Sub(mem, "points")}, cache.New(64<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	// --points is deliberately wrong: the catalogue's 20,000 sizes the boxes.
	stdout, stderr, code := runCmd(t, "bench", "--target", base, "--points", "2000000", "--rounds", "1", "--burst", "2", "--only", "50k")
	if code != 0 {
		t.Fatalf("bench: exit %d: %s %s", code, stdout, stderr)
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

// TestBenchWhole runs the whole-store load small: clients pull the whole
// store as JSON from a server child process (this test binary acting as
// zvfserve), every answer whole, the server's peak RSS and times reported
// with their median and spread. The store is a reference fixture linked
// in as --store's 'points' (writing and removing a synthetic one takes
// seconds of small files).
func TestBenchWhole(t *testing.T) {
	t.Setenv("ZVFSERVE_TEST_AS_COMMAND", "1")
	dir := t.TempDir()
	fixture, err := filepath.Abs("../../testdata/zvf-reference/points_pyramid.zarrvectors")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(fixture, filepath.Join(dir, "points")); err != nil {
		t.Fatal(err)
	}
	for _, enc := range []string{"", "zstd"} {
		rep, b, stdout := benchJSON[wholeReport](t, "bench", "--whole", "4", "--runs", "2", "--store", dir, "--server-bin", os.Args[0],
			"--accept-encoding", enc)
		if len(rep.Runs) != 2 || rep.Vertices != 20000 || rep.ServerPeakRSSMB[0] <= 0 || rep.WallSeconds[1] > rep.WallSeconds[2] {
			t.Fatalf("%q: %s", enc, b)
		}
		for _, r := range rep.Runs {
			if r.Complete != 4 || r.Cut != 0 || r.ServerPeakRSSMB <= 0 {
				t.Errorf("%q: run %+v", enc, r)
			}
		}
		if !strings.Contains(stdout, "median (min–max) over 2 runs") {
			t.Errorf("%q: %s", enc, stdout)
		}
	}
}

// TestPullWholeDetectsCuts: the whole-store client counts an answer as
// whole only when it is: a transport error, a well-formed but short body
// or an error status are each a cut.
func TestPullWholeDetectsCuts(t *testing.T) {
	t.Parallel()
	const whole = `{"vertices":[[1,2,3],[4,5,6]],"attributes":{},"offset":0,"count":2,"next":null}` + "\n"
	for _, tc := range []struct {
		name, encoding string
		serve          func(w http.ResponseWriter)
		want           string
	}{
		{"whole", "", func(w http.ResponseWriter) { io.WriteString(w, whole) }, ""},
		{"whole, zstd", "zstd", func(w http.ResponseWriter) {
			w.Header().Set("Content-Encoding", "zstd")
			zw, _ := zstd.NewWriter(w)
			io.WriteString(zw, whole)
			zw.Close()
		}, ""},
		{"well-formed but short", "", func(w http.ResponseWriter) {
			io.WriteString(w, `{"vertices":[[1,2,3]],"attributes":{},"offset":0,"count":1,"next":null}`+"\n")
		}, "well-formed but short"},
		{"aborted", "", func(w http.ResponseWriter) {
			io.WriteString(w, whole[:20])
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}, "cut: unexpected EOF"},
		{"error status", "", func(w http.ResponseWriter) { w.WriteHeader(http.StatusGatewayTimeout) }, "status 504"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { tc.serve(w) }))
			defer ts.Close()
			c := &http.Client{Transport: &http.Transport{DisableCompression: true}}
			defer c.CloseIdleConnections()
			_, _, err := pullWhole(context.Background(), c, ts.URL, tc.encoding, 2)
			if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// TestBenchStatic: --static answers every box from both sides, in memory
// and from a folder (a real http.FileServer, over an emulated link), and
// both count the vertices a direct query of the store finds.
func TestBenchStatic(t *testing.T) {
	t.Parallel()
	for _, where := range []string{"memory", "disk"} {
		t.Run(where, func(t *testing.T) {
			t.Parallel()
			args := []string{"bench", "--static", "--points", "20000", "--runs", "2"}
			if where == "disk" {
				// and over an emulated link, which wraps both servers' writers
				args = append(args, "--store", t.TempDir(), "--rtt", "1ms", "--mbps", "1000")
			}
			rows, b, stdout := benchJSON[[]staticRow](t, args...)
			if len(rows) != 3 {
				t.Fatalf("%d rows: %s", len(rows), b)
			}
			mem, err := synth.Points(context.Background(), 20000, 1, writer.CodecNone)
			if err != nil {
				t.Fatal(err)
			}
			defer mem.Close()
			st, err := zvf.Open(context.Background(), storage.Sub(mem, "points"), zvf.Options{Name: "points"})
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range []struct {
				n   int
				off float64
			}{{1_000, 101}, {50_000, 301}, {500_000, 50}} {
				r := rows[i]
				lo, hi := synth.BoxFor(20000, want.n, want.off)
				l, err := st.Level(0)
				if err != nil {
					t.Fatal(err)
				}
				res, err := l.BBox(context.Background(), zvf.BBoxQuery{Min: lo, Max: hi, Limit: 1 << 30}, func(*zvf.Batch) error { return nil })
				if err != nil {
					t.Fatal(err)
				}
				if r.Vertices == 0 || r.Vertices != res.Count || len(r.ServerMs) != 2 || len(r.StaticMs) != 2 || r.Chunks == 0 || r.SpeedUp <= 0 {
					t.Errorf("%s: %+v; a direct query finds %d", r.Query, r, res.Count)
				}
			}
			if !strings.Contains(stdout, "zvfserve faster") || (where == "disk") != strings.Contains(stdout, "1ms round trip per request, 1000 Mbit/s shared") {
				t.Errorf("no table: %s", stdout)
			}
		})
	}
}

// TestBenchSweep: --sweep builds a store per chunk edge (smaller chunks,
// more files), serves each from a fresh server process and reports its
// first answer, a cold box and its peak RSS.
func TestBenchSweep(t *testing.T) {
	t.Setenv("ZVFSERVE_TEST_AS_COMMAND", "1")
	dir := t.TempDir()
	rows, b, _ := benchJSON[[]sweepRow](t, "bench", "--sweep", "250,125", "--points", "20000", "--runs", "2", "--store", dir,
		"--server-bin", os.Args[0])
	if len(rows) != 2 || rows[0].Chunk != 250 || rows[1].Chunk != 125 || rows[0].Chunks != 64 || rows[1].Chunks != 512 || rows[1].Files <= rows[0].Files {
		t.Fatalf("rows: %s", b)
	}
	for _, r := range rows {
		if r.FirstAnswerS[0] <= 0 || r.FirstAttrMs[0] <= 0 || r.Cold50kMs[0] <= 0 || r.PeakRSSMB[0] <= 0 || r.FirstAnswerS[1] > r.FirstAnswerS[2] {
			t.Errorf("%+v", r)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "sweep-125", "points", "zarr.json")); err != nil {
		t.Errorf("the stores are not kept under --store: %v", err)
	}
	if _, _, code := runCmd(t, "bench", "--sweep", "100,x"); code != 2 {
		t.Errorf("--sweep 100,x: exit %d, want 2 (usage)", code)
	}
}

// TestBenchTrivial: --trivial replays each warm binary query against a
// server that writes the same answers: same vertices a request, no
// errors, and zvfserve's share of it printed.
func TestBenchTrivial(t *testing.T) {
	t.Parallel()
	rep, _, stdout := benchJSON[benchReport](t, "bench", "--points", "20000", "--streamlines", "0", "--rounds", "1", "--burst", "4", "--only", "k bin", "--trivial")
	warm := map[string]benchResult{}
	trivial := 0
	for _, r := range rep.Results {
		switch r.Phase {
		case "warm":
			warm[r.Query] = r
		case "trivial":
			trivial++
			w := warm[r.Query]
			if r.Errors != 0 || r.Vertices == 0 || r.Vertices != w.Vertices || r.Requests != w.Requests {
				t.Errorf("trivial %+v, warm %+v", r, w)
			}
		}
	}
	if trivial != 4 || !strings.Contains(stdout, "share of the trivial server's: 1k bin") { // 1k, 50k, 500k and auto
		t.Errorf("%d trivial rows: %s", trivial, stdout)
	}
}

// TestLinkEmulation: --rtt holds every answer for a round trip and
// --mbps paces the bytes of all a server's answers together; the answers
// arrive whole (lower bounds only: a loaded machine is only slower).
func TestLinkEmulation(t *testing.T) {
	t.Parallel()
	body := bytes.Repeat([]byte("z"), 50_000)
	via := &link{RTT: 30 * time.Millisecond, Mbps: 8} // 50 kB at 1 MB/s: 50 ms each
	h := via.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i < len(body); i += 10_000 {
			_, _ = w.Write(body[i : i+10_000])
		}
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	t0 := time.Now()
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := get(context.Background(), srv.Client(), srv.URL)
			if err != nil || !bytes.Equal(b, body) {
				t.Errorf("%d bytes, %v", len(b), err)
			}
		}()
	}
	wg.Wait()
	// Two answers share the link: 100 kB at 1 MB/s after the round trip.
	if d := time.Since(t0); d < 130*time.Millisecond {
		t.Errorf("two 50 kB answers over a 30 ms, 8 Mbit/s link took %v, at least 130 ms expected", d)
	}
	if got := (*link)(nil).String(); got != "loopback" {
		t.Errorf("no link: %q", got)
	}
}
