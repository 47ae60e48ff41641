package api_test

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/synth"
	"github.com/zvfserve/zvfserve/zvf/zvftest/alloctest"
)

// maxRequestBytesAfterGC bounds what a warm binary bbox request allocates
// right after two collections, which empty every sync.Pool: its request
// state, not its 512 KiB body buffer, 256 KiB hold-back or query scratch
// again (a server whose live heap is small, its cache just emptied,
// collects every query or two).
const maxRequestBytesAfterGC = 64 << 10

// TestRequestBuffersOutliveCollections: the body buffers and the query's
// scratch of plain and compressed answers are kept across collections, so
// a request after them allocates about what a warm one does. Serial: it
// counts the process's allocations.
func TestRequestBuffersOutliveCollections(t *testing.T) {
	alloctest.SkipUnderRace(t)
	const n = 20_000
	h := pointsHandler(t, n)
	lo, hi := synth.BoxFor(n, 5_000, 101)
	for _, tc := range []struct{ name, encoding string }{{"plain", ""}, {"gzip", "gzip"}, {"zstd", "zstd"}} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, bboxPath("points", lo, hi, "f=bin"), nil)
			if tc.encoding != "" {
				req.Header.Set("Accept-Encoding", tc.encoding)
			}
			w := &discard{h: http.Header{}}
			w.serve(h, req) // the chunks into the cache, the buffers made
			for range 3 {
				runtime.GC()
				runtime.GC() // a sync.Pool's values survive one collection, not two
				got := alloctest.Bytes(func() { w.serve(h, req) })
				if got > maxRequestBytesAfterGC {
					t.Errorf("a %d-byte answer after two collections allocated %d bytes, more than %d", w.n, got, maxRequestBytesAfterGC)
				}
			}
		})
	}
}
