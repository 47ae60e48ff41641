package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unsafe"

	"github.com/klauspost/compress/zstd"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/cmd/internal/cli"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/synth"
	"golang.org/x/sync/errgroup"
)

// zvfbench static: zvfserve against a static-file client.
//
// The static-file client is the lean alternative to a server: the store's
// files behind a plain file server, and a client that knows the layout of
// the bench's points store (0.7, uncompressed float32 vertices, chunk
// cells named i.j.k). It fetches only the level-0 vertex files of the
// chunks the box touches, six at a time as a browser would, and filters
// them itself. zvfserve answers the same box cold: from a server that is
// up, its cache emptied before each run (or, with --fresh-server, from a
// new server each run); both have the box's vertices in memory at the
// end, and both must count the same vertices.

// staticRow is one box: both sides' times over the runs.
type staticRow struct {
	Query    string  `json:"query"`
	Vertices int64   `json:"vertices"`
	Chunks   int     `json:"static_chunks_fetched"`
	StaticMB float64 `json:"static_mb_fetched"`
	ServerMB float64 `json:"zvfserve_mb"`
	// Precision is the precision= zvfserve was asked for (0: exact
	// float32); WireBPV the bytes per vertex it sent.
	Precision float64   `json:"precision,omitempty"`
	WireBPV   float64   `json:"zvfserve_bytes_per_vertex"`
	ServerMs  []float64 `json:"zvfserve_ms"`
	StaticMs  []float64 `json:"static_ms"`
	SpeedUp   float64   `json:"speed_up_median"`
	// Median and spread (min, max) of each side.
	Server [3]float64 `json:"zvfserve_ms_median_min_max"`
	Static [3]float64 `json:"static_ms_median_min_max"`
}

// staticParallel is how many files the static client fetches at once (a
// browser's connections per host).
const staticParallel = 6

// runStatic compares the two on st (in folder dir, "" when in memory).
func runStatic(ctx context.Context, st storage.Store, dir string, points, runs int, only string, prec float64, fresh bool, via *link, stdout io.Writer) ([]staticRow, error) {
	files, stopFiles, err := serveObjects(st, dir, via)
	if err != nil {
		return nil, err
	}
	defer stopFiles()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64, DisableCompression: true}}
	lay, err := staticOpen(ctx, client, files)
	if err != nil {
		return nil, err
	}
	zs := &zvfSide{st: st, via: via, fresh: fresh}
	defer zs.close()
	var rows []staticRow
	bufs := new(staticBuffers)
	for _, q := range []struct {
		name   string
		want   int
		offset float64
	}{{"1k", 1_000, 101}, {"50k", 50_000, 301}, {"500k", 500_000, 50}} {
		if only != "" && !strings.Contains(q.name, only) {
			continue
		}
		min, max := synth.BoxFor(points, q.want, q.offset)
		row := staticRow{Query: q.name + " bin", Precision: prec}
		// One untimed run of each side first: what is timed is a cold
		// answer (data read from the files), not either process's first
		// touch of its buffers, pools and connections code.
		for r := -1; r < runs; r++ {
			// Alternate which side goes first, so neither always runs
			// on a machine the other has just warmed or loaded.
			sides := []func() error{
				func() error {
					d, n, size, err := zs.cold(ctx, client, min, max, prec, bufs, nil)
					if r >= 0 {
						row.ServerMs = append(row.ServerMs, ms(d))
					}
					row.ServerMB = float64(size) / 1e6
					if n > 0 {
						row.WireBPV = float64(size) / float64(n)
					}
					return row.check(n, err, "zvfserve")
				},
				func() error {
					runtime.GC() // as before zvfserve's query: each side starts from a collected heap
					d, n, chunks, size, err := staticCold(ctx, client, files, lay, min, max, bufs)
					if r >= 0 {
						row.StaticMs = append(row.StaticMs, ms(d))
					}
					row.Chunks, row.StaticMB = chunks, float64(size)/1e6
					return row.check(n, err, "static client")
				},
			}
			if r%2 != 0 {
				sides[0], sides[1] = sides[1], sides[0]
			}
			for _, f := range sides {
				if err := f(); err != nil {
					return nil, err
				}
			}
		}
		row.Server, row.Static = spread(row.ServerMs), spread(row.StaticMs)
		row.SpeedUp = row.Static[0] / row.Server[0]
		rows = append(rows, row)
	}
	printStatic(stdout, rows, points, runs, fresh, via)
	return rows, nil
}

