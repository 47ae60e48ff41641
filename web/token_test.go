package web_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/zvfserve/zvfserve/api/apitest"
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

// TestViewerTokenInBrowser: against a server started with a token, the
// page loads, asks for the token, asks again when it is wrong, then sends
// it as a bearer header on every data request and draws; a reload in the
// same tab does not ask again.
func TestViewerTokenInBrowser(t *testing.T) {
	b := newBrowser(t)
	const token = "s3cret-token"
	var mu sync.Mutex
	seen := map[string]int{} // "path status auth-ok"
	h := newDemo(t, false).handler(t, token)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := apitest.NewCountingWriter(w)
		h.ServeHTTP(sw, r)
		kind := "static"
		if strings.HasPrefix(r.URL.Path, "/api/") {
			kind = "api"
		}
		mu.Lock()
		seen[fmt.Sprintf("%s %d %v", kind, sw.Status, r.Header.Get("Authorization") == "Bearer "+token)]++
		mu.Unlock()
	}))
	t.Cleanup(ts.Close)

	b.navigate(ts.URL + "/?stores=cells")
	b.wait(`!document.getElementById('tokenform').hidden`)
	b.eval(`document.getElementById('token').value = 'wrong'; document.querySelector('#tokenform button').click()`)
	b.wait(`!document.getElementById('tokenform').hidden && document.getElementById('tokenmsg').textContent.includes('did not accept')`)
	if ready, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`window.__zvf.ready === true`)); err != nil || ready {
		t.Fatalf("the viewer loaded data without the token (%v)", err)
	}
	b.eval(`document.getElementById('token').value = '` + token + `'; document.querySelector('#tokenform button').click()`)
	b.settle()
	if n, total, _ := pixels(t, b.shot("viewer-token.png")); n < total/200 {
		t.Fatalf("canvas shows almost nothing with the token: %d of %d pixels", n, total)
	}
	kept, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`sessionStorage.getItem('zvfserve-token')`))
	if err != nil || kept != token {
		t.Fatalf("session storage holds %q (%v)", kept, err)
	}

	// A reload in the same tab uses the kept token without asking.
	b.navigate(ts.URL + "/?stores=cells")
	b.settle()
	b.wait(`document.getElementById('tokenform').hidden`)

	mu.Lock()
	defer mu.Unlock()
	if seen["static 200 false"] == 0 {
		t.Errorf("the page did not load without the token: %v", seen)
	}
	if seen["api 401 false"] == 0 || seen["api 200 true"] < 4 {
		t.Errorf("data requests: %v; want 401 without the token, then 200 with it", seen)
	}
	for k, n := range seen {
		if strings.HasPrefix(k, "api 200 false") || strings.HasPrefix(k, "api 401 true") {
			t.Errorf("%d data requests %q", n, k)
		}
	}
	b.noProblems()
}
