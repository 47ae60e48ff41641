package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/cmd/internal/cli"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/synth"
)

// zvfbench load: viewport bursts of bbox requests, cold then warm.

func loadCommand() cli.Command {
	return cli.Command{Summary: "the load benchmark: viewport bursts of bbox requests, cold then warm; prints a table and JSON", Run: runLoadCommand}
}

const loadUsage = `Usage: zvfbench load [--points N] [--streamlines N] [--store DIR | --target URL] [--burst N] [--rounds N] [--only TEXT] [--trivial] [--json FILE]

The load benchmark. It builds a points store (--points points, three attributes, three levels) and a
streamline store (--streamlines vertices), in memory or once under --store, serves them from a server
in this process (or uses a running one with --target), and replays viewport bursts: --burst
concurrent bbox requests of about 1k, 50k and 500k vertices, binary and JSON, level=auto with a 100k
budget, and streamline boxes. Each query kind runs cold (a fresh server and cache) and then warm
(--rounds bursts). It prints one row per phase and query kind: requests, vertices per request, p50
and p99 latency, requests/s, vertices/s, MB/s and errors; then the warm cache hit ratio, peak RSS and
allocations per request. --trivial adds, after each warm binary query kind, the same bursts against a
trivial server that holds the same answers and only writes them, and prints zvfserve's share of its
MB/s, and the same share in this process's CPU per MB (in process: client and server; it holds up
better than MB/s on a loaded machine). --json also writes the report as JSON. Client and server share this machine's cores. What
the numbers mean and what bounds them: docs/performance.md.

Examples:
  zvfbench load --points 200000 --rounds 2          # a quick run, in memory
  zvfbench load --store /tmp/zvf-bench --only 500k  # stores on disk, reused by later runs
  zvfbench load --target http://host:8080 --json out.json
  zvfbench load --trivial --rounds 10               # beside a server that only writes the answers
`

// loadConfig is the load benchmark's command line.
type loadConfig struct {
	points, streamlines int
	storeDir, target    string
	burst, rounds       int
	only, jsonOut       string
	cpuProfile          string
	trivial             bool
}

func runLoadCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("load", loadUsage, stderr)
	var c loadConfig
	fs.IntVar(&c.points, "points", 2_000_000, "points in the synthetic store 'points' (three attributes, three levels)")
	fs.IntVar(&c.streamlines, "streamlines", -1, "vertices in the synthetic streamline store 'streamlines' (200-vertex random walks, one attribute, three levels; default points/5, 0 for none)")
	fs.StringVar(&c.storeDir, "store", "", "folder to write the stores into (points/, streamlines/), each written once and reused by later runs (default: in memory)")
	fs.StringVar(&c.target, "target", "", "base URL of a running server serving the stores as 'points' and 'streamlines'; its /api/v1/stores sizes the boxes, and a store it does not serve has its queries skipped (default: start one in-process)")
	fs.IntVar(&c.burst, "burst", 16, "concurrent requests per burst")
	fs.StringVar(&c.only, "only", "", "run only the query kinds whose name contains this (e.g. 500k)")
	fs.IntVar(&c.rounds, "rounds", 5, "warm bursts per query kind")
	fs.BoolVar(&c.trivial, "trivial", false, "after each warm binary query kind, replay its bursts against a trivial server that holds the same answers and only writes them (rows of phase 'trivial'; zvfserve's share of it is printed)")
	fs.StringVar(&c.jsonOut, "json", "", "also write the report as JSON to this file")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the warm bursts (client, in-process server and trivial server alike) to this file")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if c.streamlines < 0 {
		c.streamlines = c.points / 5
	}
	return runLoad(ctx, &c, stdout, stderr)
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
	// CPUPerMB: this process's CPU seconds (client, and the server when
	// in process) per MB answered; 0 when unknown. On a loaded machine
	// it holds up better than MB/s, which measures the wait for a core.
	CPUPerMB float64 `json:"cpu_s_per_mb,omitempty"`
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

