package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/synth"
	"github.com/zvfserve/zvfserve/zvf/writer"
	"golang.org/x/sync/errgroup"
)

func benchCommand() command {
	return command{summary: "load benchmark: viewport bursts of bbox requests, cold then warm; prints a table and JSON", run: runBench}
}

// benchQuery is one kind of request in the workload.
type benchQuery struct {
	name   string
	want   int    // vertices the box should hold at level 0
	level  string // "0" or "auto"
	format string
	offset float64
	store  string // "points" or "streamlines"
}

// benchResult aggregates one (phase, query) cell of the table.
type benchResult struct {
	Phase     string  `json:"phase"`
	Query     string  `json:"query"`
	Requests  int     `json:"requests"`
	P50ms     float64 `json:"p50_ms"`
	P99ms     float64 `json:"p99_ms"`
	ReqPerSec float64 `json:"requests_per_s"`
	VertPerS  float64 `json:"vertices_per_s"`
	MBPerS    float64 `json:"mb_per_s"`
	Vertices  int64   `json:"vertices_per_request"`
	Errors    int     `json:"errors"`
}

type benchReport struct {
	Points         int           `json:"points"`
	Streamlines    int           `json:"streamline_vertices"`
	Burst          int           `json:"burst"`
	GoMaxProcs     int           `json:"gomaxprocs"`
	Results        []benchResult `json:"results"`
	CacheHitRatio  float64       `json:"cache_hit_ratio"`
	PeakRSSMB      float64       `json:"peak_rss_mb"`
	AllocsPerReq   float64       `json:"allocs_per_request"`
	WallSeconds    float64       `json:"wall_s"`
	StoreBuildSecs float64       `json:"store_build_s"`
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	points := fs.Int("points", 2_000_000, "points in the synthetic store 'points' (three attributes, three levels)")
	slVerts := fs.Int("streamlines", -1, "vertices in the synthetic streamline store 'streamlines' (200-vertex random walks, one attribute, three levels; default points/5, 0 for none)")
	storeDir := fs.String("store", "", "folder to write the stores into (points/, streamlines/), each written once and reused by later runs (default: in memory)")
	target := fs.String("target", "", "base URL of a running server serving the stores as 'points' and 'streamlines'; its /api/v1/stores sizes the boxes, and a store it does not serve has its queries skipped (default: start one in-process)")
	burst := fs.Int("burst", 16, "concurrent requests per burst")
	only := fs.String("only", "", "run only the query kinds whose name contains this (e.g. 500k)")
	rounds := fs.Int("rounds", 5, "warm bursts per query kind")
	jsonOut := fs.String("json", "", "also write the report as JSON to this file")
	var w wholeConfig
	fs.IntVar(&w.clients, "whole", 0, "instead of the viewport workload: `N` clients at once each pull the whole 'points' store as one JSON answer from a zvfserve serve child process (so the peak RSS is the server's alone), --runs times; any cut answer fails the bench")
	fs.IntVar(&w.runs, "runs", 3, "runs: with --whole and --sweep each against a fresh server process; with --static per box (default 7 there)")
	sweep := fs.String("sweep", "", "instead of the viewport workload: the store-size sweep; `EDGES` are chunk edges, e.g. 100,62.5,40 (about 22k, 90k and 330k files with 2,000,000 points): for each, the points store with that chunk edge (under --store) served by a fresh `zvfserve serve` (--server-bin) per run, timed from its start to its first answer, then the first query of an attribute and a cold 50k box, and its peak RSS, --runs times")
	trivial := fs.Bool("trivial", false, "after each warm binary query kind, replay its bursts against a trivial server that holds the same answers and only writes them (rows of phase 'trivial'; zvfserve's share of it is printed)")
	var via link
	fs.DurationVar(&via.RTT, "rtt", 0, "with --static: an emulated network between clients and both servers: the round trip each request waits for before its answer starts")
	fs.Float64Var(&via.Mbps, "mbps", 0, "with --static: the emulated network's bandwidth in Mbit/s, shared by each server's connections (0: unlimited)")
	static := fs.Bool("static", false, "instead of the viewport workload: zvfserve cold against a lean static-file client (a file server and a client that fetches the level-0 vertex files the box touches, six at a time, and filters them), one query at a time, --runs times per box")
	fs.Int64Var(&w.cacheBytes, "cache-bytes", 512<<20, "with --whole: the server's --cache-bytes")
	fs.StringVar(&w.serverBin, "server-bin", "", "with --whole and --sweep: the zvfserve binary to start (default: this one), e.g. an older build to compare")
	fs.StringVar(&w.serveArgs, "serve-args", "", "with --whole: more flags for the server, space-separated (e.g. \"--request-timeout 5s\")")
	fs.StringVar(&w.acceptEncoding, "accept-encoding", "", "with --whole: the clients' Accept-Encoding: gzip or zstd (default: none, plain JSON)")
	fs.DurationVar(&w.limit, "run-limit", 10*time.Minute, "with --whole: a run still going after this long is stopped")
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: zvfserve bench [--points N] [--streamlines N] [--store DIR | --target URL] [--burst N] [--rounds N] [--only TEXT] [--trivial] [--json FILE]
       zvfserve bench --whole N [--runs N] [--points N] [--store DIR] [--cache-bytes B] [--accept-encoding gzip|zstd] [--server-bin FILE]
       zvfserve bench --static [--runs N] [--points N] [--store DIR] [--only TEXT] [--rtt D] [--mbps N] [--json FILE]
       zvfserve bench --sweep EDGES [--runs N] [--points N] [--store DIR] [--server-bin FILE] [--json FILE]

The load benchmark. It builds a points store (--points points, three attributes, three levels) and a
streamline store (--streamlines vertices), in memory or once under --store, serves them from a server
in this process (or uses a running one with --target), and replays viewport bursts: --burst
concurrent bbox requests of about 1k, 50k and 500k vertices, binary and JSON, level=auto with a 100k
budget, and streamline boxes. Each query kind runs cold (a fresh server and cache) and then warm
(--rounds bursts). It prints one row per phase and query kind: requests, vertices per request, p50
and p99 latency, requests/s, vertices/s, MB/s and errors; then the warm cache hit ratio, peak RSS and
allocations per request. --trivial adds, after each warm binary query kind, the same bursts against a
trivial server that holds the same answers and only writes them, and prints zvfserve's share of its
MB/s. --json also writes the report as JSON. Client and server share this machine's cores. What
the numbers mean and what bounds them: docs/performance.md.

With --whole N it runs the many-large-answers load instead: N clients at once each pull the whole
points store as one JSON answer from a zvfserve serve child process, --runs times, and report the
time and the server's peak RSS (median and spread); any answer cut short fails the bench.

With --static it compares zvfserve with the lean alternative to a server, one cold query at a time:
the store's files behind a plain file server, and a client that knows the layout, fetches the level-0
vertex files of the chunks a box touches (six at a time, as a browser would) and filters them itself.
Both start cold (a fresh zvfserve and cache; a fresh connection pool), both end with the box's vertices
in memory and must count the same; it prints the median and spread of each and the ratio. --rtt and
--mbps put an emulated network between the clients and both servers (loopback has none).

With --sweep it measures what grows with the size of a store: the same points in smaller and smaller
chunks (more and more files), each served by a fresh server process: the time from its start to its
first answer, the first query that reads an attribute, a cold 50k-vertex box after that, and its
peak RSS.

Examples:
  zvfserve bench --points 200000 --rounds 2          # a quick run, in memory
  zvfserve bench --store /tmp/zvf-bench --only 500k  # stores on disk, reused by later runs
  zvfserve bench --target http://host:8080 --json out.json
  zvfserve bench --whole 64 --store /tmp/zvf-bench   # 64 whole-store JSON answers at once
  zvfserve bench --static --store /tmp/zvf-bench      # cold zvfserve against a static-file client
  zvfserve bench --static --store /tmp/zvf-bench --rtt 20ms --mbps 100   # the same over a network
  zvfserve bench --sweep 100,62.5,40 --store /tmp/zvf-bench   # 22k, 90k and 330k files

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() != 0 {
		fs.Usage()
		return fmt.Errorf("%w: bench takes no arguments, only flags (got %q)", errUsage, fs.Args())
	}
	if w.clients > 0 {
		w.points, w.storeDir, w.jsonOut = *points, *storeDir, *jsonOut
		return runWhole(ctx, &w, stdout, stderr)
	}
	if *sweep != "" {
		var edges []float64
		for _, f := range strings.Split(*sweep, ",") {
			e, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil || !(e > 0) {
				return fmt.Errorf("%w: --sweep %q: chunk edges, e.g. 100,62.5,40", errUsage, *sweep)
			}
			edges = append(edges, e)
		}
		return runSweep(ctx, edges, *points, w.runs, *storeDir, w.serverBin, *jsonOut, stdout, stderr)
	}
	if *static {
		return benchStatic(ctx, fs, *points, *storeDir, w.runs, *only, &via, *jsonOut, stdout)
	}
	start := time.Now()
	if *slVerts < 0 {
		*slVerts = *points / 5
	}
	rep := benchReport{Points: *points, Streamlines: *slVerts, Burst: *burst, GoMaxProcs: runtime.GOMAXPROCS(0)}
	base := strings.TrimRight(*target, "/")
	var ch *cache.Cache
	var stores map[string]storage.Store
	if base == "" {
		t0 := time.Now()
		var err error
		stores, err = benchStores(ctx, *storeDir, *points, *slVerts)
		if err != nil {
			return err
		}
		defer func() {
			for _, st := range stores {
				_ = st.Close()
			}
		}()
		rep.StoreBuildSecs = time.Since(t0).Seconds()
	}
	queries := []benchQuery{
		{"1k bin", 1_000, "0", "bin", 101, "points"}, {"50k bin", 50_000, "0", "bin", 301, "points"},
		{"500k bin", 500_000, "0", "bin", 50, "points"}, {"50k json", 50_000, "0", "json", 301, "points"},
		{"auto ≤100k bin", 500_000, "auto", "bin", 50, "points"},
		{"streamlines 50k bin", 50_000, "0", "bin", 301, "streamlines"}, {"streamlines 50k json", 50_000, "0", "json", 301, "streamlines"},
		{"streamlines auto ≤100k bin", 150_000, "auto", "bin", 50, "streamlines"},
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64, DisableCompression: true}}
	// Boxes are sized from the vertex counts the server reports, so a
	// reused --store of another size, or a --target's own stores, still
	// get boxes of the wanted vertex counts.
	total, err := benchSizes(ctx, client, base, stores)
	if err != nil {
		return err
	}
	for _, name := range []string{"points", "streamlines"} {
		asked := map[string]int{"points": *points, "streamlines": *slVerts}[name]
		switch n, ok := total[name]; {
		case name == "streamlines" && asked == 0:
			total[name] = 0
		case !ok || n == 0:
			where := "the in-process server"
			if base != "" {
				where = base
			}
			fmt.Fprintf(stderr, "bench: %s serves no store '%s' (or an empty one); its queries are skipped\n", where, name)
			total[name] = 0
		case base == "" && *storeDir != "" && (n-asked > asked/100 || asked-n > asked/100):
			// (the streamline builder rounds to whole streamlines)
			fmt.Fprintf(stderr, "bench: reusing %s with %d vertices, not the %d asked for (remove it to rebuild)\n",
				filepath.Join(*storeDir, name), n, asked)
		}
	}
	rep.Points, rep.Streamlines = total["points"], total["streamlines"]
	var keep []benchQuery
	for _, q := range queries {
		if total[q.store] > 0 {
			keep = append(keep, q)
		}
	}
	queries = keep
	if len(queries) == 0 {
		return errors.New("bench: no store to query")
	}
	if *only != "" {
		var keep []benchQuery
		for _, q := range queries {
			if strings.Contains(q.name, *only) {
				keep = append(keep, q)
			}
		}
		queries = keep
	}
	var before, after runtime.MemStats
	requests := 0
	for _, phase := range []string{"cold", "warm"} {
		var stop func()
		if stores != nil {
			var err error
			ch = cache.New(1 << 30)
			base, stop, err = benchServe(ctx, stores, ch)
			if err != nil {
				return err
			}
		}
		if phase == "warm" {
			// warm: run everything once before measuring
			for _, q := range queries {
				_, _ = benchBurst(ctx, client, base, q, *burst, total[q.store])
			}
			runtime.ReadMemStats(&before)
		}
		for _, q := range queries {
			n := 1
			if phase == "warm" {
				n = *rounds
			}
			res, err := benchRounds(ctx, client, base, q, n, *burst, total[q.store])
			if err != nil {
				return err
			}
			res.Phase = phase
			requests += res.Requests
			rep.Results = append(rep.Results, res)
			if phase == "warm" && *trivial && q.format == "bin" {
				// The same answers, byte for byte, from a server that only
				// writes them: the floor of what serving them costs here.
				res, err := benchTrivial(ctx, client, base, q, n, *burst, total[q.store])
				if err != nil {
					return err
				}
				rep.Results = append(rep.Results, res)
			}
			if phase == "cold" && stop != nil {
				// each cold query kind gets a fresh server and cache
				stop()
				ch = cache.New(1 << 30)
				var err error
				if base, stop, err = benchServe(ctx, stores, ch); err != nil {
					return err
				}
			}
		}
		if phase == "warm" {
			runtime.ReadMemStats(&after)
			warmReqs := 0
			for _, r := range rep.Results {
				if r.Phase == "warm" {
					warmReqs += r.Requests
				}
			}
			if stores != nil && warmReqs > 0 && !*trivial { // the trivial server's requests are not the server's
				rep.AllocsPerReq = float64(after.Mallocs-before.Mallocs) / float64(warmReqs)
			}
			if ch != nil {
				s := ch.Stats()
				if s.Hits+s.Misses > 0 {
					rep.CacheHitRatio = float64(s.Hits) / float64(s.Hits+s.Misses)
				}
			}
		}
		if stop != nil {
			stop()
		}
	}
	rep.PeakRSSMB = peakRSSMB()
	rep.WallSeconds = time.Since(start).Seconds()
	printBench(stdout, &rep, stores != nil)
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(&rep, "", "  ")
		if err := os.WriteFile(*jsonOut, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// benchRounds runs n bursts of q against base and sums them up.
func benchRounds(ctx context.Context, c *http.Client, base string, q benchQuery, n, burst, points int) (benchResult, error) {
	var lat []time.Duration
	var bytes, verts int64
	errs := 0
	t0 := time.Now()
	for r := 0; r < n; r++ {
		res, err := benchBurst(ctx, c, base, q, burst, points)
		if err != nil {
			return benchResult{}, err
		}
		for _, x := range res {
			lat = append(lat, x.d)
			bytes += x.bytes
			verts += x.verts
			if x.err {
				errs++
			}
		}
	}
	wall := time.Since(t0).Seconds()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return benchResult{Query: q.name, Requests: len(lat), Errors: errs,
		P50ms: ms(lat[len(lat)/2]), P99ms: ms(lat[(len(lat)*99)/100]), ReqPerSec: float64(len(lat)) / wall,
		VertPerS: float64(verts) / wall, MBPerS: float64(bytes) / wall / 1e6, Vertices: verts / int64(len(lat))}, nil
}

// benchTrivial fetches the answers of q's burst from base once, then
// runs n bursts of q against a server that holds them and writes each in
// one call, with its length: no query, no encoding, no cache.
func benchTrivial(ctx context.Context, c *http.Client, base string, q benchQuery, n, burst, points int) (benchResult, error) {
	bodies := map[string][]byte{}
	for i := 0; i < burst; i++ {
		p := burstPath(q, i, points)
		if bodies[p] != nil {
			continue
		}
		b, err := get(ctx, c, base+p)
		if err != nil {
			return benchResult{}, err
		}
		bodies[p] = b
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := bodies[r.URL.RequestURI()]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		_, _ = w.Write(b)
	})
	tb, stop, err := serveLocal(h)
	if err != nil {
		return benchResult{}, err
	}
	defer stop()
	// One burst first, as the warm phase had: connections are open.
	if _, err := benchBurst(ctx, c, tb, q, burst, points); err != nil {
		return benchResult{}, err
	}
	res, err := benchRounds(ctx, c, tb, q, n, burst, points)
	res.Phase = "trivial"
	return res, err
}

