package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/writer"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
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
		st, err := zvftest.Points(ctx, benchPoints, 1, writer.CodecNone)
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
	srv := benchServer(b)
	min, max := zvftest.BoxFor(benchPoints, want, 301)
	url := fmt.Sprintf("/api/v1/stores/points/bbox?min=%g,%g,%g&max=%g,%g,%g&f=%s&connectivity=false", min[0], min[1], min[2], max[0], max[1], max[2], format)
	h := srv.Handler()
	req := httptest.NewRequest(http.MethodGet, url, nil)
	w := &discard{h: http.Header{}}
	h.ServeHTTP(w, req) // warm
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		w.n = 0
		clear(w.h)
		h.ServeHTTP(w, req)
	}
	b.SetBytes(w.n)
}

// BenchmarkBBoxBinary50k: server time of a warm 50,000-vertex bbox in the
// binary format (issue target: under 3 ms).
func BenchmarkBBoxBinary50k(b *testing.B) { benchBBox(b, 50_000, "bin") }

// BenchmarkBBoxJSON50k: the same answer as JSON; MB/s is output per core.
func BenchmarkBBoxJSON50k(b *testing.B) { benchBBox(b, 50_000, "json") }

// BenchmarkBBoxNDJSON50k: and as NDJSON.
func BenchmarkBBoxNDJSON50k(b *testing.B) { benchBBox(b, 50_000, "ndjson") }

func BenchmarkBBoxBinary500k(b *testing.B) { benchBBox(b, 500_000, "bin") }
