package api_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/synth"
	"github.com/zvfserve/zvfserve/zvf/writer"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
	"github.com/zvfserve/zvfserve/zvf/zvftest/alloctest"
	"github.com/zvfserve/zvfserve/zvf/zvftest/benchtest"
)

const benchPoints = 2_000_000

var bench, benchCluster onceServer

// onceServer is a benchmark server over one synthetic points store, built
// at its first use and shared by the benchmarks after it.
type onceServer struct {
	once sync.Once
	srv  *api.Server
	err  error
}

// get builds the server the first time (synthesize writes the store; the
// cache holds budget bytes) and fails b if that failed.
func (o *onceServer) get(b *testing.B, budget int64, synthesize func(context.Context) (storage.Writer, error)) *api.Server {
	o.once.Do(func() {
		ctx := context.Background()
		st, err := synthesize(ctx)
		if err != nil {
			o.err = err
			return
		}
		ch := cache.New(budget)
		s, err := zvf.Open(ctx, storage.Sub(st, "points"), zvf.Options{Name: "points", Cache: ch})
		if err != nil {
			o.err = err
			return
		}
		o.srv, o.err = api.New(api.Options{Stores: []*zvf.Store{s}, Cache: ch})
	})
	if o.err != nil {
		b.Fatal(o.err)
	}
	return o.srv
}

