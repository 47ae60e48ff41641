package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	neturl "net/url"
	"path/filepath"
	"regexp"
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
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/synth"
	"github.com/zvfserve/zvfserve/zvf/writer"
)

// zvfbench whole: many clients pull a whole store at once.

func wholeCommand() cli.Command {
	return cli.Command{Summary: "N clients at once each pull the whole point store as JSON from a fresh zvfserve serve per run; the server's peak RSS", Run: runWholeCommand}
}

const wholeUsage = `Usage: zvfbench whole [--clients N] [--runs N] [--points N] [--channels C] [--store DIR] [--cache-bytes B] [--accept-encoding gzip|zstd] [--server-bin FILE] [--json FILE]

The many-large-answers load: --clients clients at once each pull the whole points store
(--points points, three attributes, three levels, written once under --store) as JSON — one
answer, or its pages in turn when the server pages it — from a zvfserve serve child process (so
the peak RSS is the server's alone), --runs times, each against a fresh server, and report the
time and the server's peak RSS (median and spread); any answer cut short fails the benchmark.
--channels C gives the store one C-channel float32 attribute instead (an embedding, as spatial
omics writes; store 'points-cC'), which the clients ask for. The server is --server-bin, or the
zvfserve beside zvfbench, or the one on PATH.

Examples:
  zvfbench whole --clients 64 --store /tmp/zvf-bench                          # plain JSON
  zvfbench whole --clients 64 --store /tmp/zvf-bench --accept-encoding zstd   # as curl --compressed asks
  zvfbench whole --clients 64 --store /tmp/zvf-bench --server-bin ./zvfserve-old  # another build, same load
  zvfbench whole --clients 16 --points 200000 --channels 128 --cache-bytes 67108864  # wide rows
`

func runWholeCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("whole", wholeUsage, stderr)
	var w wholeConfig
	fs.IntVar(&w.clients, "clients", 64, "clients at once, each pulling the whole store as one JSON answer")
	fs.IntVar(&w.runs, "runs", 3, "runs, each against a fresh server process")
	fs.IntVar(&w.points, "points", 2_000_000, "points in the synthetic store 'points' (three attributes, three levels)")
	fs.IntVar(&w.channels, "channels", 0, "instead, the store holds one `C`-channel float32 attribute (store 'points-cC'), and the clients ask for it (attributes=*)")
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
	clients, runs, points, channels         int
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
	Pages           int      `json:"pages"` // requests, over all clients
	ServerPeakRSSMB float64  `json:"server_peak_rss_mb"`
	ServerExitSecs  float64  `json:"server_exit_s"`
}

