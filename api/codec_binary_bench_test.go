package api_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/synth"
)

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
	h := benchServer(b).Handler()
	w := &discard{h: http.Header{}}
	h.ServeHTTP(w, req) // warm
	vertices, err := strconv.ParseInt(w.h.Get("X-Vertex-Count"), 10, 64)
	if err != nil || vertices == 0 {
		b.Fatalf("no vertices (%q)", w.h.Get("X-Vertex-Count"))
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime(b)
	for b.Loop() {
		w.n = 0
		clear(w.h)
		h.ServeHTTP(w, req)
	}
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(w.n)/float64(vertices), "wire-B/vertex")
	b.SetBytes(w.n)
}