func benchServer(b *testing.B) *api.Server {
	return bench.get(b, 2<<30, func(ctx context.Context) (storage.Writer, error) {
		return synth.Points(ctx, benchPoints, 1, writer.CodecNone)
	})
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

// serve has h answer r into d, emptied first (one recorder serves a
// whole loop: no allocation of its own per answer).
func (d *discard) serve(h http.Handler, r *http.Request) {
	d.n = 0
	clear(d.h)
	h.ServeHTTP(d, r)
}

// storeHandler serves the store at prefix name of st alone, with a
// cache of cacheBytes (large enough, the answers stay warm).
func storeHandler(t testing.TB, st storage.Store, name string, cacheBytes int64) http.Handler {
	ch := cache.New(cacheBytes)
	s := zvftest.OpenSub(t, st, name, ch)
	return apitest.New(t, api.Options{Stores: []*zvf.Store{s}, Cache: ch}).Handler()
}

// pointsHandler serves a synthetic store of n points, as "points",
// uncompressed, with a cache of 256 MiB: what the allocation tests count.
func pointsHandler(t testing.TB, n int) http.Handler {
	t.Helper()
	st, err := synth.Points(context.Background(), n, 1, writer.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	return storeHandler(t, st, "points", 256<<20)
}

func benchBBox(b *testing.B, want int, format string) {
	min, max := synth.BoxFor(benchPoints, want, 301)
	benchURL(b, bboxPath("points", min, max, "f="+format+"&connectivity=false"))
}

// bboxPath is the bbox request of store for the box [min, max] with query
// (the parameters after the box).
func bboxPath(store string, min, max []float64, query string) string {
	return fmt.Sprintf("/api/v1/stores/%s/bbox?min=%g,%g,%g&max=%g,%g,%g&%s", store, min[0], min[1], min[2], max[0], max[1], max[2], query)
}

func benchURL(b *testing.B, url string) {
	benchServe(b, httptest.NewRequest(http.MethodGet, url, nil))
}

// benchServe times the warm benchmark server answering req, in CPU time
// per answer too, and returns what the last answer wrote.
func benchServe(b *testing.B, req *http.Request) *discard {
	return benchServeOn(b, benchServer(b), req)
}

// benchServeOn is benchServe against srv.
func benchServeOn(b *testing.B, srv *api.Server, req *http.Request) *discard {
	h := srv.Handler()
	w := &discard{h: http.Header{}}
	// Text answers prepare a chunk's text the second time one asks: one
	// answer before Loop's warm-up.
	h.ServeHTTP(w, req)
	benchtest.Loop(b, func() {
		w.serve(h, req)
	})
	b.SetBytes(w.n)
	return w
}

// BenchmarkBBoxBinary50k: server time of a warm 50,000-vertex bbox in the
// binary format (issue target: under 3 ms).
func BenchmarkBBoxBinary50k(b *testing.B) { benchBBox(b, 50_000, "bin") }

// BenchmarkBBoxBinary50kFromZero: the 50,000-vertex binary bbox from 0
// on every axis (its cut bins' rows tested as keys, not bits).
func BenchmarkBBoxBinary50kFromZero(b *testing.B) {
	min, max := synth.BoxFor(benchPoints, 50_000, 0)
	benchURL(b, bboxPath("points", min, max, "f=bin&connectivity=false"))
}

// BenchmarkBBoxJSON50k: the same answer as JSON; MB/s is output per core.
func BenchmarkBBoxJSON50k(b *testing.B) { benchBBox(b, 50_000, "json") }

// BenchmarkBBoxJSON50kClients: the 50,000-vertex JSON answer to 8
// requests a core at once (16 on two cores, as the load benchmark's
// clients), where formatting one answer on several cores has no idle core
// to gain; compare cpu-ns/op, the CPU one answer costs.
func BenchmarkBBoxJSON50kClients(b *testing.B) {
	min, max := synth.BoxFor(benchPoints, 50_000, 301)
	h := benchServer(b).Handler()
	url := bboxPath("points", min, max, "f=json&connectivity=false")
	first := &discard{h: http.Header{}}
	for range 2 { // warm, and the chunks' text prepared
		first.n = 0
		h.ServeHTTP(first, httptest.NewRequest(http.MethodGet, url, nil))
	}
	b.SetBytes(first.n)
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	m := benchtest.Start(b)
	b.RunParallel(func(pb *testing.PB) {
		req := httptest.NewRequest(http.MethodGet, url, nil)
		w := &discard{h: http.Header{}}
		for pb.Next() {
			w.serve(h, req)
			if w.n != first.n {
				b.Errorf("answer of %d bytes, want %d", w.n, first.n)
				return
			}
		}
	})
	m.ReportCPU()
}

// BenchmarkBBoxNDJSON50k: and as NDJSON.
func BenchmarkBBoxNDJSON50k(b *testing.B) { benchBBox(b, 50_000, "ndjson") }

// BenchmarkBBoxJSONAttributes50k: the JSON answer with its three
// attributes, which it holds until the vertices are out.
func BenchmarkBBoxJSONAttributes50k(b *testing.B) {
	min, max := synth.BoxFor(benchPoints, 50_000, 301)
	benchURL(b, bboxPath("points", min, max, "f=json&attributes=*&connectivity=false"))
}

// BenchmarkBBoxNDJSONAttributes50k: and as NDJSON, each line with its
// attributes.
func BenchmarkBBoxNDJSONAttributes50k(b *testing.B) {
	min, max := synth.BoxFor(benchPoints, 50_000, 301)
	benchURL(b, bboxPath("points", min, max, "f=ndjson&attributes=*&connectivity=false"))
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
	benchURL(b, bboxPath("points", min, max, "f=bin&level=auto&limit=100000"))
}

// BenchmarkBBoxAutoViewer: BenchmarkBBoxAuto's box as the viewer asks
// for it: quantized to what a pixel of a 4,096-pixel view shows
// (precision= the extent / 4,096), uncompressed and in zstd, which
// browsers accept.
func BenchmarkBBoxAutoViewer(b *testing.B) {
	min, max := synth.BoxFor(benchPoints, 500_000, 50)
	url := bboxPath("points", min, max, "f=bin&level=auto&limit=100000&precision="+strconv.FormatFloat(synth.Side/4096, 'g', -1, 64))
	for _, enc := range []string{"identity", "zstd"} {
		b.Run(enc, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, url, nil)
			req.Header.Set("Accept-Encoding", enc)
			benchRequest(b, req)
		})
	}
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
	alloctest.SkipUnderRace(t)
	if testing.Short() {
		t.Skip("builds a 200k-point store")
	}
	ctx := context.Background()
	st, err := synth.Points(ctx, 200_000, 1, writer.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	h := storeHandler(t, st, "points", 1<<30)
	allocs := map[int]float64{}
	for _, want := range []int{1_000, 50_000} {
		min, max := synth.BoxFor(200_000, want, 301)
		url := bboxPath("points", min, max, "f=bin")
		req := httptest.NewRequest(http.MethodGet, url, nil)
		w := &discard{h: http.Header{}}
		run := func() { w.serve(h, req) }
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
					url := bboxPath("points", lo, hi, "level=0&f=bin&limit=2000000"+p.query)
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

const benchLineVertices = 400_000

var benchLines = sync.OnceValues(linesServer)

// linesServer is a server over a synthetic streamline store of
// benchLineVertices vertices, with a cache of its own.
func linesServer() (*api.Server, error) {
	ctx := context.Background()
	st, err := synth.Streamlines(ctx, benchLineVertices, 1)
	if err != nil {
		return nil, err
	}
	ch := cache.New(1 << 30)
	s, err := zvf.Open(ctx, storage.Sub(st, "streamlines"), zvf.Options{Name: "streamlines", Cache: ch})
	if err != nil {
		return nil, err
	}
	return api.New(api.Options{Stores: []*zvf.Store{s}, Cache: ch})
}

// binaryNext is the next cursor in a binary answer's trailer block.
func binaryNext(b *testing.B, body []byte) string {
	hl := int(binary.LittleEndian.Uint64(body[8:]))
	for o := 16 + (hl+7)/8*8; o < len(body); {
		kind := binary.LittleEndian.Uint32(body[o:])
		n := int(binary.LittleEndian.Uint64(body[o+8:]))
		if kind == 15 {
			var t struct {
				Next *string `json:"next"`
			}
			if err := json.Unmarshal(body[o+16:o+16+n], &t); err != nil {
				b.Fatal(err)
			}
			if t.Next == nil {
				return ""
			}
			return *t.Next
		}
		o += 16 + (n+7)/8*8
	}
	b.Fatal("no trailer")
	return ""
}

// benchLinePages: server time of a warm box of about 50,000 streamline
// vertices with their connectivity, in binary, every page of it at the
// given limit (0: one page), cursors followed as a client would.
func benchLinePages(b *testing.B, limit int) {
	srv, err := benchLines()
	if err != nil {
		b.Fatal(err)
	}
	h := srv.Handler()
	min, max := synth.BoxFor(benchLineVertices, 50_000, 301)
	base := bboxPath("streamlines", min, max, "f=bin")
	if limit > 0 {
		base += fmt.Sprintf("&limit=%d", limit)
	}
	pages, bytes := 0, 0
	walk := func() {
		pages, bytes = 0, 0
		for cur := ""; ; {
			u := base
			if cur != "" {
				u += "&cursor=" + url.QueryEscape(cur)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, u, nil))
			if rec.Code != http.StatusOK {
				b.Fatalf("%s: %d %s", u, rec.Code, rec.Body.Bytes())
			}
			pages++
			bytes += rec.Body.Len()
			if cur = binaryNext(b, rec.Body.Bytes()); cur == "" {
				return
			}
		}
	}
	benchtest.Loop(b, walk)
	b.SetBytes(int64(bytes))
	b.ReportMetric(float64(pages), "pages/op")
}

// BenchmarkBBoxLines50k: the box in one page (the reference for the paged
// answers below).
func BenchmarkBBoxLines50k(b *testing.B) { benchLinePages(b, 0) }

// BenchmarkBBoxLines50kPaged5000: the same answer in pages of 5,000 rows.
func BenchmarkBBoxLines50kPaged5000(b *testing.B) { benchLinePages(b, 5000) }

// BenchmarkBBoxLines50kPaged997: and in pages of 997.
func BenchmarkBBoxLines50kPaged997(b *testing.B) { benchLinePages(b, 997) }

// benchLineURL times the warm streamline server answering one bbox of
// about want vertices (offset: synth.BoxFor's) with query, the answer
// written to a discarding writer as benchServe does.
func benchLineURL(b *testing.B, want int, offset float64, query string) {
	srv, err := benchLines()
	if err != nil {
		b.Fatal(err)
	}
	min, max := synth.BoxFor(benchLineVertices, want, offset)
	w := benchServeOn(b, srv, httptest.NewRequest(http.MethodGet, bboxPath("streamlines", min, max, query), nil))
	if w.h.Get("X-Vertex-Count") == "" && w.n == 0 {
		b.Fatal("empty answer")
	}
}

// BenchmarkBBoxLinesBinary50k: zvfbench load's "streamlines 50k bin" — a
// warm box of about 50,000 streamline vertices, binary, with their edges
// and object ids, in one page.
func BenchmarkBBoxLinesBinary50k(b *testing.B) {
	benchLineURL(b, 50_000, 301, "level=0&f=bin&limit=2000000")
}

// BenchmarkBBoxLinesAuto: zvfbench load's "streamlines auto ≤100k bin" —
// a box of about 150,000 level-0 vertices at level=auto with a 100,000
// budget.
func BenchmarkBBoxLinesAuto(b *testing.B) {
	benchLineURL(b, 150_000, 50, "level=auto&f=bin&limit=100000")
}

// BenchmarkBBoxLinesAutoAfterZoom: BenchmarkBBoxLinesAuto's request to a
// server whose level 0 a viewer has read in one small box first (zoomed
// in, then out): level 0, partly read, is turned down for the large box.
func BenchmarkBBoxLinesAutoAfterZoom(b *testing.B) {
	srv, err := benchLinesZoomed()
	if err != nil {
		b.Fatal(err)
	}
	min, max := synth.BoxFor(benchLineVertices, 150_000, 50)
	benchServeOn(b, srv, httptest.NewRequest(http.MethodGet, bboxPath("streamlines", min, max, "level=auto&f=bin&limit=100000"), nil))
}

// benchLinesZoomed is benchLines' store behind a server of its own, whose
// level 0 was read in a box of about 2,000 vertices inside
// BenchmarkBBoxLinesAuto's.
var benchLinesZoomed = sync.OnceValues(func() (*api.Server, error) {
	srv, err := linesServer()
	if err != nil {
		return nil, err
	}
	min, max := synth.BoxFor(benchLineVertices, 2_000, 150)
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, bboxPath("streamlines", min, max, "level=0&f=bin"), nil))
	if rec.Code != http.StatusOK {
		return nil, fmt.Errorf("zooming in: %d %s", rec.Code, rec.Body.Bytes())
	}
	return srv, nil
})

