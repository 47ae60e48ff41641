package api_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// TestHugeDeclaredBoundsDoNotHang: a store whose root metadata declares
// bounds of ±1e308 (or any box whose edge over a bin edge passes the
// int64 range) is served promptly. densityScales, which every
// descriptor and Neuroglancer source request runs, turned the box into
// voxel indices with int64(math.Floor(lo/s)) — out of range, that is
// MinInt64 — and then stepped the index by one until float64(off)·s ≤ lo:
// 2^63 steps. Each such request spun a core for good, past
// --request-timeout, and never answered.
func TestHugeDeclaredBoundsDoNotHang(t *testing.T) {
	t.Parallel()
	dir := zvftest.CopyTree(t, filepath.Join(fixtures, "points_pyramid.zarrvectors"))
	root := filepath.Join(dir, "zarr.json")
	b, err := os.ReadFile(root)
	if err != nil {
		t.Fatal(err)
	}
	var meta map[string]any
	if err := json.Unmarshal(b, &meta); err != nil {
		t.Fatal(err)
	}
	zv := meta["attributes"].(map[string]any)["zarr_vectors"].(map[string]any)
	zv["bounds"] = [][]float64{{-1e308, -1e308, -1e308}, {1e308, 1e308, 1e308}}
	if b, err = json.Marshal(meta); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(root, b, 0o644); err != nil {
		t.Fatal(err)
	}
	st := apitest.Open(t, dir, "huge", nil)
	srv, _ := newServer(t, api.Options{Stores: []*zvf.Store{st}})
	h := srv.Handler()
	// The density volume of such bounds has no voxel grid: the store has
	// no density source, and says so.
	for _, tc := range []struct {
		path string
		code int
		want string
	}{
		{"/api/v1/stores/huge", 200, `"name":"huge"`},
		{"/ng/huge/density/info", 404, `has no density source`},
		{"/ng/huge/annotations/info", 200, `"neuroglancer_annotations_v1"`},
		{"/api/v1/stores/huge/bbox?min=0,0,0&max=1000,1000,1000&limit=1", 200, `"count":1`},
	} {
		path := tc.path
		done := make(chan struct{})
		rec := httptest.NewRecorder()
		go func() {
			defer close(done)
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		}()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: no answer after 20 s", path)
		}
		if body := rec.Body.String(); rec.Code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %.300s; want %d with %s", path, rec.Code, body, tc.code, tc.want)
		}
	}
}
