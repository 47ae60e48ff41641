package api_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime/metrics"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/zvf/synth"
)

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
	benchParallel(b, srv, pointURLs(500_000, 50, "&level=0&f=bin"), pointURLs(500_000, 50, "&level=auto&f=bin&limit=100000"))
}

// BenchmarkBBoxBinary50kParallel: ~50k-vertex boxes at level 0, binary.
func BenchmarkBBoxBinary50kParallel(b *testing.B) {
	srv := benchServer(b)
	urls := pointURLs(50_000, 301, "&f=bin")
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
		urls = append(urls, fmt.Sprintf("/api/v1/stores/streamlines/bbox?min=%g,%g,%g&max=%g,%g,%g&f=bin", min[0], min[1], min[2], max[0], max[1], max[2]))
	}
	benchParallel(b, srv, urls, urls)
}

// pointURLs are four neighbouring boxes of about want of the bench
// store's points (zvfbench load's burst: offsets 7 apart).
func pointURLs(want int, offset float64, query string) []string {
	urls := make([]string, 4)
	for i := range urls {
		min, max := synth.BoxFor(benchPoints, want, offset+float64(i)*7)
		urls[i] = fmt.Sprintf("/api/v1/stores/points/bbox?min=%g,%g,%g&max=%g,%g,%g%s", min[0], min[1], min[2], max[0], max[1], max[2], query)
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
	w0, cpu0 := mutexWait(), cpuTime(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		reqs := make([]*http.Request, len(urls))
		for i, u := range urls {
			reqs[i] = httptest.NewRequest(http.MethodGet, u, nil)
		}
		w := &discard{h: http.Header{}}
		for i := 0; pb.Next(); i++ {
			w.n = 0
			clear(w.h)
			h.ServeHTTP(w, reqs[i%len(reqs)])
			if w.n == 0 {
				b.Error("empty answer")
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(mutexWait()-w0)/float64(b.N), "mutex-wait-ns/op")
}

// mutexWait is the time goroutines have spent blocked on sync.Mutex and
// sync.RWMutex (and the runtime's own locks), in nanoseconds.
func mutexWait() int64 {
	s := []metrics.Sample{{Name: "/sync/mutex/wait/total:seconds"}}
	metrics.Read(s)
	return int64(s[0].Value.Float64() * 1e9)
}