// loadRun is one run of the load benchmark: its stores (nil with a
// --target), the server they are served from, and the report it fills.
type loadRun struct {
	cfg    *loadConfig
	client *benchClient
	stores map[string]storage.Store
	target string         // the --target's base URL, "" for in-process servers
	total  map[string]int // vertices of each store, as its server lists them
	rep    benchReport
}

func runLoad(ctx context.Context, cfg *loadConfig, stdout, stderr io.Writer) error {
	start := time.Now()
	l := &loadRun{cfg: cfg, target: strings.TrimRight(cfg.target, "/"),
		client: &benchClient{Client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64, DisableCompression: true}}},
		rep:    benchReport{Points: cfg.points, Streamlines: cfg.streamlines, Burst: cfg.burst, GoMaxProcs: runtime.GOMAXPROCS(0)}}
	if l.target == "" {
		t0 := time.Now()
		stores, err := benchStores(ctx, cfg.storeDir, cfg.points, cfg.streamlines)
		if err != nil {
			return err
		}
		defer closeStores(stores)
		l.stores = stores
		l.rep.StoreBuildSecs = time.Since(t0).Seconds()
	}
	queries, err := l.queries(ctx, stderr)
	if err != nil {
		return err
	}
	if err := l.cold(ctx, queries); err != nil {
		return err
	}
	if err := l.warm(ctx, queries); err != nil {
		return err
	}
	l.rep.PeakRSSMB = peakRSSMB()
	l.rep.WallSeconds = time.Since(start).Seconds()
	printBench(stdout, &l.rep, l.stores != nil)
	return writeJSON(cfg.jsonOut, &l.rep)
}

// queries are the query kinds to run: those of a store the server serves
// (with vertices), whose name contains --only. It sizes the boxes from
// the vertex counts the server reports, so that a reused --store of
// another size, or a --target's own stores, still get boxes of the wanted
// vertex counts.
func (l *loadRun) queries(ctx context.Context, stderr io.Writer) ([]benchQuery, error) {
	all := []benchQuery{
		{"1k bin", 1_000, "0", "bin", 101, "points"}, {"50k bin", 50_000, "0", "bin", 301, "points"},
		{"500k bin", 500_000, "0", "bin", 50, "points"}, {"50k json", 50_000, "0", "json", 301, "points"},
		{"auto ≤100k bin", 500_000, "auto", "bin", 50, "points"},
		{"streamlines 50k bin", 50_000, "0", "bin", 301, "streamlines"}, {"streamlines 50k json", 50_000, "0", "json", 301, "streamlines"},
		{"streamlines auto ≤100k bin", 150_000, "auto", "bin", 50, "streamlines"},
	}
	total, err := benchSizes(ctx, l.client.Client, l.target, l.stores)
	if err != nil {
		return nil, err
	}
	for _, name := range []string{"points", "streamlines"} {
		asked := map[string]int{"points": l.cfg.points, "streamlines": l.cfg.streamlines}[name]
		switch n, ok := total[name]; {
		case name == "streamlines" && asked == 0:
			total[name] = 0
		case !ok || n == 0:
			where := "the in-process server"
			if l.target != "" {
				where = l.target
			}
			fmt.Fprintf(stderr, "zvfbench: %s serves no store '%s' (or an empty one); its queries are skipped\n", where, name)
			total[name] = 0
		case l.target == "" && l.cfg.storeDir != "" && (n-asked > asked/100 || asked-n > asked/100):
			// (the streamline builder rounds to whole streamlines)
			fmt.Fprintf(stderr, "zvfbench: reusing %s with %d vertices, not the %d asked for (remove it to rebuild)\n",
				filepath.Join(l.cfg.storeDir, name), n, asked)
		}
	}
	l.total = total
	l.rep.Points, l.rep.Streamlines = total["points"], total["streamlines"]
	var served []benchQuery
	for _, q := range all {
		if total[q.store] > 0 {
			served = append(served, q)
		}
	}
	if len(served) == 0 {
		return nil, errors.New("no store to query")
	}
	var keep []benchQuery
	for _, q := range served {
		if strings.Contains(q.name, l.cfg.only) {
			keep = append(keep, q)
		}
	}
	return keep, nil
}