// benchStores returns the points and streamlines stores: built in memory,
// or under dir (written once, then reused).
func benchStores(ctx context.Context, dir string, points, streamlines int) (map[string]storage.Store, error) {
	build := map[string]func() (*blobstore.Store, error){
		"points":      func() (*blobstore.Store, error) { return synth.Points(ctx, points, 1, writer.CodecNone) },
		"streamlines": func() (*blobstore.Store, error) { return synth.Streamlines(ctx, streamlines, 1) },
	}
	out := map[string]storage.Store{}
	closeAll := func() {
		for _, st := range out {
			_ = st.Close()
		}
	}
	for _, name := range []string{"points", "streamlines"} {
		if name == "streamlines" && streamlines == 0 {
			continue
		}
		if dir == "" {
			mem, err := build[name]()
			if err != nil {
				closeAll()
				return nil, err
			}
			out[name] = storage.Sub(mem, name)
			continue
		}
		if err := ensureBenchStore(ctx, dir, name, build[name]); err != nil {
			closeAll()
			return nil, err
		}
		disk, err := blobstore.Open(ctx, filepath.Join(dir, name))
		if err != nil {
			closeAll()
			return nil, err
		}
		out[name] = disk
	}
	return out, nil
}

// ensureBenchStore writes store name under dir unless it is there already.
// It is built in memory, copied into a hidden folder beside it and renamed
// into place, so an interrupted write never looks like a store to reuse.
func ensureBenchStore(ctx context.Context, dir, name string, build func() (*blobstore.Store, error)) error {
	final := filepath.Join(dir, name)
	if _, err := os.Stat(filepath.Join(final, "zarr.json")); err == nil {
		return nil
	}
	if _, err := os.Stat(final); err == nil {
		return fmt.Errorf("bench: %s exists but holds no store (no zarr.json); remove it to rebuild", final)
	}
	mem, err := build()
	if err != nil {
		return err
	}
	defer mem.Close()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(dir, "."+name+"-partial-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	disk, err := blobstore.Open(ctx, tmp)
	if err != nil {
		return err
	}
	err = copyStore(ctx, mem, disk)
	if cerr := disk.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	// The builders write under prefix name, so the store is tmp/name.
	return os.Rename(filepath.Join(tmp, name), final)
}

// copyStore copies every object of from into to. One walk lists them all
// (a delimited listing per folder costs a sort of the whole in-memory
// bucket each time), and a few writers overlap the file system calls.
func copyStore(ctx context.Context, from storage.Store, to storage.Writer) error {
	var keys []string
	if err := from.Walk(ctx, "", func(k string, _ storage.Attrs) error {
		keys = append(keys, k)
		return nil
	}); err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for _, k := range keys {
		g.Go(func() error {
			b, err := storage.ReadAll(gctx, from, k, 1<<30)
			if err != nil {
				return err
			}
			return to.Put(gctx, k, b)
		})
	}
	return g.Wait()
}

// benchSizes returns the level-0 vertex count of every store the server at
// base lists as working (its /api/v1/stores catalogue). With no base, it
// asks a throwaway in-process server over stores.
func benchSizes(ctx context.Context, c *http.Client, base string, stores map[string]storage.Store) (map[string]int, error) {
	if base == "" {
		b, stop, err := benchServe(ctx, stores, cache.New(64<<20))
		if err != nil {
			return nil, err
		}
		defer stop()
		base = b
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/stores", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("bench: list the stores: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("bench: list the stores: %s answers %s", base+"/api/v1/stores", resp.Status)
	}
	var cat struct {
		Stores []struct {
			Name        string `json:"name"`
			Status      string `json:"status"`
			VertexCount int64  `json:"vertex_count"`
		} `json:"stores"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&cat); err != nil {
		return nil, fmt.Errorf("bench: list the stores at %s: %w", base, err)
	}
	out := map[string]int{}
	for _, s := range cat.Stores {
		if s.Status == "ok" {
			out[s.Name] = int(s.VertexCount)
		}
	}
	return out, nil
}

// benchServe starts the API on a loopback port.
func benchServe(ctx context.Context, stores map[string]storage.Store, ch *cache.Cache) (string, func(), error) {
	return benchServeVia(ctx, stores, ch, nil)
}

// benchServeVia is benchServe behind an emulated network link (nil: none).
func benchServeVia(ctx context.Context, stores map[string]storage.Store, ch *cache.Cache, via *link) (string, func(), error) {
	var open []*zvf.Store
	for name, st := range stores {
		s, err := zvf.Open(ctx, st, zvf.Options{Name: name, Cache: ch})
		if err != nil {
			return "", nil, err
		}
		open = append(open, s)
	}
	srv, err := api.New(api.Options{Stores: open, Cache: ch, MaxVertices: 2_000_000, MaxConcurrent: 256})
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	hs, limited := srv.HTTPServer(ln)
	hs.Handler = via.wrap(hs.Handler)
	go func() { _ = hs.Serve(limited) }()
	return "http://" + ln.Addr().String(), func() { _ = hs.Close() }, nil
}

type benchSample struct {
	d            time.Duration
	bytes, verts int64
	err          bool
}

// burstPath is the path and query of request i of a burst of q.
func burstPath(q benchQuery, i, points int) string {
	// shift each request's box a little so a burst is a viewport's worth
	// of neighbouring tiles, not one URL
	off := q.offset + float64(i%4)*7
	min, max := synth.BoxFor(points, q.want, off)
	// level=auto gets a viewer's budget so the server picks a coarser
	// level; fixed levels take the whole answer.
	limit := 2_000_000
	if q.level == "auto" {
		limit = 100_000
	}
	return fmt.Sprintf("/api/v1/stores/%s/bbox?min=%g,%g,%g&max=%g,%g,%g&level=%s&f=%s&limit=%d",
		q.store, min[0], min[1], min[2], max[0], max[1], max[2], q.level, q.format, limit)
}

func benchBurst(ctx context.Context, c *http.Client, base string, q benchQuery, burst, points int) ([]benchSample, error) {
	out := make([]benchSample, burst)
	var wg sync.WaitGroup
	for i := 0; i < burst; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			url := base + burstPath(q, i, points)
			t0 := time.Now()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			resp, err := c.Do(req)
			if err != nil {
				out[i] = benchSample{d: time.Since(t0), err: true}
				return
			}
			// Stream the body away, keeping only its tail (where the count is),
			// so 64 clients pulling large answers do not inflate the RSS
			// being measured.
			n, tail, err := drain(resp.Body)
			_ = resp.Body.Close()
			out[i] = benchSample{d: time.Since(t0), bytes: n, verts: countVertices(tail), err: err != nil || resp.StatusCode != 200}
		}(i)
	}
	wg.Wait()
	return out, ctx.Err()
}

// drain reads r to the end, returning its length and last 4 KiB.
func drain(r io.Reader) (int64, []byte, error) {
	buf := make([]byte, 64<<10)
	tail := make([]byte, 0, 8<<10)
	var n int64
	for {
		k, err := r.Read(buf)
		n += int64(k)
		tail = append(tail, buf[:k]...)
		if len(tail) > 4<<10 {
			tail = append(tail[:0], tail[len(tail)-4<<10:]...)
		}
		if err == io.EOF {
			return n, tail, nil
		}
		if err != nil {
			return n, tail, err
		}
	}
}

// countVertices reads the last "count" member: the end of a JSON answer or
// the binary trailer block.
func countVertices(tail []byte) int64 {
	i := bytes.LastIndex(tail, []byte(`"count":`))
	if i < 0 {
		return 0
	}
	j := i + 8
	for j < len(tail) && tail[j] >= '0' && tail[j] <= '9' {
		j++
	}
	n, _ := strconv.ParseInt(string(tail[i+8:j]), 10, 64)
	return n
}

func peakRSSMB() float64 { return vmHWMMB("/proc/self/status") }

// vmHWMMB reads a process's peak resident set from its /proc status file.
func vmHWMMB(status string) float64 {
	b, err := os.ReadFile(status)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				kb, _ := strconv.ParseFloat(f[1], 64)
				return kb / 1024
			}
		}
	}
	return 0
}

func printBench(w io.Writer, r *benchReport, inProcess bool) {
	fmt.Fprintf(w, "zvfserve bench: %d points and %d streamline vertices, bursts of %d, GOMAXPROCS %d (stores built in %.1f s)\n\n",
		r.Points, r.Streamlines, r.Burst, r.GoMaxProcs, r.StoreBuildSecs)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tquery\treqs\tvertices/req\tp50 ms\tp99 ms\treq/s\tMvertices/s\tMB/s\terrors\t")
	for _, x := range r.Results {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.2f\t%.2f\t%.1f\t%.1f\t%.0f\t%d\t\n", x.Phase, x.Query, x.Requests, x.Vertices, x.P50ms, x.P99ms, x.ReqPerSec, x.VertPerS/1e6, x.MBPerS, x.Errors)
	}
	_ = tw.Flush()
	warm := map[string]float64{}
	var shares []string
	for _, x := range r.Results {
		switch x.Phase {
		case "warm":
			warm[x.Query] = x.MBPerS
		case "trivial":
			if x.MBPerS > 0 {
				shares = append(shares, fmt.Sprintf("%s %.2f", x.Query, warm[x.Query]/x.MBPerS))
			}
		}
	}
	if len(shares) > 0 {
		fmt.Fprintf(w, "\nwarm MB/s as a share of the trivial server's: %s\n", strings.Join(shares, " · "))
	}
	fmt.Fprintf(w, "\ncache hit ratio (warm) %.3f · peak RSS %.0f MB", r.CacheHitRatio, r.PeakRSSMB)
	if inProcess && r.AllocsPerReq > 0 {
		fmt.Fprintf(w, " · allocations per request (server and client, warm) %.0f", r.AllocsPerReq)
	}
	fmt.Fprintf(w, " · %.1f s\n", r.WallSeconds)
}

// ---- the whole-store load (--whole) ----

// wholeConfig is the --whole load: clients × the whole points store as one
// JSON answer each, against a fresh `zvfserve serve` process per run.
type wholeConfig struct {
	clients, runs, points                   int
	cacheBytes                              int64
	storeDir, serverBin, serveArgs, jsonOut string
	acceptEncoding                          string
	limit                                   time.Duration
}

// wholeRun is one run of the --whole load.
type wholeRun struct {
	WallSeconds     float64  `json:"wall_s"`
	RequestP50Secs  float64  `json:"request_p50_s"`
	RequestMaxSecs  float64  `json:"request_max_s"`
	Complete        int      `json:"complete"`
	Cut             int      `json:"cut"`
	CutReasons      []string `json:"cut_reasons,omitempty"`
	WireMB          float64  `json:"wire_mb"`
	ServerPeakRSSMB float64  `json:"server_peak_rss_mb"`
	ServerExitSecs  float64  `json:"server_exit_s"`
}

type wholeReport struct {
	Clients        int        `json:"clients"`
	Vertices       int64      `json:"vertices"`
	AnswerMB       float64    `json:"answer_mb"`
	AcceptEncoding string     `json:"accept_encoding,omitempty"`
	CacheBytes     int64      `json:"server_cache_bytes"`
	GoMaxProcs     int        `json:"gomaxprocs"`
	Runs           []wholeRun `json:"runs"`
	// Median and spread (min, max) over the runs.
	WallSeconds     [3]float64 `json:"wall_s_median_min_max"`
	ServerPeakRSSMB [3]float64 `json:"server_peak_rss_mb_median_min_max"`
}

func runWhole(ctx context.Context, w *wholeConfig, stdout, stderr io.Writer) error {
	switch w.acceptEncoding {
	case "", "gzip", "zstd":
	default:
		return fmt.Errorf("%w: --accept-encoding %q: gzip or zstd", errUsage, w.acceptEncoding)
	}
	if w.runs < 1 {
		return fmt.Errorf("%w: --runs %d", errUsage, w.runs)
	}
	bin, dir, cleanup, err := serverAndStores(w.serverBin, w.storeDir, stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	t0 := time.Now()
	if err := ensureBenchStore(ctx, dir, "points", func() (*blobstore.Store, error) {
		return synth.Points(ctx, w.points, 1, writer.CodecNone)
	}); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "bench: store ready in %.1f s\n", time.Since(t0).Seconds())
	rep := wholeReport{Clients: w.clients, AcceptEncoding: w.acceptEncoding, CacheBytes: w.cacheBytes, GoMaxProcs: runtime.GOMAXPROCS(0)}
	args := []string{"serve", "--addr", "127.0.0.1:0", "--cache-bytes", strconv.FormatInt(w.cacheBytes, 10),
		"--max-vertices", "2000000000", "--max-concurrent", strconv.Itoa(max(64, w.clients)), "--revalidate", "0", "--log-level", "warn"}
	args = append(append(args, strings.Fields(w.serveArgs)...), "points="+filepath.Join(dir, "points"))
	for i := 0; i < w.runs; i++ {
		run, err := wholeOnce(ctx, w, bin, args, &rep)
		if err != nil {
			return fmt.Errorf("bench: run %d: %w", i+1, err)
		}
		rep.Runs = append(rep.Runs, run)
		fmt.Fprintf(stderr, "bench: run %d: %.1f s, %d complete, %d cut, server peak RSS %.0f MB\n", i+1, run.WallSeconds, run.Complete, run.Cut, run.ServerPeakRSSMB)
	}
	var wall, rss []float64
	cut := 0
	for _, r := range rep.Runs {
		wall, rss = append(wall, r.WallSeconds), append(rss, r.ServerPeakRSSMB)
		cut += r.Cut
	}
	rep.WallSeconds, rep.ServerPeakRSSMB = spread(wall), spread(rss)
	printWhole(stdout, &rep)
	if w.jsonOut != "" {
		b, _ := json.MarshalIndent(&rep, "", "  ")
		if err := os.WriteFile(w.jsonOut, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	if cut > 0 {
		return fmt.Errorf("bench: %d of %d answers were cut", cut, w.clients*w.runs)
	}
	return nil
}

// serverAndStores is what the benches that start server processes run
// and where their stores go: serverBin (default: this binary) and
// storeDir (default: a temporary folder, removed by cleanup).
func serverAndStores(serverBin, storeDir string, stderr io.Writer) (bin, dir string, cleanup func(), err error) {
	bin, dir, cleanup = serverBin, storeDir, func() {}
	if bin == "" {
		if bin, err = os.Executable(); err != nil {
			return "", "", nil, err
		}
	}
	if dir == "" {
		if dir, err = os.MkdirTemp("", "zvfserve-bench-"); err != nil {
			return "", "", nil, err
		}
		cleanup = func() { _ = os.RemoveAll(dir) }
		fmt.Fprintln(stderr, "bench: the stores are written to a temporary folder and removed after; give --store to keep them for later runs")
	}
	return bin, dir, cleanup, nil
}

// spread returns the median, minimum and maximum of v.
func spread(v []float64) [3]float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return [3]float64{med, s[0], s[len(s)-1]}
}

// wholeOnce starts a server, lets every client pull the whole store at
// once, reads the server's peak RSS and stops it with SIGTERM.
func wholeOnce(ctx context.Context, w *wholeConfig, bin string, args []string, rep *wholeReport) (wholeRun, error) {
	var run wholeRun
	ctx, cancel := context.WithTimeout(ctx, w.limit)
	defer cancel()
	srv, err := startServerProcess(ctx, bin, args)
	if err != nil {
		return run, err
	}
	defer srv.kill()
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: w.clients, MaxIdleConnsPerHost: w.clients, DisableCompression: true}}
	defer client.CloseIdleConnections()
	var cat struct {
		Stores []struct {
			Name        string       `json:"name"`
			Bounds      [2][]float64 `json:"bounds"`
			VertexCount int64        `json:"vertex_count"`
		} `json:"stores"`
	}
	if err := getJSON(ctx, client, srv.base+"/api/v1/stores", &cat); err != nil {
		return run, err
	}
	if len(cat.Stores) != 1 || cat.Stores[0].VertexCount == 0 {
		return run, fmt.Errorf("the server lists %+v, not the points store", cat.Stores)
	}
	st := cat.Stores[0]
	rep.Vertices = st.VertexCount
	corner := func(c []float64) string {
		var parts []string
		for _, v := range c {
			parts = append(parts, strconv.FormatFloat(v, 'g', -1, 64))
		}
		return strings.Join(parts, ",")
	}
	url := fmt.Sprintf("%s/api/v1/stores/points/bbox?min=%s&max=%s&level=0&f=json&limit=%d", srv.base, corner(st.Bounds[0]), corner(st.Bounds[1]), st.VertexCount)
	type result struct {
		d          time.Duration
		wire, body int64
		err        error
	}
	res := make([]result, w.clients)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range res {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.Now()
			wire, body, err := pullWhole(ctx, client, url, w.acceptEncoding, st.VertexCount)
			res[i] = result{time.Since(t), wire, body, err}
		}()
	}
	wg.Wait()
	run.WallSeconds = time.Since(start).Seconds()
	run.ServerPeakRSSMB = srv.peakRSSMB()
	var lat []float64
	reasons := map[string]bool{}
	for _, r := range res {
		lat = append(lat, r.d.Seconds())
		run.WireMB += float64(r.wire) / 1e6
		if r.err != nil {
			run.Cut++
			reasons[r.err.Error()] = true
			continue
		}
		run.Complete++
		rep.AnswerMB = float64(r.body) / 1e6
	}
	for r := range reasons {
		run.CutReasons = append(run.CutReasons, r)
	}
	sort.Strings(run.CutReasons)
	sort.Float64s(lat)
	run.RequestP50Secs, run.RequestMaxSecs = lat[len(lat)/2], lat[len(lat)-1]
	t := time.Now()
	if err := srv.stop(30 * time.Second); err != nil {
		return run, err
	}
	run.ServerExitSecs = time.Since(t).Seconds()
	return run, nil
}

// pullWhole reads one whole-store answer and checks that it is whole: a
// 200, no transport error, the JSON's end with the count of every vertex
// and no next page. It returns the bytes on the wire and of the body.
func pullWhole(ctx context.Context, c *http.Client, url, encoding string, vertices int64) (int64, int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, 0, err
	}
	if encoding != "" {
		req.Header.Set("Accept-Encoding", encoding)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("status %d", resp.StatusCode)
	}
	wire := &countingReader{r: resp.Body}
	var body io.Reader = wire
	switch resp.Header.Get("Content-Encoding") {
	case "gzip":
		zr, err := gzip.NewReader(wire)
		if err != nil {
			return wire.n, 0, err
		}
		body = zr
	case "zstd":
		zr, err := zstd.NewReader(wire, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
		if err != nil {
			return wire.n, 0, err
		}
		defer zr.Close()
		body = zr
	}
	n, tail, err := drain(body)
	switch {
	case err != nil:
		// The server cut the answer: the client sees a transport error.
		return wire.n, n, fmt.Errorf("cut: %v", err)
	case !bytes.HasSuffix(tail, []byte(`"next":null}`+"\n")) || countVertices(tail) != vertices:
		return wire.n, n, fmt.Errorf("well-formed but short: count %d of %d", countVertices(tail), vertices)
	}
	return wire.n, n, nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func getJSON(ctx context.Context, c *http.Client, url string, v any) error {
	b, err := get(ctx, c, url)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// serverProcess is a `zvfserve serve` child.
type serverProcess struct {
	cmd    *exec.Cmd
	base   string
	exited chan error
	stderr *tailBuffer
}

// startServerProcess runs bin with args and waits until it says where it
// listens.
func startServerProcess(ctx context.Context, bin string, args []string) (*serverProcess, error) {
	cmd := exec.Command(bin, args...)
	p := &serverProcess{cmd: cmd, exited: make(chan error, 1), stderr: &tailBuffer{max: 16 << 10}}
	cmd.Stderr = p.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if i := strings.Index(sc.Text(), " on http://"); i >= 0 {
				found <- strings.TrimSuffix(sc.Text()[i+4:], "/")
				break
			}
		}
		_, _ = io.Copy(io.Discard, out)
		p.exited <- cmd.Wait()
	}()
	select {
	case p.base = <-found:
		return p, nil
	case err := <-p.exited:
		p.exited <- err
		return nil, fmt.Errorf("the server exited (%v): %s", err, p.stderr)
	case <-time.After(2 * time.Minute):
	case <-ctx.Done():
	}
	p.kill()
	return nil, fmt.Errorf("the server did not start: %s", p.stderr)
}

// peakRSSMB is the server's high-water resident set (Linux).
func (p *serverProcess) peakRSSMB() float64 {
	return vmHWMMB(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
}

// stop sends SIGTERM and waits for the process to exit.
func (p *serverProcess) stop(wait time.Duration) error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case err := <-p.exited:
		p.exited <- err
		if err != nil {
			return fmt.Errorf("the server exited with %v after SIGTERM: %s", err, p.stderr)
		}
		return nil
	case <-time.After(wait):
		return fmt.Errorf("the server was still running %v after SIGTERM", wait)
	}
}

func (p *serverProcess) kill() {
	select {
	case err := <-p.exited:
		p.exited <- err
	default:
		_ = p.cmd.Process.Kill()
		p.exited <- <-p.exited
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	b   []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}

func printWhole(w io.Writer, r *wholeReport) {
	enc := "plain JSON"
	if r.AcceptEncoding != "" {
		enc = r.AcceptEncoding
	}
	fmt.Fprintf(w, "zvfserve bench --whole: %d clients at once, each the whole 'points' store (%d vertices, %.1f MB of JSON, %s), server cache budget %d MiB, GOMAXPROCS %d\n\n",
		r.Clients, r.Vertices, r.AnswerMB, enc, r.CacheBytes>>20, r.GoMaxProcs)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\twall s\trequest p50 s\trequest max s\tcomplete\tcut\tMB on the wire\tserver peak RSS MB\texit after SIGTERM s\t")
	for i, x := range r.Runs {
		fmt.Fprintf(tw, "%d\t%.1f\t%.1f\t%.1f\t%d\t%d\t%.0f\t%.0f\t%.2f\t\n", i+1, x.WallSeconds, x.RequestP50Secs, x.RequestMaxSecs, x.Complete, x.Cut, x.WireMB, x.ServerPeakRSSMB, x.ServerExitSecs)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\nmedian (min–max) over %d runs: wall %.1f s (%.1f–%.1f), server peak RSS %.0f MB (%.0f–%.0f)\n",
		len(r.Runs), r.WallSeconds[0], r.WallSeconds[1], r.WallSeconds[2], r.ServerPeakRSSMB[0], r.ServerPeakRSSMB[1], r.ServerPeakRSSMB[2])
	for i, x := range r.Runs {
		for _, reason := range x.CutReasons {
			fmt.Fprintf(w, "run %d: cut: %s\n", i+1, reason)
		}
	}
}
