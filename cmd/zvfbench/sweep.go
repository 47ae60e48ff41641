package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/zvfserve/zvfserve/cmd/internal/cli"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/synth"
	"github.com/zvfserve/zvfserve/zvf/writer"
)

// zvfbench sweep: what grows with the number of files in a store.

func sweepCommand() cli.Command {
	return cli.Command{Summary: "the same points in smaller and smaller chunks (more files): each store's first answer from a fresh zvfserve serve, a cold box and the peak RSS", Run: runSweepCommand}
}

const sweepUsage = `Usage: zvfbench sweep [--edges EDGES] [--runs N] [--points N] [--store DIR] [--server-bin FILE] [--json FILE]

Measures what grows with the size of a store: the same points in smaller and smaller
chunks (more and more files), each store written once under --store and served by a fresh
zvfserve serve process per run (--server-bin, or the zvfserve beside zvfbench, or the one on
PATH): the time from its start to its first answer, the first query that reads an attribute,
a cold 50k-vertex box after that, and its peak RSS. Runs interleave the stores.

Examples:
  zvfbench sweep --store /tmp/zvf-sweep --runs 3                                 # 22k, 90k and 330k files
  zvfbench sweep --edges 250,125 --points 200000 --runs 1                        # a quick run
  zvfbench sweep --store /tmp/zvf-sweep --runs 3 --server-bin ./zvfserve-old     # another build
`

func runSweepCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("sweep", sweepUsage, stderr)
	edgeList := fs.String("edges", "100,62.5,40", "chunk edges, comma-separated (about 22k, 90k and 330k files with 2,000,000 points)")
	runs := fs.Int("runs", 3, "runs, each against a fresh server process per store")
	points := fs.Int("points", 2_000_000, "points in each store (three attributes, three levels)")
	storeDir := fs.String("store", "", "folder to write the stores into (sweep-EDGE/points/), each written once and reused by later runs (default: a temporary folder)")
	serverBin := fs.String("server-bin", "", "the zvfserve binary to start, e.g. an older build to compare (default: the one beside zvfbench, else on PATH)")
	jsonOut := fs.String("json", "", "also write the report as JSON to this file")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var edges []float64
	for _, f := range strings.Split(*edgeList, ",") {
		e, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || !(e > 0) {
			return fmt.Errorf("%w: --edges %q: chunk edges, e.g. 100,62.5,40", cli.ErrUsage, *edgeList)
		}
		edges = append(edges, e)
	}
	return runSweep(ctx, edges, *points, *runs, *storeDir, *serverBin, *jsonOut, stdout, stderr)
}

// sweepRow is one store of the sweep.
type sweepRow struct {
	Chunk  float64 `json:"chunk_edge"`
	Files  int     `json:"files"`
	Chunks int     `json:"level0_chunks"`
	// Median, min and max over the runs.
	FirstAnswerS [3]float64 `json:"start_to_first_answer_s_median_min_max"`
	Cold50kMs    [3]float64 `json:"cold_50k_bin_ms_median_min_max"`
	// FirstAttrMs: the first query that reads an attribute array (a 1k
	// box with one attribute), whose chunks nothing has touched yet.
	FirstAttrMs      [3]float64 `json:"first_attribute_query_ms_median_min_max"`
	PeakRSSMB        [3]float64 `json:"server_peak_rss_mb_median_min_max"`
	first, cold, att []float64
	rss              []float64
}