// check records n vertices, which must be what the other side found.
func (r *staticRow) check(n int64, err error, side string) error {
	switch {
	case err != nil:
		return fmt.Errorf("%s, %s: %w", r.Query, side, err)
	case r.Vertices != 0 && n != r.Vertices:
		return fmt.Errorf("%s: %s found %d vertices, the other side %d", r.Query, side, n, r.Vertices)
	}
	r.Vertices = n
	return nil
}

// staticBuffers are the clients' receive buffers, kept across runs as a
// viewer keeps its own: what is timed is the servers and the decoding,
// not the first touch of fresh memory for every body.
type staticBuffers struct {
	server  bytes.Buffer
	plain   []byte // the server's answer after its content coding
	unzstd  *zstd.Decoder
	workers [staticParallel]bytes.Buffer
	// the vertices each side decodes: zvfserve's answer, and each of the
	// static client's workers'
	decoded []float32
	rows    [staticParallel][]float32
}

// zvfSide is the zvfserve side of the comparison: one server kept up
// across runs, its cache emptied before each (a cold answer from a
// server that has been serving, as the static client's file server and
// buffers have), or with fresh a new server for every run (store opened
// anew: the answer then also pays the new process state's first use).
type zvfSide struct {
	st    storage.Store
	via   *link
	fresh bool

	base  string
	stop  func()
	cache *cache.Cache
}

// cold answers the box cold (see zvfSide), calling started (when not nil)
// just before the request: the client decodes the binary answer's vertex
// blocks into float32 slices, as a viewer would. With prec > 0 it asks
// for precision=prec and accepts zstd, as the viewer does, and its time
// includes the decompression and the dequantization; the size returned is
// what came over the wire.
func (z *zvfSide) cold(ctx context.Context, c *http.Client, lo, hi []float64, prec float64, bufs *staticBuffers, started func()) (time.Duration, int64, int64, error) {
	if z.fresh {
		z.close()
	}
	if z.stop == nil {
		z.cache = cache.New(1 << 30)
		base, stop, err := benchServeVia(ctx, map[string]storage.Store{"points": z.st}, z.cache, z.via)
		if err != nil {
			return 0, 0, 0, err
		}
		z.base, z.stop = base, stop
	}
	// Nothing of the box is held (the static client's file server holds
	// nothing either), and the answer comes on a new connection, as the
	// static client's requests do.
	z.cache.Purge()
	c.CloseIdleConnections()
	// The store's open and the runs before leave garbage on the heap; a
	// collection now keeps its cost out of the query's time, as on a
	// server opened long before its first query.
	runtime.GC()
	if started != nil {
		started()
	}
	return serverQuery(ctx, c, z.base, lo, hi, prec, bufs)
}

func (z *zvfSide) close() {
	if z.stop != nil {
		z.stop()
		z.stop = nil
	}
}

// serverQuery asks the zvfserve at base for the box in binary and decodes
// it (see zvfSide.cold).
func serverQuery(ctx context.Context, c *http.Client, base string, lo, hi []float64, prec float64, bufs *staticBuffers) (time.Duration, int64, int64, error) {
	url := fmt.Sprintf("%s/api/v1/stores/points/bbox?min=%g,%g,%g&max=%g,%g,%g&level=0&f=bin&limit=2000000",
		base, lo[0], lo[1], lo[2], hi[0], hi[1], hi[2])
	header := http.Header{}
	if prec > 0 {
		url += "&precision=" + strconv.FormatFloat(prec, 'g', -1, 64)
		header.Set("Accept-Encoding", "zstd")
	}
	t0 := time.Now()
	buf := &bufs.server
	coding, err := getCoded(ctx, c, url, header, buf)
	if err != nil {
		return 0, 0, 0, err
	}
	body := buf.Bytes()
	switch coding {
	case "":
	case "zstd":
		if bufs.unzstd == nil {
			if bufs.unzstd, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1)); err != nil {
				return 0, 0, 0, err
			}
		}
		if bufs.plain, err = bufs.unzstd.DecodeAll(body, bufs.plain[:0]); err != nil {
			return 0, 0, 0, fmt.Errorf("the answer's zstd: %w", err)
		}
		body = bufs.plain
	default:
		return 0, 0, 0, fmt.Errorf("an answer in Content-Encoding %q, which was not asked for", coding)
	}
	parts, err := binaryVertices(body, &bufs.decoded)
	d := time.Since(t0)
	if err != nil {
		return 0, 0, 0, err
	}
	var n int64
	for _, p := range parts {
		n += int64(len(p) / 3)
	}
	if trailer := countVertices(body[max(0, len(body)-4<<10):]); trailer != n {
		return 0, 0, 0, fmt.Errorf("the answer's vertex blocks hold %d vertices, its trailer says %d", n, trailer)
	}
	return d, n, int64(buf.Len()), nil
}