// The warm read path from every core (issue 25, item 1): the same handler
// as the benchmarks above, served from as many goroutines as -cpu allows,
// each asking for a viewport's neighbouring boxes as zvfbench load does.
// With no serial point ns/op halves from -cpu 1 to -cpu 2 on two idle
// cores; on a loaded machine read cpu-ns/op (what a request costs, which
// contention on a lock would raise) and mutex-wait-ns/op (time requests
// spent blocked on a lock).

// BenchmarkBBoxAutoParallel: the viewer's default request, level=auto
// with a 100,000 budget over ~500k-vertex boxes, after level 0 is cached.
func BenchmarkBBoxAutoParallel(b *testing.B) {
	srv := benchServer(b)
	benchParallel(b, srv, pointURLs(500_000, 50, "level=0&f=bin"), pointURLs(500_000, 50, "level=auto&f=bin&limit=100000"))
}

// BenchmarkBBoxBinary50kParallel: ~50k-vertex boxes at level 0, binary.
func BenchmarkBBoxBinary50kParallel(b *testing.B) {
	srv := benchServer(b)
	urls := pointURLs(50_000, 301, "f=bin")
	benchParallel(b, srv, urls, urls)
}

// BenchmarkBBoxLines50kParallel: ~50k-vertex streamline boxes with their
// edges and object ids, binary.
func BenchmarkBBoxLines50kParallel(b *testing.B) {
	srv, err := benchLines()
	if err != nil {
		b.Fatal(err)
	}
	var urls []string
	for i := range 4 {
		min, max := synth.BoxFor(benchLineVertices, 50_000, 301+float64(i)*7)
		urls = append(urls, bboxPath("streamlines", min, max, "f=bin"))
	}
	benchParallel(b, srv, urls, urls)
}