// runSweep serves stores of the same points in chunks of each edge in
// sweepChunks (ever smaller: each store has several times the files of
// the one before).
func runSweep(ctx context.Context, sweepChunks []float64, points, runs int, storeDir, serverBin, jsonOut string, stdout, stderr io.Writer) error {
	if runs < 1 {
		return fmt.Errorf("%w: --runs %d", cli.ErrUsage, runs)
	}
	bin, dir, cleanup, err := serverAndStores(serverBin, storeDir, stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	rows := make([]*sweepRow, len(sweepChunks))
	paths := make([]string, len(sweepChunks))
	for i, edge := range sweepChunks {
		sub := filepath.Join(dir, "sweep-"+strconv.FormatFloat(edge, 'g', -1, 64))
		t0 := time.Now()
		if err := synth.OnDisk(ctx, sub, "points", func() (storage.Writer, error) {
			return synth.PointsChunked(ctx, points, 1, writer.CodecNone, edge)
		}); err != nil {
			return err
		}
		paths[i] = filepath.Join(sub, "points")
		files, chunks, err := countStoreFiles(paths[i])
		if err != nil {
			return err
		}
		rows[i] = &sweepRow{Chunk: edge, Files: files, Chunks: chunks}
		fmt.Fprintf(stderr, "zvfbench: store with %g-unit chunks ready in %.1f s: %d files\n", edge, time.Since(t0).Seconds(), files)
	}
	small1, small2 := synth.BoxFor(points, 1_000, 101)
	mid1, mid2 := synth.BoxFor(points, 50_000, 301)
	attr1, attr2 := synth.BoxFor(points, 1_000, 701)
	boxURL := func(base string, lo, hi []float64) string {
		return fmt.Sprintf("%s/api/v1/stores/points/bbox?min=%g,%g,%g&max=%g,%g,%g&level=0&f=bin",
			base, lo[0], lo[1], lo[2], hi[0], hi[1], hi[2])
	}
	// Runs interleave the stores, so a slow spell of this shared machine
	// does not land on one store alone.
	for r := 0; r < runs; r++ {
		for i, row := range rows {
			args := []string{"serve", "--addr", "127.0.0.1:0", "--log-level", "warn", "points=" + paths[i]}
			t0 := time.Now()
			srv, err := startServerProcess(ctx, bin, args)
			if err != nil {
				return err
			}
			client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
			first, err := firstAnswer(ctx, client, boxURL(srv.base, small1, small2), t0)
			if err != nil {
				srv.kill()
				return fmt.Errorf("%g-unit chunks: %w", row.Chunk, err)
			}
			t1 := time.Now()
			err = answered(get(ctx, client, boxURL(srv.base, attr1, attr2)+"&attributes=intensity"))
			att := time.Since(t1)
			t2 := time.Now()
			if err == nil {
				err = answered(get(ctx, client, boxURL(srv.base, mid1, mid2)))
			}
			cold := time.Since(t2)
			rss := srv.peakRSSMB()
			client.CloseIdleConnections()
			if serr := srv.stop(30 * time.Second); err == nil {
				err = serr
			}
			if err != nil {
				return fmt.Errorf("%g-unit chunks: %w", row.Chunk, err)
			}
			row.first, row.att, row.cold, row.rss = append(row.first, first.Seconds()), append(row.att, ms(att)), append(row.cold, ms(cold)), append(row.rss, rss)
			fmt.Fprintf(stderr, "zvfbench: run %d, %d files: first answer %.2f s, first attribute query %.1f ms, a cold 50k box %.1f ms, peak RSS %.0f MB\n",
				r+1, row.Files, first.Seconds(), ms(att), ms(cold), rss)
		}
	}
	for _, row := range rows {
		row.FirstAnswerS, row.FirstAttrMs, row.Cold50kMs, row.PeakRSSMB = spread(row.first), spread(row.att), spread(row.cold), spread(row.rss)
	}
	printSweep(stdout, rows, points, runs)
	return writeJSON(jsonOut, rows)
}

// answered: a binary bbox answer that holds vertices (its trailer's
// count), so that no row of the sweep times an empty or cut answer.
func answered(b []byte, err error) error {
	if err != nil {
		return err
	}
	if countVertices(b[max(0, len(b)-4<<10):]) == 0 {
		return fmt.Errorf("an answer of %d bytes holds no vertices (or no trailer)", len(b))
	}
	return nil
}

// firstAnswer asks url until it answers 200 and returns the time since
// start (the server's exec). Only a server not listening yet or one that
// says 503 (still opening) is asked again.
func firstAnswer(ctx context.Context, c *http.Client, url string, start time.Time) (time.Duration, error) {
	deadline := time.Now().Add(10 * time.Minute)
	for {
		b, err := get(ctx, c, url)
		if err == nil {
			d := time.Since(start)
			return d, answered(b, nil)
		}
		var se *statusError
		if errors.Is(err, errNoFile) || (errors.As(err, &se) && se.code != http.StatusServiceUnavailable) {
			return 0, err
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return 0, fmt.Errorf("no answer within 10 minutes of the start: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// countStoreFiles counts the files under dir, and its level-0 vertex
// chunks.
func countStoreFiles(dir string) (files, chunks int, err error) {
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files++
		}
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	ents, err := os.ReadDir(filepath.Join(dir, "0", "vertices"))
	for _, e := range ents {
		if e.IsDir() {
			chunks++
		}
	}
	return files, chunks, err
}

func printSweep(w io.Writer, rows []*sweepRow, points, runs int) {
	fmt.Fprintf(w, "zvfbench sweep: %d points in ever smaller chunks, a fresh `zvfserve serve` per run, %d runs (median, min–max)\n\n", points, runs)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "chunk edge\tfiles\tlevel-0 chunks\tstart to first answer s\tfirst attribute query ms\tcold 50k box ms\tpeak RSS MB\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%g\t%d\t%d\t%.2f (%.2f–%.2f)\t%.1f (%.1f–%.1f)\t%.1f (%.1f–%.1f)\t%.0f (%.0f–%.0f)\t\n", r.Chunk, r.Files, r.Chunks,
			r.FirstAnswerS[0], r.FirstAnswerS[1], r.FirstAnswerS[2], r.FirstAttrMs[0], r.FirstAttrMs[1], r.FirstAttrMs[2],
			r.Cold50kMs[0], r.Cold50kMs[1], r.Cold50kMs[2],
			r.PeakRSSMB[0], r.PeakRSSMB[1], r.PeakRSSMB[2])
	}
	_ = tw.Flush()
}