// getCoded is getInto with request headers; it returns the answer's
// Content-Encoding, the body left as it came.
func getCoded(ctx context.Context, c *http.Client, url string, header http.Header, buf *bytes.Buffer) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	req.Header = header
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", &statusError{url: url, status: resp.Status, code: resp.StatusCode}
	}
	buf.Reset()
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return "", err
	}
	return resp.Header.Get("Content-Encoding"), nil
}

// float32View is blk's bytes as float32s in place, as a viewer's
// new Float32Array(buffer, offset, n) wraps a block without copying it
// (the format puts every payload at a multiple of 8 for that); false on a
// big-endian host or a block not 4-aligned in memory, which are decoded.
func float32View(blk []byte) ([]float32, bool) {
	if len(blk) == 0 || binary.NativeEndian.Uint16([]byte{1, 0}) != 1 || uintptr(unsafe.Pointer(unsafe.SliceData(blk)))%4 != 0 {
		return nil, false
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(blk))), len(blk)/4), true
}

// binaryVertices decodes the vertex blocks of a binary answer of 3-D
// points (docs/binary-format.md) into float32 rows: float32 blocks (kind
// 1) viewed in place (float32View), as a viewer does; quantized blocks
// (kind 6) as offset + q × scale. Rows it computes go to buf, kept
// across runs as the static client keeps its own (the parts are slices
// of it or of b).
func binaryVertices(b []byte, buf *[]float32) ([][]float32, error) {
	if len(b) < 16 || string(b[:6]) != "ZVFBIN" {
		return nil, errors.New("not a binary answer")
	}
	p := 16 + (binary.LittleEndian.Uint64(b[8:])+7)/8*8
	var parts [][]float32
	all := (*buf)[:0]
	for p+16 <= uint64(len(b)) {
		kind, n := binary.LittleEndian.Uint32(b[p:]), binary.LittleEndian.Uint64(b[p+8:])
		p += 16
		if n > uint64(len(b))-p {
			return nil, errors.New("a block runs past the answer's end")
		}
		if kind == 1 {
			blk := b[p : p+n/4*4]
			if v, ok := float32View(blk); ok {
				parts = append(parts, v)
			} else {
				at := len(all)
				all = slices.Grow(all, len(blk)/4)[:at+len(blk)/4]
				v := all[at:]
				for i := range v {
					v[i] = math.Float32frombits(binary.LittleEndian.Uint32(blk[4*i:]))
				}
				parts = append(parts, v)
			}
		}
		if kind == blockQuantized {
			v, err := dequantize(b[p:p+n], binary.LittleEndian.Uint32(b[p-12:]), 3)
			if err != nil {
				return nil, err
			}
			parts = append(parts, v)
		}
		p += (n + 7) / 8 * 8
	}
	*buf = all
	return parts, nil
}