type wholeReport struct {
	Clients        int        `json:"clients"`
	Channels       int        `json:"channels,omitempty"`
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
	name, build := "points", func() (storage.Writer, error) { return synth.Points(ctx, w.points, 1, writer.CodecNone) }
	if w.channels > 0 {
		name = fmt.Sprintf("points-c%d", w.channels)
		build = func() (storage.Writer, error) { return widePoints(ctx, w.points, w.channels, name) }
	}
	if err := synth.OnDisk(ctx, dir, name, build); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "zvfbench: store ready in %.1f s\n", time.Since(t0).Seconds())
	rep := wholeReport{Clients: w.clients, Channels: w.channels, AcceptEncoding: w.acceptEncoding, CacheBytes: w.cacheBytes, GoMaxProcs: runtime.GOMAXPROCS(0)}
	args := []string{"serve", "--addr", "127.0.0.1:0", "--cache-bytes", strconv.FormatInt(w.cacheBytes, 10),
		"--max-vertices", "2000000000", "--max-concurrent", strconv.Itoa(max(64, w.clients)), "--revalidate", "0", "--log-level", "warn"}
	args = append(append(args, strings.Fields(w.serveArgs)...), "points="+filepath.Join(dir, name))
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
	if w.channels > 0 {
		url += "&attributes=*"
	}
	type result struct {
		d          time.Duration
		wire, body int64
		pages      int
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
			wire, body, pages, err := pullPages(ctx, client, url, w.acceptEncoding, st.VertexCount)
			res[i] = result{time.Since(t), wire, body, pages, err}
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
		run.Pages += r.pages
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

// pullPages reads a whole-store answer page by page, following each
// page's next cursor, and checks that every page is whole (see pullPage)
// and that together they hold every vertex. It returns the bytes on the
// wire and of the bodies, and the pages.
func pullPages(ctx context.Context, c *http.Client, url, encoding string, vertices int64) (wire, body int64, pages int, err error) {
	next, got := "", int64(0)
	for {
		u := url
		if next != "" {
			u += "&cursor=" + neturl.QueryEscape(next)
		}
		w, b, count, cursor, err := pullPage(ctx, c, u, encoding)
		wire, body, pages = wire+w, body+b, pages+1
		if err != nil {
			return wire, body, pages, err
		}
		if got += count; cursor == "" {
			break
		}
		next = cursor
	}
	if got != vertices {
		return wire, body, pages, fmt.Errorf("well-formed but short: %d of %d vertices over %d pages", got, vertices, pages)
	}
	return wire, body, pages, nil
}

// nextCursor finds a JSON answer's next cursor in its tail.
var nextCursor = regexp.MustCompile(`"next":"([^"]+)"}\n$`)

// pullPage reads one JSON page and checks that it ended: a 200, no
// transport error, the closing count and next members. It returns the
// bytes on the wire and of the body, the count and the next cursor ("":
// none).
func pullPage(ctx context.Context, c *http.Client, url, encoding string) (wireN, bodyN, count int64, next string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, 0, 0, "", err
	}
	if encoding != "" {
		req.Header.Set("Accept-Encoding", encoding)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, 0, 0, "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, 0, "", fmt.Errorf("status %d", resp.StatusCode)
	}
	wire := &countingReader{r: resp.Body}
	var body io.Reader = wire
	switch resp.Header.Get("Content-Encoding") {
	case "gzip":
		zr, err := gzip.NewReader(wire)
		if err != nil {
			return wire.n, 0, 0, "", err
		}
		body = zr
	case "zstd":
		zr, err := zstd.NewReader(wire, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
		if err != nil {
			return wire.n, 0, 0, "", err
		}
		defer zr.Close()
		body = zr
	}
	n, tail, err := newDrainer().drain(body)
	if err != nil {
		// The server cut the answer: the client sees a transport error.
		return wire.n, n, 0, "", fmt.Errorf("cut: %v", err)
	}
	if m := nextCursor.FindSubmatch(tail); m != nil {
		return wire.n, n, countVertices(tail), string(m[1]), nil
	}
	if !bytes.HasSuffix(tail, []byte(`"next":null}`+"\n")) {
		return wire.n, n, 0, "", fmt.Errorf("well-formed but short: no closing count and next")
	}
	return wire.n, n, countVertices(tail), "", nil
}

// widePoints writes n uniform points with one attribute of channels
// float32 values ("embedding", normal noise) into a fresh mem:// store
// under prefix name, one level, chunk 125.
func widePoints(ctx context.Context, n, channels int, name string) (storage.Writer, error) {
	r := rand.New(rand.NewPCG(1, 13))
	pos := make([]float32, 3*n)
	for i := range pos {
		pos[i] = float32(r.Float64() * synth.Side)
	}
	emb := make([]float32, n*channels)
	for i := range emb {
		emb[i] = float32(r.NormFloat64())
	}
	st, err := blobstore.Open(ctx, "mem://")
	if err != nil {
		return nil, err
	}
	_, err = writer.WritePoints(ctx, st, name, &writer.PointCloud{Positions: pos, Attributes: []writer.Attribute{writer.Float32Attribute("embedding", channels, emb)}},
		writer.Options{ChunkShape: []float64{125, 125, 125}})
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	return st, nil
}

func printWhole(w io.Writer, r *wholeReport) {
	enc := "plain JSON"
	if r.AcceptEncoding != "" {
		enc = r.AcceptEncoding
	}
	what := "three attributes, not asked for"
	if r.Channels > 0 {
		what = fmt.Sprintf("a %d-channel float32 attribute", r.Channels)
	}
	fmt.Fprintf(w, "zvfbench whole: %d clients at once, each the whole 'points' store (%d vertices, %s; %.1f MB of JSON, %s), server cache budget %d MiB, GOMAXPROCS %d\n\n",
		r.Clients, r.Vertices, what, r.AnswerMB, enc, r.CacheBytes>>20, r.GoMaxProcs)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\twall s\tanswer p50 s\tanswer max s\tcomplete\tcut\tpages\tMB on the wire\tserver peak RSS MB\texit after SIGTERM s\t")
	for i, x := range r.Runs {
		fmt.Fprintf(tw, "%d\t%.1f\t%.1f\t%.1f\t%d\t%d\t%d\t%.0f\t%.0f\t%.2f\t\n", i+1, x.WallSeconds, x.RequestP50Secs, x.RequestMaxSecs, x.Complete, x.Cut, x.Pages, x.WireMB, x.ServerPeakRSSMB, x.ServerExitSecs)
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
