package neuroglancer_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
)

// TestTooLargeBeforeOrAfterIfMatch: the order of a 413 over
// --max-vertices and the 412 of a stale If-Match follows RFC 9110
// 13.2.1 (failures found before significant processing come before
// preconditions), as a cell's does: a size the source's plan holds (a
// cell, a polyline's by_id record, a polyline or line source's object)
// is refused 413 whatever the If-Match; one only reading the object's
// chunks tells (a point source's object, a skeleton, a multilod or legacy
// mesh) comes after the 412, which reads none. Before, a polyline's by_id
// record had no bound (200 over it), and a polyline or line object's
// plan-known 413 came after the 412.
func TestTooLargeBeforeOrAfterIfMatch(t *testing.T) {
	t.Parallel()
	_, ts := newServer(t, api.Options{Stores: fixtureStores(t), MaxVertices: 2})
	for _, tc := range []struct {
		path       string
		withStale  int // the status with a stale If-Match
		plain      int // without
		plainWords string
	}{
		{"/ng/polylines/annotations/by_id/1", 413, 413, "object 1 has"},
		{"/ng/polylines/annotations/objects/1", 413, 413, "object 1 has"},
		{"/ng/polylines/lines/objects/1", 413, 413, "edges"},
		{"/ng/skeleton/lines/objects/1", 413, 413, "edges"},
		{"/ng/polylines/lines/by_id/1", 412, 200, ""}, // one edge
		{"/ng/skeleton/annotations/by_id/1", 412, 200, ""},
		{"/ng/points_pyramid/annotations/objects/1", 412, 413, "vertices"},
		{"/ng/skeleton/skeletons/1", 412, 413, "vertices"},
		{"/ng/mesh/multilod/1", 412, 413, "vertices"},
		{"/ng/mesh/multilod/1.index", 412, 413, "vertices"},
		{"/ng/mesh/meshes/frag/1", 412, 413, "vertices"},
	} {
		resp, body := apitest.Get(t, ts, tc.path)
		if resp.StatusCode != tc.plain || !strings.Contains(string(body), tc.plainWords) {
			t.Errorf("%s: %d %.200s, want %d saying %q", tc.path, resp.StatusCode, body, tc.plain, tc.plainWords)
		}
		resp, body = apitest.Get(t, ts, tc.path, "If-Match", `"0123456789abcdef01234567"`)
		want := "precondition-failed"
		if tc.withStale == http.StatusRequestEntityTooLarge {
			want = "too-large"
		}
		if resp.StatusCode != tc.withStale || !strings.Contains(string(body), want) {
			t.Errorf("%s, a stale If-Match: %d %.200s, want %d %s", tc.path, resp.StatusCode, body, tc.withStale, want)
		}
	}
}