// server starts a fresh in-process server with an empty cache over the
// stores, or, with a --target, returns that (and no cache).
func (l *loadRun) server(ctx context.Context) (base string, stop func(), ch *cache.Cache, err error) {
	if l.stores == nil {
		return l.target, func() {}, nil, nil
	}
	ch = cache.New(1 << 30)
	base, stop, err = benchServe(ctx, l.stores, ch)
	return base, stop, ch, err
}

// cold runs each query kind once, each against a fresh server and cache.
func (l *loadRun) cold(ctx context.Context, queries []benchQuery) error {
	for _, q := range queries {
		base, stop, _, err := l.server(ctx)
		if err != nil {
			return err
		}
		res, err := benchRounds(ctx, l.client, base, q, 1, l.cfg.burst, l.total[q.store])
		stop()
		if err != nil {
			return err
		}
		res.Phase = "cold"
		l.rep.Results = append(l.rep.Results, res)
	}
	return nil
}

// warm runs everything once against one server, then --rounds bursts of
// each query kind (and, with --trivial, the same bursts against the
// trivial server); then the allocations per request and the cache's hit
// ratio.
func (l *loadRun) warm(ctx context.Context, queries []benchQuery) (err error) {
	base, stop, ch, err := l.server(ctx)
	if err != nil {
		return err
	}
	defer stop()
	for _, q := range queries {
		_, _ = benchBurst(ctx, l.client, base, q, l.cfg.burst, l.total[q.store])
	}
	if l.cfg.cpuProfile != "" {
		var stopProfile func() error
		if stopProfile, err = startCPUProfile(l.cfg.cpuProfile); err != nil {
			return err
		}
		defer func() { // the profile's error is the run's if it had none
			if perr := stopProfile(); err == nil {
				err = perr
			}
		}()
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	warmReqs := 0
	for _, q := range queries {
		res, err := benchRounds(ctx, l.client, base, q, l.cfg.rounds, l.cfg.burst, l.total[q.store])
		if err != nil {
			return err
		}
		res.Phase = "warm"
		warmReqs += res.Requests
		l.rep.Results = append(l.rep.Results, res)
		if l.cfg.trivial && q.format == "bin" {
			// The same answers, byte for byte, from a server that only
			// writes them: the floor of what serving them costs here.
			res, err := benchTrivial(ctx, l.client, base, q, l.cfg.rounds, l.cfg.burst, l.total[q.store])
			if err != nil {
				return err
			}
			l.rep.Results = append(l.rep.Results, res)
		}
	}
	runtime.ReadMemStats(&after)
	if l.stores != nil && warmReqs > 0 && !l.cfg.trivial { // the trivial server's requests are not the server's
		l.rep.AllocsPerReq = float64(after.Mallocs-before.Mallocs) / float64(warmReqs)
	}
	if ch != nil {
		s := ch.Stats()
		if s.Hits+s.Misses > 0 {
			l.rep.CacheHitRatio = float64(s.Hits) / float64(s.Hits+s.Misses)
		}
	}
	return nil
}

// startCPUProfile profiles this process's CPU into the file path until
// the function it returns is called.
func startCPUProfile(path string) (stop func() error, err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		return nil
	}, nil
}

