package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/synth"
	"github.com/zvfserve/zvfserve/zvf/writer"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// TestNegotiateAnswerAllocs: which formats can hold a store's answers
// depends on its shape alone, so a request does not work it out again —
// it used to build a 406 problem (with its formatted detail) for every
// file format that cannot, on every bbox request, and throw them away
// (issue 25: a tenth of a warm answer's allocations).
func TestNegotiateAnswerAllocs(t *testing.T) {
	ctx := context.Background()
	mem, err := synth.Points(ctx, 1000, 1, writer.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	st := zvftest.OpenSub(t, mem, "points", nil)
	s, err := New(Options{Stores: []*zvf.Store{st}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ query, acceptEncoding, want string }{
		{"", "", "json"},
		{"?f=bin", "gzip, deflate, br, zstd", "bin"},
		{"?f=json", "gzip, deflate, br, zstd", "json"},
		{"?f=csv", "gzip;q=0.5, zstd", "csv"},
	} {
		r := httptest.NewRequest(http.MethodGet, "/api/v1/stores/points/bbox"+c.query, nil)
		r.Header.Set("Accept-Encoding", c.acceptEncoding)
		q, _ := parseQuery(r.URL.RawQuery, nil)
		r = r.WithContext(context.WithValue(r.Context(), attemptKey, &attempt{q: q})) // as wrap does
		rep, err := s.negotiateAnswer(r, st, "bbox")
		if err != nil || rep.codec.format() != c.want {
			t.Fatalf("%q: negotiated %v, %v; want %s", c.query, rep.codec, err, c.want)
		}
		if a := testing.AllocsPerRun(50, func() { _, _ = s.negotiateAnswer(r, st, "bbox") }); a != 0 {
			t.Errorf("%q: %.0f allocations to choose a format", c.query, a)
		}
	}
	// f= naming a format that cannot hold the store still says why.
	r := httptest.NewRequest(http.MethodGet, "/api/v1/stores/points/bbox?f=glb", nil)
	_, err = s.negotiateAnswer(r, st, "bbox")
	if want := "f=glb cannot hold a point_cloud store (it holds mesh)"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("f=glb: %v, want %q", err, want)
	}
}
