package main

import (
	"context"
	"encoding/binary"
	"io"
	"math"
	"net/http"
	"runtime"
	"runtime/metrics"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage/metered"
	"github.com/zvfserve/zvfserve/zvf/synth"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
	"github.com/zvfserve/zvfserve/zvf/zvftest/benchtest"
)

// TestStatic: static answers every box from both sides, in memory (over
// an emulated link) and from a folder (a real http.FileServer), and both
// count the vertices a direct query of the store finds. The folder holds
// some 20,000 files, which a busy disk takes many seconds to write and
// remove: that case runs with the end-to-end tests. With --precision
// auto, zvfserve's quantized, zstd-coded answers decode to the same
// counts in fewer bytes than float32.
func TestStatic(t *testing.T) {
	t.Parallel()
	for _, where := range []string{"memory", "disk", "precision"} {
		t.Run(where, func(t *testing.T) {
			if where == "disk" {
				zvftest.EndToEnd(t)
			}
			t.Parallel()
			args := []string{"static", "--points", "20000", "--runs", "2"}
			switch where {
			case "disk":
				args = append(args, "--store", t.TempDir())
			case "precision":
				args = append(args, "--precision", "auto")
			default:
				// an emulated link wraps both servers' writers; a new
				// zvfserve every run
				args = append(args, "--rtt", "1ms", "--mbps", "1000", "--fresh-server")
			}
			rows, b, stdout := benchJSON[[]staticRow](t, args...)
			if len(rows) != 3 {
				t.Fatalf("%d rows: %s", len(rows), b)
			}
			points := points20k(t)
			st, err := zvf.Open(context.Background(), points, zvf.Options{Name: "points"})
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
				// Exact float32 answers carry 12 bytes a vertex and more;
				// 16 bits a value with zstd, at most 6 (a 1k box pays its
				// header and trailer over fewer vertices).
				if exact := where != "precision"; exact != (r.WireBPV >= 12) || r.WireBPV <= 0 || (!exact && i > 0 && r.WireBPV > 6) {
					t.Errorf("%s (%s): %.2f bytes a vertex on the wire", r.Query, where, r.WireBPV)
				}
			}
			if !strings.Contains(stdout, "zvfserve faster") || (where == "memory") != strings.Contains(stdout, "1ms round trip per request, 1000 Mbit/s shared") ||
				(where == "precision") != strings.Contains(stdout, "precision=0.244140625 with Accept-Encoding: zstd") ||
				(where == "memory") != strings.Contains(stdout, "zvfserve: a new server for every run (--fresh-server)") ||
				(where == "memory") == strings.Contains(stdout, "zvfserve: one server, its cache emptied before every run") {
				t.Errorf("no table: %s", stdout)
			}
		})
	}
}

// BenchmarkColdBBoxHTTP: one cold binary bbox over HTTP, from a running
// server with its cache emptied (zvfserve) or from a new server
// (zvfserve-fresh: store opened, cache empty), beside the static-file
// client of zvfbench static fetching and filtering the same box's vertex
// files, for the 50k and 500k boxes of zvfbench static. The
// 2,000,000-point store is written to a folder on local disk once and
// reused by later runs.
func BenchmarkColdBBoxHTTP(b *testing.B) {
	ctx := context.Background()
	dir, err := synth.ColdPoints(ctx)
	if err != nil {
		b.Fatal(err)
	}
	st := zvftest.Store(b, dir)
	tt := &timedTransport{base: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}
	client := &http.Client{Transport: tt}
	defer client.CloseIdleConnections()
	bufs := new(staticBuffers)
	for _, box := range []struct {
		name   string
		want   int
		offset float64
	}{{"50k", 50_000, 301}, {"500k", 500_000, 50}} {
		lo, hi := synth.BoxFor(2_000_000, box.want, box.offset)
		for _, side := range []struct {
			name  string
			fresh bool
		}{{"zvfserve", false}, {"zvfserve-fresh", true}} {
			b.Run(box.name+"/"+side.name, func(b *testing.B) {
				// Every read of the store is counted (on local disk, one
				// file opened each), those of the request apart from those
				// of opening the store: a count that holds on a loaded
				// machine; so are the goroutines the query started.
				reads := new(readCounter)
				z := &zvfSide{st: metered.Wrap(st, reads), fresh: side.fresh}
				defer z.close()
				// One untimed query first, as zvfbench static runs.
				if _, n, _, err := z.cold(ctx, client, lo, hi, 0, bufs, nil); err != nil || n == 0 {
					b.Fatal(n, err)
				}
				// Server and client run in this process, so the CPU time
				// across a query is all it cost, which holds up under load
				// better than its wall time (though the runtime's own
				// work, GC, falls where it falls).
				var total, cpu, first, last time.Duration
				var queryReads, started, gcs int64
				for b.Loop() {
					var c0 time.Duration
					var g0, gc0 int64
					var t0 time.Time
					d, n, _, opened, err := serverColdCounted(ctx, client, z, lo, hi, bufs, reads, func() {
						g0, gc0 = goroutinesCreated(), gcCycles()
						c0 = benchtest.CPU(b)
						t0 = time.Now()
					})
					cpu += benchtest.CPU(b) - c0
					gcs += gcCycles() - gc0
					first += tt.first.Sub(t0)
					last += tt.last.Sub(t0)
					started += goroutinesCreated() - g0
					if err != nil || n == 0 {
						b.Fatal(n, err)
					}
					total += d
					queryReads += opened
				}
				// ns/op includes emptying the cache (with --fresh, opening
				// the store and starting the server); this is the request
				// alone.
				b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "query-ms")
				b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "query-cpu-ms")
				b.ReportMetric(float64(queryReads)/float64(b.N), "files-read/op")
				b.ReportMetric(float64(started)/float64(b.N), "goroutines/op")
				// Collections during the request (not the one cold runs
				// before it): what its garbage cost, counted.
				b.ReportMetric(float64(gcs)/float64(b.N), "gc/op")
				// When the answer's first byte (its headers) and its last
				// byte reached the client, from the request's start.
				b.ReportMetric(float64(first.Microseconds())/1000/float64(b.N), "first-byte-ms")
				b.ReportMetric(float64(last.Microseconds())/1000/float64(b.N), "last-byte-ms")
			})
		}
		b.Run(box.name+"/static", func(b *testing.B) {
			files, stop, err := serveObjects(st, dir, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer stop()
			lay, err := staticOpen(ctx, client, files)
			if err != nil {
				b.Fatal(err)
			}
			var total, cpu time.Duration
			var fetched int64
			for b.Loop() {
				runtime.GC() // as zvfSide.cold does before zvfserve's query
				c0 := benchtest.CPU(b)
				d, n, chunks, _, err := staticCold(ctx, client, files, lay, lo, hi, bufs)
				cpu += benchtest.CPU(b) - c0
				if err != nil || n == 0 {
					b.Fatal(n, err)
				}
				total += d
				fetched += int64(chunks)
			}
			b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "query-ms")
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "query-cpu-ms")
			b.ReportMetric(float64(fetched)/float64(b.N), "files-read/op")
		})
	}
}

