package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/synth"
	"github.com/zvfserve/zvfserve/zvf/writer"
)

const benchPoints = 2_000_000

var bench struct {
	once sync.Once
	srv  *api.Server
	err  error
}

func benchServer(b *testing.B) *api.Server {
	bench.once.Do(func() {
		ctx := context.Background()
		st, err := synth.Points(ctx, benchPoints, 1, writer.CodecNone)
		if err != nil {
			bench.err = err
			return
		}
		ch := cache.New(2 << 30)
		s, err := zvf.Open(ctx, storage.Sub(st, "points"), zvf.Options{Name: "points", Cache: ch})
		if err != nil {
			bench.err = err
			return
		}
		bench.srv, bench.err = api.New(api.Options{Stores: []*zvf.Store{s}, Cache: ch})
	})
	if bench.err != nil {
		b.Fatal(bench.err)
	}
	return bench.srv
}

// discard is a ResponseWriter that keeps nothing, so the benchmark measures
// the server, not a recorder's buffer.
type discard struct {
	h http.Header
	n int64
}

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) WriteHeader(int)             {}
func (d *discard) Write(p []byte) (int, error) { d.n += int64(len(p)); return len(p), nil }

func benchBBox(b *testing.B, want int, format string) {
	min, max := synth.BoxFor(benchPoints, want, 301)
	benchURL(b, fmt.Sprintf("/api/v1/stores/points/bbox?min=%g,%g,%g&max=%g,%g,%g&f=%s&connectivity=false", min[0], min[1], min[2], max[0], max[1], max[2], format))
}

func benchURL(b *testing.B, url string) {
	benchServe(b, httptest.NewRequest(http.MethodGet, url, nil))
}

// benchServe times the warm benchmark server answering req, in CPU time
// per answer too, and returns what the last answer wrote.
func benchServe(b *testing.B, req *http.Request) *discard {
	h := benchServer(b).Handler()
	w := &discard{h: http.Header{}}
	h.ServeHTTP(w, req) // warm
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime(b)
	for b.Loop() {
		w.n = 0
		clear(w.h)
		h.ServeHTTP(w, req)
	}
	// On a loaded machine wall time measures the wait for a core too.
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
	b.SetBytes(w.n)
	return w
}

// BenchmarkBBoxBinary50k: server time of a warm 50,000-vertex bbox in the
// binary format (issue target: under 3 ms).
func BenchmarkBBoxBinary50k(b *testing.B) { benchBBox(b, 50_000, "bin") }

// BenchmarkBBoxJSON50k: the same answer as JSON; MB/s is output per core.
func BenchmarkBBoxJSON50k(b *testing.B) { benchBBox(b, 50_000, "json") }

// BenchmarkBBoxNDJSON50k: and as NDJSON.
func BenchmarkBBoxNDJSON50k(b *testing.B) { benchBBox(b, 50_000, "ndjson") }

// BenchmarkBBoxJSONAttributes50k: the JSON answer with its three
// attributes, which it holds until the vertices are out.
func BenchmarkBBoxJSONAttributes50k(b *testing.B) {
	min, max := synth.BoxFor(benchPoints, 50_000, 301)
	benchURL(b, fmt.Sprintf("/api/v1/stores/points/bbox?min=%g,%g,%g&max=%g,%g,%g&f=json&attributes=*&connectivity=false", min[0], min[1], min[2], max[0], max[1], max[2]))
}

func BenchmarkBBoxBinary500k(b *testing.B) { benchBBox(b, 500_000, "bin") }

// BenchmarkBBoxArrow50k: the 50,000-vertex box as an Arrow IPC stream.
func BenchmarkBBoxArrow50k(b *testing.B) { benchBBox(b, 50_000, "arrow") }

// BenchmarkBBoxArrow500k: the 500,000-vertex box as Arrow (issue target:
// within 1.3× of BenchmarkBBoxBinary500k; compare cpu-ns/op too on a
// loaded machine).
func BenchmarkBBoxArrow500k(b *testing.B) { benchBBox(b, 500_000, "arrow") }

// BenchmarkBBoxAuto: a viewer's default request, level=auto with a budget
// (bench's "auto ≤100k bin"): a 500k-vertex box answered from the level
// that fits 100,000 vertices.
func BenchmarkBBoxAuto(b *testing.B) {
	min, max := synth.BoxFor(benchPoints, 500_000, 50)
	benchURL(b, fmt.Sprintf("/api/v1/stores/points/bbox?min=%g,%g,%g&max=%g,%g,%g&f=bin&level=auto&limit=100000", min[0], min[1], min[2], max[0], max[1], max[2]))
}

// BenchmarkBBoxJSON500k: a large JSON answer, formatted on every core the
// run allows (compare -cpu 1,2: MB/s is then per request, not per core).
func BenchmarkBBoxJSON500k(b *testing.B) { benchBBox(b, 500_000, "json") }