// benchRounds runs n bursts of q against base and sums them up.
func benchRounds(ctx context.Context, c *benchClient, base string, q benchQuery, n, burst, points int) (benchResult, error) {
	var lat []time.Duration
	var bytes, verts int64
	errs := 0
	t0 := time.Now()
	cpu0, cpuOK := processCPU()
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
	cpu1, cpu1OK := processCPU()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	res := benchResult{Query: q.name, Requests: len(lat), Errors: errs,
		P50ms: ms(lat[len(lat)/2]), P99ms: ms(lat[(len(lat)*99)/100]), ReqPerSec: float64(len(lat)) / wall,
		VertPerS: float64(verts) / wall, MBPerS: float64(bytes) / wall / 1e6, Vertices: verts / int64(len(lat))}
	if cpuOK && cpu1OK && bytes > 0 {
		res.CPUPerMB = (cpu1 - cpu0) / (float64(bytes) / 1e6)
	}
	return res, nil
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
		return nil, fmt.Errorf("list the stores: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("list the stores: %s answers %s", base+"/api/v1/stores", resp.Status)
	}
	var cat struct {
		Stores []struct {
			Name        string `json:"name"`
			Status      string `json:"status"`
			VertexCount int64  `json:"vertex_count"`
		} `json:"stores"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&cat); err != nil {
		return nil, fmt.Errorf("list the stores at %s: %w", base, err)
	}
	out := map[string]int{}
	for _, s := range cat.Stores {
		if s.Status == "ok" {
			out[s.Name] = int(s.VertexCount)
		}
	}
	return out, nil
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

func benchBurst(ctx context.Context, c *benchClient, base string, q benchQuery, burst, points int) ([]benchSample, error) {
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
			d := c.drainer()
			n, tail, err := d.drain(resp.Body)
			_ = resp.Body.Close()
			out[i] = benchSample{d: time.Since(t0), bytes: n, verts: countVertices(tail), err: err != nil || resp.StatusCode != 200}
			c.drainers.Put(d)
		}(i)
	}
	wg.Wait()
	return out, ctx.Err()
}

func printBench(w io.Writer, r *benchReport, inProcess bool) {
	fmt.Fprintf(w, "zvfbench load: %d points and %d streamline vertices, bursts of %d, GOMAXPROCS %d (stores built in %.1f s)\n\n",
		r.Points, r.Streamlines, r.Burst, r.GoMaxProcs, r.StoreBuildSecs)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tquery\treqs\tvertices/req\tp50 ms\tp99 ms\treq/s\tMvertices/s\tMB/s\terrors\t")
	for _, x := range r.Results {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.2f\t%.2f\t%.1f\t%.1f\t%.0f\t%d\t\n", x.Phase, x.Query, x.Requests, x.Vertices, x.P50ms, x.P99ms, x.ReqPerSec, x.VertPerS/1e6, x.MBPerS, x.Errors)
	}
	_ = tw.Flush()
	warm, warmCPU := map[string]float64{}, map[string]float64{}
	var shares, cpuShares []string
	for _, x := range r.Results {
		switch x.Phase {
		case "warm":
			warm[x.Query], warmCPU[x.Query] = x.MBPerS, x.CPUPerMB
		case "trivial":
			if x.MBPerS > 0 {
				shares = append(shares, fmt.Sprintf("%s %.2f", x.Query, warm[x.Query]/x.MBPerS))
			}
			if c := warmCPU[x.Query]; inProcess && c > 0 && x.CPUPerMB > 0 {
				cpuShares = append(cpuShares, fmt.Sprintf("%s %.2f", x.Query, x.CPUPerMB/c))
			}
		}
	}
	if len(shares) > 0 {
		fmt.Fprintf(w, "\nwarm MB/s as a share of the trivial server's: %s\n", strings.Join(shares, " · "))
	}
	if len(cpuShares) > 0 {
		// What MB/s would say on cores of its own: the trivial server's
		// CPU per MB (its client's included, as zvfserve's is) over
		// zvfserve's.
		fmt.Fprintf(w, "the same in CPU per MB (trivial's over zvfserve's, client included): %s\n", strings.Join(cpuShares, " · "))
	}
	fmt.Fprintf(w, "\ncache hit ratio (warm) %.3f · peak RSS %.0f MB", r.CacheHitRatio, r.PeakRSSMB)
	if inProcess && r.AllocsPerReq > 0 {
		fmt.Fprintf(w, " · allocations per request (server and client, warm) %.0f", r.AllocsPerReq)
	}
	fmt.Fprintf(w, " · %.1f s\n", r.WallSeconds)
}