// timedTransport notes when the last response's headers arrived (first)
// and when its body's end was read (last). One request at a time.
type timedTransport struct {
	base        *http.Transport
	first, last time.Time
}

func (t *timedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	t.first = time.Now()
	resp.Body = &timedBody{ReadCloser: resp.Body, t: t}
	return resp, nil
}

func (t *timedTransport) CloseIdleConnections() { t.base.CloseIdleConnections() }

type timedBody struct {
	io.ReadCloser
	t *timedTransport
}

func (b *timedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.t.last = time.Now()
	}
	return n, err
}

// goroutinesCreated is how many goroutines the process has started.
func goroutinesCreated() int64 {
	m := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(m)
	return int64(m[0].Value.Uint64())
}

// gcCycles is how many collections the process has completed.
func gcCycles() int64 {
	m := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(m)
	return int64(m[0].Value.Uint64())
}

// readCounter counts the store's reads (metered.Observer).
type readCounter struct{ n atomic.Int64 }

func (c *readCounter) ObserveRead(int, time.Duration) { c.n.Add(1) }

// serverColdCounted is z.cold, with the reads the query made (after the
// store opened): the open's own reads are counted before the request
// starts, so the difference is the request's.
func serverColdCounted(ctx context.Context, c *http.Client, z *zvfSide, lo, hi []float64, bufs *staticBuffers, reads *readCounter, started func()) (time.Duration, int64, int64, int64, error) {
	var before int64
	d, n, size, err := z.cold(ctx, c, lo, hi, 0, bufs, func() { before = reads.n.Load(); started() })
	return d, n, size, reads.n.Load() - before, err
}

// TestColdRunsReadEveryFile: the runs zvfbench static times read the
// same files whichever way zvfserve's side is cold: a running server whose
// cache was emptied holds nothing of the box (every run reads what a new
// server reads), and the first run is no different from the next.
func TestColdRunsReadEveryFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	points := points20k(t)
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	defer client.CloseIdleConnections()
	lo, hi := synth.BoxFor(20000, 5000, 50)
	counts := map[bool][]int64{}
	for _, fresh := range []bool{false, true} {
		reads := new(readCounter)
		z := &zvfSide{st: metered.Wrap(points, reads), fresh: fresh}
		for range 3 {
			_, n, _, opened, err := serverColdCounted(ctx, client, z, lo, hi, new(staticBuffers), reads, func() {})
			if err != nil || n == 0 {
				t.Fatal(n, err)
			}
			counts[fresh] = append(counts[fresh], opened)
		}
		z.close()
	}
	want := counts[true][0]
	if want == 0 {
		t.Fatal("a new server's cold answer read no file")
	}
	for fresh, c := range counts {
		for i, n := range c {
			if n != want {
				t.Errorf("fresh=%v run %d read %d files, a new server's first run %d", fresh, i, n, want)
			}
		}
	}
}

// meter counts the store's reads and their bytes (metered.Observer).
type meter struct{ files, bytes atomic.Int64 }

