package web_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/web"
)

// TestViewerHeaders: every answer of the viewer's files (the page, its
// modules and style, a redirect, a file that is not there, HEAD) keeps
// the browser from running anything but the viewer's own scripts, from
// sniffing a type and from framing the page (clickjacking), whatever a
// store's names hold.
func TestViewerHeaders(t *testing.T) {
	t.Parallel()
	ts := demoServer(t, "")
	client := ts.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/", 200},
		{"GET", "/?stores=%3Cscript%3E", 200},
		{"HEAD", "/", 200},
		{"GET", "/index.html", 301},
		{"GET", "/viewer.js", 200},
		{"GET", "/urlstate.js", 200},
		{"GET", "/viewer.css", 200},
		{"GET", "/nosuch.js", 404},
	} {
		req, err := http.NewRequest(tc.method, ts.URL+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		h := resp.Header
		csp := h.Get("Content-Security-Policy")
		if resp.StatusCode != tc.status {
			t.Errorf("%s %s: %d; want %d", tc.method, tc.path, resp.StatusCode, tc.status)
		}
		for _, want := range []string{"default-src 'self'", "script-src 'self'", "object-src 'none'", "base-uri 'none'", "frame-ancestors 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s %s: Content-Security-Policy %q lacks %q", tc.method, tc.path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-") {
			t.Errorf("%s %s: Content-Security-Policy %q allows something unsafe", tc.method, tc.path, csp)
		}
		for k, v := range map[string]string{"X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer"} {
			if h.Get(k) != v {
				t.Errorf("%s %s: %s %q; want %q", tc.method, tc.path, k, h.Get(k), v)
			}
		}
	}
}

// TestViewerFrameAncestors: an operator can let named pages frame the
// viewer (a Jupyter notebook's IFrame); the policy then names them and no
// X-Frame-Options forbids it. A list that would add a directive or a
// header is refused.
func TestViewerFrameAncestors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ancestors, want, xfo string
	}{
		{"", "frame-ancestors 'none'", "DENY"},
		{"  'self'   http://localhost:8888 ", "frame-ancestors 'self' http://localhost:8888", ""},
		{"*", "frame-ancestors *", ""},
	} {
		rec := httptest.NewRecorder()
		web.Handler(web.Options{FrameAncestors: tc.ancestors}).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		csp := rec.Header().Get("Content-Security-Policy")
		if rec.Code != 200 || !strings.HasSuffix(csp, "; "+tc.want) || rec.Header().Get("X-Frame-Options") != tc.xfo {
			t.Errorf("%q: %d, Content-Security-Policy %q, X-Frame-Options %q; want …%q and %q", tc.ancestors, rec.Code, csp, rec.Header().Get("X-Frame-Options"), tc.want, tc.xfo)
		}
	}
	for _, bad := range []string{"'self'; script-src *", "a,b", "a\r\nX-Evil: 1", "é"} {
		if err := web.CheckFrameAncestors(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
		rec := httptest.NewRecorder()
		web.Handler(web.Options{FrameAncestors: bad}).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		if csp := rec.Header().Get("Content-Security-Policy"); !strings.HasSuffix(csp, "frame-ancestors 'none'") {
			t.Errorf("%q: Content-Security-Policy %q", bad, csp)
		}
	}
}