// BenchmarkBBoxNDJSON500k: and as NDJSON.
func BenchmarkBBoxNDJSON500k(b *testing.B) { benchBBox(b, 500_000, "ndjson") }

// TestBBoxBinaryAllocsConstant: a warm binary bbox request allocates a
// small, fixed amount (routing, headers, the JSON header and trailer),
// the same for 1,000 and 50,000 vertices: gather and encoding allocate
// nothing per chunk or per vertex.
func TestBBoxBinaryAllocsConstant(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector")
	}
	if testing.Short() {
		t.Skip("builds a 200k-point store")
	}
	ctx := context.Background()
	st, err := synth.Points(ctx, 200_000, 1, writer.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	ch := cache.New(1 << 30)
	s, err := zvf.Open(ctx, storage.Sub(st, "points"), zvf.Options{Name: "points", Cache: ch})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := api.New(api.Options{Stores: []*zvf.Store{s}, Cache: ch})
	if err != nil {
		t.Fatal(err)
	}
	h := srv.Handler()
	allocs := map[int]float64{}
	for _, want := range []int{1_000, 50_000} {
		min, max := synth.BoxFor(200_000, want, 301)
		url := fmt.Sprintf("/api/v1/stores/points/bbox?min=%g,%g,%g&max=%g,%g,%g&f=bin", min[0], min[1], min[2], max[0], max[1], max[2])
		req := httptest.NewRequest(http.MethodGet, url, nil)
		w := &discard{h: http.Header{}}
		run := func() {
			w.n = 0
			clear(w.h)
			h.ServeHTTP(w, req)
		}
		run()
		allocs[want] = testing.AllocsPerRun(20, run)
		if w.n < int64(12*want/2) {
			t.Fatalf("%d-vertex box: only %d bytes", want, w.n)
		}
	}
	t.Logf("allocations per request: %v", allocs)
	if a, b := allocs[1_000], allocs[50_000]; b > a+3 || b > 150 {
		t.Fatalf("allocations grow with the answer: %.0f for 1k vertices, %.0f for 50k", a, b)
	}
}

// BenchmarkEncodingJSONCoords: encoding/json on the same 50,000 float32
// rows, the yardstick for BenchmarkBBoxJSON50k (issue: about three times
// faster).
func BenchmarkEncodingJSONCoords(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	rows := make([][3]float32, 50_000)
	for i := range rows { // uniform in the bench store's [0, 1000)³
		rows[i] = [3]float32{r.Float32() * 1000, r.Float32() * 1000, r.Float32() * 1000}
	}
	var n int
	b.ReportAllocs()
	for b.Loop() {
		out, err := json.Marshal(rows)
		if err != nil {
			b.Fatal(err)
		}
		n = len(out)
	}
	b.SetBytes(int64(n))
}

// BenchmarkBBoxBinaryWire: what a warm binary bbox answer costs on the
// wire and in CPU, exact and quantized (precision= the store's extent /
// 65,536 and / 4,096, the two targets), in each content coding.
// wire-B/vertex is what the client receives per vertex; cpu-ns/op the
// server's CPU per answer (compression included). The points are the
// bench's uniform random 2,000,000 in a cube of 1,000: the worst case for
// compression.
func BenchmarkBBoxBinaryWire(b *testing.B) {
	for _, box := range []struct {
		name   string
		want   int
		offset float64
	}{{"500k", 500_000, 50}, {"50k", 50_000, 301}} {
		lo, hi := synth.BoxFor(benchPoints, box.want, box.offset)
		for _, p := range []struct {
			name  string
			query string
		}{{"exact", ""}, {"P=extent/65536", "&precision=" + strconv.FormatFloat(synth.Side/65536, 'g', -1, 64)},
			{"P=extent/4096", "&precision=" + strconv.FormatFloat(synth.Side/4096, 'g', -1, 64)}} {
			for _, enc := range []string{"identity", "zstd", "gzip"} {
				b.Run(box.name+"/"+p.name+"/"+enc, func(b *testing.B) {
					url := fmt.Sprintf("/api/v1/stores/points/bbox?min=%g,%g,%g&max=%g,%g,%g&level=0&f=bin&limit=2000000%s",
						lo[0], lo[1], lo[2], hi[0], hi[1], hi[2], p.query)
					req := httptest.NewRequest(http.MethodGet, url, nil)
					req.Header.Set("Accept-Encoding", enc)
					benchRequest(b, req)
				})
			}
		}
	}
}

// benchRequest is benchURL for a request with headers; it reports the
// answer's bytes per vertex too.
func benchRequest(b *testing.B, req *http.Request) {
	w := benchServe(b, req)
	vertices, err := strconv.ParseInt(w.h.Get("X-Vertex-Count"), 10, 64)
	if err != nil || vertices == 0 {
		b.Fatalf("no vertices (%q)", w.h.Get("X-Vertex-Count"))
	}
	b.ReportMetric(float64(w.n)/float64(vertices), "wire-B/vertex")
}
