package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/web"
)

// TestUnknownAPIAndNeuroglancerPathsAreProblems: with the viewer served
// at /, a path of the API's or the Neuroglancer sources' namespace that
// matches no route is still a problem+json 404, as /api/… was: /api, /ng
// and /ng/ got the viewer's plain-text "404 page not found".
func TestUnknownAPIAndNeuroglancerPathsAreProblems(t *testing.T) {
	t.Parallel()
	_, ts := newServer(t, api.Options{Stores: openStores(t, "graph"), UI: web.Handler(web.Options{})})
	for _, path := range []string{"/api", "/api/", "/api/v2/stores", "/ng", "/ng/", "/ng/graph"} {
		resp, body := apitest.Get(t, ts, path)
		var p api.Problem
		if resp.StatusCode != http.StatusNotFound || resp.Header.Get("Content-Type") != "application/problem+json" ||
			json.Unmarshal(body, &p) != nil || !strings.HasSuffix(p.Type, "/not-found") {
			t.Errorf("%s: %d %q %.200s, want a not-found problem", path, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
	}
	if resp, _ := apitest.Get(t, ts, "/"); resp.StatusCode != http.StatusOK {
		t.Errorf("/: %d", resp.StatusCode)
	}
}
