package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/klauspost/compress/zstd"
	"github.com/zvfserve/zvfserve/cmd/internal/cli"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/synth"
	"github.com/zvfserve/zvfserve/zvf/writer"
)

// zvfbench whole: many clients pull a whole store at once.

func wholeCommand() cli.Command {
	return cli.Command{Summary: "N clients at once each pull the whole point store as JSON from a fresh zvfserve serve per run; the server's peak RSS", Run: runWholeCommand}
}

const wholeUsage = `Usage: zvfbench whole [--clients N] [--runs N] [--points N] [--store DIR] [--cache-bytes B] [--accept-encoding gzip|zstd] [--server-bin FILE] [--json FILE]

The many-large-answers load: --clients clients at once each pull the whole points store
(--points points, three attributes, three levels, written once under --store) as one JSON answer
from a zvfserve serve child process (so the peak RSS is the server's alone), --runs times, each
against a fresh server, and report the time and the server's peak RSS (median and spread); any
answer cut short fails the benchmark. The server is --server-bin, or the zvfserve beside zvfbench,
or the one on PATH.

Examples:
  zvfbench whole --clients 64 --store /tmp/zvf-bench                          # plain JSON
  zvfbench whole --clients 64 --store /tmp/zvf-bench --accept-encoding zstd   # as curl --compressed asks
  zvfbench whole --clients 64 --store /tmp/zvf-bench --server-bin ./zvfserve-old  # another build, same load
`

func runWholeCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("whole", wholeUsage, stderr)
	var w wholeConfig
	fs.IntVar(&w.clients, "clients", 64, "clients at once, each pulling the whole store as one JSON answer")
	fs.IntVar(&w.runs, "runs", 3, "runs, each against a fresh server process")
	fs.IntVar(&w.points, "points", 2_000_000, "points in the synthetic store 'points' (three attributes, three levels)")
	fs.StringVar(&w.storeDir, "store", "", "folder to write the store into (points/), written once and reused by later runs (default: a temporary folder)")
	fs.Int64Var(&w.cacheBytes, "cache-bytes", 512<<20, "the server's --cache-bytes")
	fs.StringVar(&w.serverBin, "server-bin", "", "the zvfserve binary to start, e.g. an older build to compare (default: the one beside zvfbench, else on PATH)")
	fs.StringVar(&w.serveArgs, "serve-args", "", "more flags for the server, space-separated (e.g. \"--request-timeout 5s\")")
	fs.StringVar(&w.acceptEncoding, "accept-encoding", "", "the clients' Accept-Encoding: gzip or zstd (default: none, plain JSON)")
	fs.DurationVar(&w.limit, "run-limit", 10*time.Minute, "a run still going after this long is stopped")
	fs.StringVar(&w.jsonOut, "json", "", "also write the report as JSON to this file")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if w.clients < 1 {
		return fmt.Errorf("%w: --clients %d", cli.ErrUsage, w.clients)
	}
	return runWhole(ctx, &w, stdout, stderr)
}

// wholeConfig is the whole load: clients × the whole points store as one
// JSON answer each, against a fresh `zvfserve serve` process per run.
type wholeConfig struct {
	clients, runs, points                   int
	cacheBytes                              int64
	storeDir, serverBin, serveArgs, jsonOut string
	acceptEncoding                          string
	limit                                   time.Duration
}

// wholeRun is one run of the whole load.
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
		return fmt.Errorf("%w: --accept-encoding %q: gzip or zstd", cli.ErrUsage, w.acceptEncoding)
	}
	if w.runs < 1 {
		return fmt.Errorf("%w: --runs %d", cli.ErrUsage, w.runs)
	}
	bin, dir, cleanup, err := serverAndStores(w.serverBin, w.storeDir, stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	t0 := time.Now()
	if err := synth.OnDisk(ctx, dir, "points", func() (*blobstore.Store, error) {
		return synth.Points(ctx, w.points, 1, writer.CodecNone)
	}); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "zvfbench: store ready in %.1f s\n", time.Since(t0).Seconds())
	rep := wholeReport{Clients: w.clients, AcceptEncoding: w.acceptEncoding, CacheBytes: w.cacheBytes, GoMaxProcs: runtime.GOMAXPROCS(0)}
	args := []string{"serve", "--addr", "127.0.0.1:0", "--cache-bytes", strconv.FormatInt(w.cacheBytes, 10),
		"--max-vertices", "2000000000", "--max-concurrent", strconv.Itoa(max(64, w.clients)), "--revalidate", "0", "--log-level", "warn"}
	args = append(append(args, strings.Fields(w.serveArgs)...), "points="+filepath.Join(dir, "points"))
	for i := 0; i < w.runs; i++ {
		run, err := wholeOnce(ctx, w, bin, args, &rep)
		if err != nil {
			return fmt.Errorf("run %d: %w", i+1, err)
		}
		rep.Runs = append(rep.Runs, run)
		fmt.Fprintf(stderr, "zvfbench: run %d: %.1f s, %d complete, %d cut, server peak RSS %.0f MB\n", i+1, run.WallSeconds, run.Complete, run.Cut, run.ServerPeakRSSMB)
	}
	var wall, rss []float64
	cut := 0
	for _, r := range rep.Runs {
		wall, rss = append(wall, r.WallSeconds), append(rss, r.ServerPeakRSSMB)
		cut += r.Cut
	}
	rep.WallSeconds, rep.ServerPeakRSSMB = spread(wall), spread(rss)
	printWhole(stdout, &rep)
	if err := writeJSON(w.jsonOut, &rep); err != nil {
		return err
	}
	if cut > 0 {
		return fmt.Errorf("%d of %d answers were cut", cut, w.clients*w.runs)
	}
	return nil
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

func printWhole(w io.Writer, r *wholeReport) {
	enc := "plain JSON"
	if r.AcceptEncoding != "" {
		enc = r.AcceptEncoding
	}
	fmt.Fprintf(w, "zvfbench whole: %d clients at once, each the whole 'points' store (%d vertices, %.1f MB of JSON, %s), server cache budget %d MiB, GOMAXPROCS %d\n\n",
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
