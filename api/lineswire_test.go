package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/synth"
	"github.com/zvfserve/zvfserve/zvf/zvftest/alloctest"
)

// TestWarmLineAnswerBytes: a warm binary streamline answer — vertices,
// object ids and edges of about 20,000 vertices — allocates a few
// kilobytes, whatever its size: the reader builds ids and edges in the
// wire's form (ids sliced or gathered from the chunk's prepared column,
// edges in a pooled buffer) and the encoder writes them as they are. It
// used to convert them through a per-answer buffer (68 kB a 50k answer).
func TestWarmLineAnswerBytes(t *testing.T) {
	alloctest.SkipUnderRace(t)
	ctx := context.Background()
	const n = 80_000
	st, err := synth.Streamlines(ctx, n, 1)
	if err != nil {
		t.Fatal(err)
	}
	h := storeHandler(t, st, "streamlines", 256<<20)
	lo, hi := synth.BoxFor(n, 20_000, 301)
	req := httptest.NewRequest(http.MethodGet, bboxPath("streamlines", lo, hi, "level=0&f=bin"), nil)
	w := &discard{h: http.Header{}}
	w.serve(h, req)
	w.serve(h, req) // the chunks' preparations are made
	if w.h.Get("X-Vertex-Count") == "" || w.n < 20_000*12 {
		t.Fatalf("a %d-byte answer (%s vertices)", w.n, w.h.Get("X-Vertex-Count"))
	}
	// The least of five rounds: a collection in a round may empty the
	// pool the edges are built in (sync.Pool), which then allocates
	// them again once.
	const runs = 10
	per := uint64(1 << 62)
	for range 5 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range runs {
			w.serve(h, req)
		}
		runtime.ReadMemStats(&after)
		per = min(per, (after.TotalAlloc-before.TotalAlloc)/runs)
	}
	t.Logf("%s vertices, %d bytes: %d bytes allocated a request", w.h.Get("X-Vertex-Count"), w.n, per)
	if per > 16<<10 {
		t.Fatalf("a warm %s-vertex streamline answer allocates %d bytes a request, want at most %d", w.h.Get("X-Vertex-Count"), per, 16<<10)
	}
}