// pointURLs are four neighbouring boxes of about want of the bench
// store's points (zvfbench load's burst: offsets 7 apart).
func pointURLs(want int, offset float64, query string) []string {
	urls := make([]string, 4)
	for i := range urls {
		min, max := synth.BoxFor(benchPoints, want, offset+float64(i)*7)
		urls[i] = bboxPath("points", min, max, query)
	}
	return urls
}

// benchParallel serves warm (once each, to fill the cache), then urls
// round-robin from every goroutine of b.RunParallel.
func benchParallel(b *testing.B, srv *api.Server, warm, urls []string) {
	h := srv.Handler()
	for _, u := range append(warm, urls...) {
		w := &discard{h: http.Header{}}
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, u, nil))
		if w.n == 0 {
			b.Fatalf("%s: empty answer", u)
		}
	}
	b.ReportAllocs()
	m := benchtest.Start(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		reqs := make([]*http.Request, len(urls))
		for i, u := range urls {
			reqs[i] = httptest.NewRequest(http.MethodGet, u, nil)
		}
		w := &discard{h: http.Header{}}
		for i := 0; pb.Next(); i++ {
			w.serve(h, reqs[i%len(reqs)])
			if w.n == 0 {
				b.Error("empty answer")
				return
			}
		}
	})
	b.StopTimer()
	m.ReportCPU()
	m.ReportMutexWait()
}

// BenchmarkBBoxBinary1k: a warm 1,000-vertex bbox in binary, where the
// answer is small and per-request overhead is what costs (bench's
// "1k bin").
func BenchmarkBBoxBinary1k(b *testing.B) {
	min, max := synth.BoxFor(benchPoints, 1_000, 101)
	benchURL(b, bboxPath("points", min, max, "level=0&f=bin&limit=2000000"))
}

// BenchmarkBBoxBinaryCluster: a warm box of about 49,000 vertices in a
// dense cluster (the reference benchmark's medium_cluster: eight chunks
// of 100, every one cut through its bins of 25), binary, as perf_compare
// asks it.
func BenchmarkBBoxBinaryCluster(b *testing.B) {
	srv := benchCluster.get(b, 1<<30, func(ctx context.Context) (storage.Writer, error) {
		return synth.Clustered(ctx, benchPoints, 1)
	})
	min, max := synth.ClusterBox[0], synth.ClusterBox[1]
	w := benchServeOn(b, srv, httptest.NewRequest(http.MethodGet, bboxPath("points", min, max, "f=bin&limit=2000000"), nil))
	b.ReportMetric(float64(w.n)/12, "bytes/12/op")
}
