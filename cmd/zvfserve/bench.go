package main

import (
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
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/writer"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
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
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %v", errUsage, err)
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
			var lat []time.Duration
			var bytes, verts int64
			errs := 0
			n := 1
			if phase == "warm" {
				n = *rounds
			}
			t0 := time.Now()
			for r := 0; r < n; r++ {
				res, err := benchBurst(ctx, client, base, q, *burst, total[q.store])
				if err != nil {
					return err
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
			requests += len(lat)
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			rep.Results = append(rep.Results, benchResult{Phase: phase, Query: q.name, Requests: len(lat), Errors: errs,
				P50ms: ms(lat[len(lat)/2]), P99ms: ms(lat[(len(lat)*99)/100]), ReqPerSec: float64(len(lat)) / wall,
				VertPerS: float64(verts) / wall, MBPerS: float64(bytes) / wall / 1e6, Vertices: verts / int64(len(lat))})
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
			if stores != nil && warmReqs > 0 {
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

// benchStores returns the points and streamlines stores: built in memory,
// or under dir (written once, then reused).
func benchStores(ctx context.Context, dir string, points, streamlines int) (map[string]storage.Store, error) {
	build := map[string]func() (*blobstore.Store, error){
		"points":      func() (*blobstore.Store, error) { return zvftest.Points(ctx, points, 1, writer.CodecNone) },
		"streamlines": func() (*blobstore.Store, error) { return zvftest.Streamlines(ctx, streamlines, 1) },
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
			b, err := from.Get(gctx, k)
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
	go func() { _ = hs.Serve(limited) }()
	return "http://" + ln.Addr().String(), func() { _ = hs.Close() }, nil
}

type benchSample struct {
	d            time.Duration
	bytes, verts int64
	err          bool
}

func benchBurst(ctx context.Context, c *http.Client, base string, q benchQuery, burst, points int) ([]benchSample, error) {
	out := make([]benchSample, burst)
	var wg sync.WaitGroup
	for i := 0; i < burst; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			// shift each request's box a little so a burst is a viewport's
			// worth of neighbouring tiles, not one URL
			off := q.offset + float64(i%4)*7
			min, max := zvftest.BoxFor(points, q.want, off)
			// level=auto gets a viewer's budget so the server picks a
			// coarser level; fixed levels take the whole answer.
			limit := 2_000_000
			if q.level == "auto" {
				limit = 100_000
			}
			url := fmt.Sprintf("%s/api/v1/stores/%s/bbox?min=%g,%g,%g&max=%g,%g,%g&level=%s&f=%s&limit=%d",
				base, q.store, min[0], min[1], min[2], max[0], max[1], max[2], q.level, q.format, limit)
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

func peakRSSMB() float64 {
	b, err := os.ReadFile("/proc/self/status")
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
	fmt.Fprintf(w, "\ncache hit ratio (warm) %.3f · peak RSS %.0f MB", r.CacheHitRatio, r.PeakRSSMB)
	if inProcess {
		fmt.Fprintf(w, " · allocations per request (server and client, warm) %.0f", r.AllocsPerReq)
	}
	fmt.Fprintf(w, " · %.1f s\n", r.WallSeconds)
}
