package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
)

// TestNosniffOnEveryAnswer: every answer of the API, problems and 304s
// included, says X-Content-Type-Options: nosniff, so that a browser never
// takes a text answer (CSV, OBJ, a problem echoing a query) for HTML or
// script. Before, only the viewer's files and the admin listener's
// cmdline did.
func TestNosniffOnEveryAnswer(t *testing.T) {
	t.Parallel()
	_, ts := newServer(t, api.Options{MaxAge: time.Hour})
	box := "/api/v1/stores/graph/bbox?min=0,0,0&max=500,500,500"
	plain, _ := apitest.Get(t, ts, box)
	for _, tc := range []struct {
		method, path string
		hdr          []string
		status       int
	}{
		{http.MethodGet, "/api/v1/stores", nil, http.StatusOK},
		{"GET", "/api/v1/stores/points_bins/bbox?min=0,0,0&max=500,500,500&f=csv", nil, 200},
		{"HEAD", box, nil, 200},
		{"GET", box, []string{"If-None-Match", plain.Header.Get("ETag")}, 304},
		{"GET", box, []string{"If-Match", `"another"`}, 412},
		{"GET", "/ng/skeleton/skeletons/info", nil, 200},
		{"GET", "/ng/skeleton/skeletons/0", []string{"Range", "bytes=0-3"}, 206},
		{"GET", "/api/v1/stores/graph/objects/99999", nil, 404},
		{"GET", "/api/v1/stores/graph/bbox?min=a", nil, 400},
		{"GET", "/no/such/route", nil, 404},
		{"POST", "/api/v1/stores", nil, 405},
		{"OPTIONS", "/api/v1/stores", []string{"Origin", "https://viewer.example", "Access-Control-Request-Method", "GET"}, 204},
		{"GET", "/healthz", nil, 200},
		{"GET", "/openapi.yaml", nil, 200},
		{"GET", "/metrics", nil, 200},
	} {
		resp, body := apitest.Do(t, ts, tc.method, tc.path, tc.hdr...)
		if resp.StatusCode != tc.status {
			t.Errorf("%s %s: %d, want %d: %s", tc.method, tc.path, resp.StatusCode, tc.status, body)
		}
		if got := resp.Header.Values("X-Content-Type-Options"); len(got) != 1 || got[0] != "nosniff" {
			t.Errorf("%s %s (%d): X-Content-Type-Options %q", tc.method, tc.path, resp.StatusCode, got)
		}
	}
}