// staticCold is the static client: the level-0 vertex files of the
// chunks the box touches, fetched staticParallel at a time from a fresh
// connection pool, decoded and filtered to the box.
func staticCold(ctx context.Context, c *http.Client, base string, lay staticLayout, boxLo, boxHi []float64, bufs *staticBuffers) (time.Duration, int64, int, int64, error) {
	c.CloseIdleConnections()
	t0 := time.Now()
	var keys []string
	var lo, hi [3]int
	for i := range 3 {
		lo[i] = max(int(math.Floor(boxLo[i]/lay.chunk[i])), lay.lo[i])
		hi[i] = min(int(math.Floor(boxHi[i]/lay.chunk[i])), lay.hi[i])
	}
	for x := lo[0]; x <= hi[0]; x++ {
		for y := lo[1]; y <= hi[1]; y++ {
			for z := lo[2]; z <= hi[2]; z++ {
				keys = append(keys, fmt.Sprintf("0/vertices/%d.%d.%d/c/0", x, y, z))
			}
		}
	}
	parts := make([][]float32, len(keys))
	sizes := make([]int64, len(keys))
	next := make(chan int, len(keys))
	for i := range keys {
		next <- i
	}
	close(next)
	g, gctx := errgroup.WithContext(ctx)
	for w := range staticParallel {
		buf := &bufs.workers[w]
		rows := bufs.rows[w][:0]
		g.Go(func() error {
			defer func() { bufs.rows[w] = rows }()
			for i := range next {
				err := getInto(gctx, c, base+"/"+keys[i], buf)
				if errors.Is(err, errNoFile) {
					continue // no vertices in that chunk
				}
				if err != nil {
					return err
				}
				b := buf.Bytes()
				if len(b)%12 != 0 {
					return fmt.Errorf("%s: %d bytes is not whole float32 triples", keys[i], len(b))
				}
				sizes[i] = int64(len(b))
				at := len(rows)
				in := rows
				for j := 0; j < len(b); j += 12 {
					x := math.Float32frombits(binary.LittleEndian.Uint32(b[j:]))
					y := math.Float32frombits(binary.LittleEndian.Uint32(b[j+4:]))
					z := math.Float32frombits(binary.LittleEndian.Uint32(b[j+8:]))
					if float64(x) >= boxLo[0] && float64(x) <= boxHi[0] && float64(y) >= boxLo[1] && float64(y) <= boxHi[1] &&
						float64(z) >= boxLo[2] && float64(z) <= boxHi[2] {
						in = append(in, x, y, z)
					}
				}
				rows = in
				parts[i] = in[at:len(in):len(in)]
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return 0, 0, 0, 0, err
	}
	d := time.Since(t0)
	var n, size int64
	for i := range parts {
		n += int64(len(parts[i]) / 3)
		size += sizes[i]
	}
	return d, n, len(keys), size, nil
}

// staticLayout is what the static client reads of the root metadata once
// when it opens the store (not timed): the chunk shape, and the bounds,
// so that it never asks for chunks outside them.
type staticLayout struct {
	chunk  [3]float64
	lo, hi [3]int // chunk coordinates the bounds span
}

func staticOpen(ctx context.Context, c *http.Client, base string) (staticLayout, error) {
	var out staticLayout
	b, err := get(ctx, c, base+"/zarr.json")
	if err != nil {
		return out, err
	}
	var root struct {
		Attributes struct {
			ZV struct {
				ChunkShape []float64   `json:"chunk_shape"`
				Bounds     [][]float64 `json:"bounds"`
			} `json:"zarr_vectors"`
		} `json:"attributes"`
	}
	zv := &root.Attributes.ZV
	if err := json.Unmarshal(b, &root); err != nil || len(zv.ChunkShape) != 3 || len(zv.Bounds) != 2 || len(zv.Bounds[0]) != 3 || len(zv.Bounds[1]) != 3 {
		return out, fmt.Errorf("the store's root zarr.json has no 3-D chunk_shape and bounds (%v)", err)
	}
	for i := range 3 {
		out.chunk[i] = zv.ChunkShape[i]
		out.lo[i] = int(math.Floor(zv.Bounds[0][i] / zv.ChunkShape[i]))
		out.hi[i] = int(math.Floor(zv.Bounds[1][i] / zv.ChunkShape[i]))
	}
	return out, nil
}

func printStatic(w io.Writer, rows []staticRow, points, runs int, fresh bool, via *link) {
	fmt.Fprintf(w, "zvfbench static: %d points, one query at a time, cold, %d runs each (median, min–max), over %s\n", points, runs, via)
	if fresh {
		fmt.Fprintln(w, "zvfserve: a new server for every run (--fresh-server)")
	} else {
		fmt.Fprintln(w, "zvfserve: one server, its cache emptied before every run")
	}
	if len(rows) > 0 && rows[0].Precision > 0 {
		fmt.Fprintf(w, "zvfserve asked for precision=%g with Accept-Encoding: zstd\n", rows[0].Precision)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "query\tvertices\tzvfserve ms\tMB sent\tbytes/vertex\tstatic client ms\tfiles\tMB fetched\tzvfserve faster\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%.1f (%.1f–%.1f)\t%.2f\t%.2f\t%.1f (%.1f–%.1f)\t%d\t%.1f\t%.2f×\t\n", r.Query, r.Vertices,
			r.Server[0], r.Server[1], r.Server[2], r.ServerMB, r.WireBPV, r.Static[0], r.Static[1], r.Static[2], r.Chunks, r.StaticMB, r.SpeedUp)
	}
	_ = tw.Flush()
}

func staticCommand() cli.Command {
	return cli.Command{Summary: "cold zvfserve against a static-file client that fetches a box's vertex files and filters them itself", Run: runStaticCommand}
}

const staticUsage = `Usage: zvfbench static [--runs N] [--points N] [--store DIR] [--only TEXT] [--precision VALUE|auto] [--fresh-server] [--rtt D] [--mbps N] [--json FILE]

Compares zvfserve with the lean alternative to a server, one cold query at a time:
the store's files behind a plain file server, and a client that knows the layout, fetches the level-0
vertex files of the chunks a box touches (six at a time, as a browser would) and filters them itself.
Both answer cold (zvfserve's cache emptied, nothing of the box held by either server; new
connections; a collected heap) after one untimed run of each, so that neither process's first use of
its buffers is timed; both end with the box's vertices in memory and must count the same; it prints
the median and spread of each and the ratio. --fresh-server starts a new zvfserve (store opened anew)
for every run instead, so its time also holds that new server's first use. --rtt and --mbps put an
emulated network between the clients and both servers (loopback has none).
--precision asks zvfserve for coordinates within VALUE (store units; auto: the viewer's choice for a
4,096-pixel view of the whole level, its extent / 4,096) and accepts zstd, as the viewer does; its
time then includes decompressing and dequantizing, and bytes/vertex is what came over the wire.

Examples:
  zvfbench static --store /tmp/zvf-bench                       # loopback
  zvfbench static --store /tmp/zvf-bench --rtt 20ms --mbps 100  # over a network
  zvfbench static --store /tmp/zvf-bench --rtt 20ms --mbps 100 --precision auto
`

// runStaticCommand runs static: the points store (built as the load
// benchmark builds it), --runs runs per box.
func runStaticCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("static", staticUsage, stderr)
	points := fs.Int("points", 2_000_000, "points in the synthetic store 'points' (three attributes, three levels)")
	storeDir := fs.String("store", "", "folder to write the store into (points/), written once and reused by later runs (default: in memory)")
	runs := fs.Int("runs", 7, "runs per box, each side cold every time")
	only := fs.String("only", "", "run only the boxes whose name contains this (1k, 50k, 500k)")
	var via link
	fs.DurationVar(&via.RTT, "rtt", 0, "an emulated network between clients and both servers: the round trip each request waits for before its answer starts")
	fs.Float64Var(&via.Mbps, "mbps", 0, "the emulated network's bandwidth in Mbit/s, shared by each server's connections (0: unlimited)")
	jsonOut := fs.String("json", "", "also write the report as JSON to this file")
	fresh := fs.Bool("fresh-server", false, "a new zvfserve (store opened anew, empty cache) for every run, rather than one server whose cache is emptied before each")
	precision := fs.String("precision", "", "ask zvfserve for coordinates within this many store units (precision=), with Accept-Encoding: zstd; auto: the store's extent / 4,096, a 4k-pixel view's pixel (default: exact float32, no content coding)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *runs < 1 {
		return fmt.Errorf("%w: --runs must be at least 1", cli.ErrUsage)
	}
	prec, err := parsePrecision(*precision)
	if err != nil {
		return err
	}
	stores, err := benchStores(ctx, *storeDir, *points, 0)
	if err != nil {
		return err
	}
	defer closeStores(stores)
	dir := ""
	if *storeDir != "" {
		dir = filepath.Join(*storeDir, "points")
	}
	rows, err := runStatic(ctx, stores["points"], dir, *points, *runs, *only, prec, *fresh, &via, stdout)
	if err != nil {
		return err
	}
	return writeJSON(*jsonOut, rows)
}

// blockQuantized is the kind of a quantized vertices block.
const blockQuantized = 6

// dequantize decodes a kind 6 payload of dims axes at bits per value
// into interleaved float32 rows.
func dequantize(b []byte, bits uint32, dims int) ([]float32, error) {
	w := int(bits) / 8
	head := 16 * dims
	if (bits != 8 && bits != 16 && bits != 32) || len(b) < head || (len(b)-head)%(dims*w) != 0 {
		return nil, fmt.Errorf("a quantized block of %d bytes at %d bits", len(b), bits)
	}
	rows := (len(b) - head) / (dims * w)
	v := make([]float32, rows*dims)
	for a := range dims {
		off := math.Float64frombits(binary.LittleEndian.Uint64(b[8*a:]))
		scale := math.Float64frombits(binary.LittleEndian.Uint64(b[8*(dims+a):]))
		plane := b[head+a*rows*w:]
		for i := range rows {
			var q uint32
			switch w {
			case 1:
				q = uint32(plane[i])
			case 2:
				q = uint32(binary.LittleEndian.Uint16(plane[2*i:]))
			default:
				q = binary.LittleEndian.Uint32(plane[4*i:])
			}
			v[i*dims+a] = float32(off + float64(q)*scale)
		}
	}
	return v, nil
}

// parsePrecision reads --precision: "" is exact (0), auto the bench
// store's extent over 4,096.
func parsePrecision(v string) (float64, error) {
	switch v {
	case "":
		return 0, nil
	case "auto":
		return synth.Side / 4096, nil
	}
	p, err := strconv.ParseFloat(v, 64)
	if err != nil || !(p > 0) || math.IsInf(p, 0) {
		return 0, fmt.Errorf("%w: --precision %q: a positive number of store units, or auto", cli.ErrUsage, v)
	}
	return p, nil
}
