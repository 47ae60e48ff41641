package api_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/synth"
	"github.com/zvfserve/zvfserve/zvf/zvftest/alloctest"
)

// maxWarmRequestAllocs is what a warm binary bbox request may allocate,
// the whole handler chain included (request state, clock, routing,
// query, headers, body, encoder). It was 81 before the request's
// middleware state became one allocation and header values stopped
// costing one each, 45 before a first page stopped allocating a cursor
// and a bbox its trailer names, and 43 before wrap's attempt and the
// request's clock became part of the request's state and context (no
// context or request copy of their own), a one-page answer stopped
// hashing its query, the query's values shared one array, the binary
// header was written without encoding/json, a box's corners shared one
// array, the request metrics' series were looked up once and a bbox
// page's trailer held its numbers without a map, and 27 before the
// router used a route context in the request's state, the query stopped
// being a map and the request's clock stopped following the client's
// context before anything waits on it, and 18 before the request's copy,
// a bbox's box, metadata, encoder, body writer and trailer were made with
// the request's state and its clock's timer came from a pool; raise it
// only for a reason worth an allocation on every request. Two of them are
// this test's writer (it has no write deadlines:
// http.ResponseController's "not supported" error).
const maxWarmRequestAllocs = 10

// TestWarmRequestAllocs pins the allocations of a warm request through the
// whole handler, and that the headers set without per-header slices are
// there, readable by their canonical names, and the body whole.
func TestWarmRequestAllocs(t *testing.T) {
	alloctest.SkipUnderRace(t)
	const n = 20_000
	h := pointsHandler(t, n)
	lo, hi := synth.BoxFor(n, 1_000, 101)
	req := httptest.NewRequest(http.MethodGet, bboxPath("points", lo, hi, "f=bin"), nil)

	// The answer as a recorder sees it: headers by canonical name, body.
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	body := rec.Body.Bytes()
	if !bytes.HasPrefix(body, []byte("ZVFBIN\x00\x01")) {
		t.Fatalf("body starts %q", body[:min(len(body), 16)])
	}
	hdr := rec.Result().Header
	if got := hdr.Get("Content-Length"); got != strconv.Itoa(len(body)) {
		t.Errorf("Content-Length %q for %d bytes", got, len(body))
	}
	for _, k := range []string{"ETag", "X-Request-Id", "Cache-Control", "Vary", "Content-Type", "X-Vertex-Count", "Server-Timing"} {
		if len(hdr.Values(k)) != 1 || hdr.Get(k) == "" {
			t.Errorf("%s: %q", k, hdr.Values(k))
		}
	}

	w := &discard{h: http.Header{}}
	run := func() { w.serve(h, req) }
	run()
	if w.n != int64(len(body)) {
		t.Fatalf("wrote %d bytes, the recorder got %d", w.n, len(body))
	}
	if a := testing.AllocsPerRun(50, run); a > maxWarmRequestAllocs {
		t.Fatalf("a warm 1k binary bbox request allocates %.0f times, more than %d", a, maxWarmRequestAllocs)
	} else {
		t.Logf("allocations per request: %.0f", a)
	}
}