func (m *meter) ObserveRead(n int, _ time.Duration) { m.files.Add(1); m.bytes.Add(int64(n)) }

// TestColdCounts: what one cold answer reads and starts, in counts that
// hold on any machine, beside what the static client fetches for the
// same box: files opened (each store read opens one file on local disk,
// read in one read call: localfs's TestWholeReadIsOneReadCall), bytes
// read and goroutines started. The boxes are zvfbench static's 1k and 50k
// boxes scaled to a 20,000-point store of the same chunks (8 and 27
// chunks). zvfserve reads each chunk's vertices and their zarr.json and
// nothing else: no level or family metadata (read when the store
// opened), no fragment index (the bins come from the rows). Not
// parallel: goroutines are counted process-wide.
func TestColdCounts(t *testing.T) {
	ctx := context.Background()
	points := points20k(t)
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	defer client.CloseIdleConnections()
	m := new(meter)
	z := &zvfSide{st: metered.Wrap(points, m)}
	defer z.close()
	files, stop, err := serveObjects(points, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	lay, err := staticOpen(ctx, client, files)
	if err != nil {
		t.Fatal(err)
	}
	bufs := new(staticBuffers)
	for _, box := range []struct {
		name   string
		want   int
		offset float64
		chunks int
	}{{"1k", 10, 101, 8}, {"50k", 500, 301, 27}} {
		t.Run(box.name, func(t *testing.T) {
			lo, hi := synth.BoxFor(20000, box.want, box.offset)
			var f0, b0, g0 int64
			_, n, _, err := z.cold(ctx, client, lo, hi, 0, bufs, func() { f0, b0, g0 = m.files.Load(), m.bytes.Load(), goroutinesCreated() })
			zg := goroutinesCreated() - g0
			zf, zb := m.files.Load()-f0, m.bytes.Load()-b0
			if err != nil || n == 0 {
				t.Fatal(n, err)
			}
			_, sn, sf, sb, err := staticCold(ctx, client, files, lay, lo, hi, bufs)
			if err != nil || sn != n {
				t.Fatalf("the static client found %d vertices, zvfserve %d (%v)", sn, n, err)
			}
			t.Logf("%s: zvfserve %d files, %d bytes, %d goroutines; static client %d files, %d bytes", box.name, zf, zb, zg, sf, sb)
			if sf != box.chunks {
				t.Fatalf("the static client fetched %d files, want the box's %d chunks", sf, box.chunks)
			}
			// Two files a chunk: its vertices and their zarr.json (a 0.7
			// chunk's own metadata decides how its bytes decode).
			if zf != int64(2*sf) {
				t.Errorf("zvfserve read %d files for %d chunks, want 2 a chunk", zf, sf)
			}
			// The same vertex bytes, and each chunk's zarr.json (under
			// 1 KiB) beside them.
			if zb < sb || zb > sb+int64(sf)<<10 {
				t.Errorf("zvfserve read %d bytes, the static client %d: want its vertex bytes and at most 1 KiB a chunk more", zb, sb)
			}
			// The answer's readers, connection and request, and no
			// goroutine a chunk: a reader runs the chunk's load itself
			// (cache.Get runs it on its first asker), and the early read
			// of its vertices beside its zarr.json is started in the
			// store (storage.Starter). Each goroutine a chunk would be a
			// hand-off that waits for a core.
			if max := int64(20); zg > max {
				t.Errorf("zvfserve started %d goroutines for %d chunks, want at most %d", zg, sf, max)
			}
		})
	}
}

// TestBinaryVerticesView: the client's float32 blocks are the answer's
// bytes in place when they are 4-aligned in memory (as a viewer's
// Float32Array over the response), and decoded otherwise, to the same
// values either way.
func TestBinaryVerticesView(t *testing.T) {
	want := []float32{1.5, -2, 3e7, float32(math.Inf(1)), 0, -0.25}
	answer := func(pad int) []byte {
		b := make([]byte, pad, pad+64)
		b = append(b, "ZVFBIN\x00\x01"...)
		b = binary.LittleEndian.AppendUint64(b, 2)
		b = append(b, "{}"...)
		b = append(b, make([]byte, 6)...)
		b = binary.LittleEndian.AppendUint32(b, 1)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(want)/3))
		b = binary.LittleEndian.AppendUint64(b, uint64(4*len(want)))
		for _, v := range want {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
		return b[pad:]
	}
	for _, pad := range []int{0, 1, 2, 3} {
		b := answer(pad)
		var buf []float32
		parts, err := binaryVertices(b, &buf)
		if err != nil || len(parts) != 1 || !slices.Equal(parts[0], want) {
			t.Fatalf("pad %d: %v, %v", pad, parts, err)
		}
		inPlace := unsafe.Pointer(&parts[0][0]) == unsafe.Pointer(&b[40])
		if aligned := uintptr(unsafe.Pointer(&b[0]))%4 == 0; inPlace != aligned {
			t.Errorf("pad %d: viewed in place %v, 4-aligned %v", pad, inPlace, aligned)
		}
	}
}
