package web_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestTokenLeavesViewerOpen: with --token the viewer's static files load
// without it (they hold no data), while the data and the API description
// still need it.
func TestTokenLeavesViewerOpen(t *testing.T) {
	t.Parallel()
	ts := demoServer(t, "s3cret")
	for _, tc := range []struct {
		path, auth string
		status     int
		body       string
	}{
		{"/", "", 200, `id="tokenform"`},
		{"/net.js", "", 200, "Authorization"},
		{"/viewer.css", "", 200, "#tokenform"},
		{"/api/v1/stores", "", 401, "bearer token"},
		{"/api/v1/stores", "Bearer nope", 401, "bearer token"},
		{"/api/v1/stores", "Bearer s3cret", 200, `"cells"`},
		{"/api/v1/stores/cells/bbox?min=0,0,0&max=100,100,100", "", 401, "bearer token"},
		{"/openapi.yaml", "", 401, "bearer token"},
		{"/metrics", "", 401, "bearer token"},
		{"/healthz", "", 200, "ok"},
	} {
		req, err := http.NewRequest(http.MethodGet, ts.URL+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(string(b), tc.body) {
			t.Errorf("GET %s (%q): %d %.120s; want %d with %q", tc.path, tc.auth, resp.StatusCode, b, tc.status, tc.body)
		}
	}
}
