package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/web"
)

// TestIfMatchIsEvaluated: RFC 9110 13.1.1 has a server that sends ETags
// not perform a GET whose If-Match names none of the answer's current
// tags: it answers 412 (a problem, no body of the other version). The
// comparison is strong (a weak tag never matches), "*" matches any current
// representation, and a list matches when one of its tags does. If-Match
// is evaluated before If-None-Match (RFC 9110 13.2.2). Before, every route
// but Neuroglancer's Range reads ignored If-Match and sent the answer of
// whatever version it served.
func TestIfMatchIsEvaluated(t *testing.T) {
	t.Parallel()
	_, ts := newServer(t, api.Options{MaxAge: time.Hour})
	var chunks struct{ Chunks []string }
	if _, body := apitest.Get(t, ts, "/api/v1/stores/graph/levels/0/chunks"); json.Unmarshal(body, &chunks) != nil || len(chunks.Chunks) == 0 {
		t.Fatalf("chunk list: %s", body)
	}
	const other = `"0123456789abcdef01234567"` // a tag of another version
	for _, path := range []string{
		"/api/v1/stores/graph",
		"/api/v1/stores/graph/bbox?min=0,0,0&max=500,500,500&limit=2",
		"/api/v1/stores/graph/count?min=0,0,0&max=500,500,500",
		// streams (875 kB): its 412 is whole, not a cut connection
		"/api/v1/stores/points_pyramid/bbox?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9&f=ndjson",
		"/api/v1/stores/points_pyramid/bbox?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9&f=bin",
		"/api/v1/stores/points_pyramid/bbox?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9&f=arrow",
		"/api/v1/stores/points_pyramid/bbox?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9&f=csv",
		"/api/v1/stores/polylines/bbox?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9&f=geoarrow",
		"/ng/points_pyramid/annotations/info",
		"/api/v1/stores/graph/objects/0",
		"/api/v1/stores/graph/queryables",
		"/api/v1/stores/graph/levels/0/chunks/" + chunks.Chunks[0],
		"/ng/skeleton/skeletons/info",
		"/ng/skeleton/skeletons/0",
	} {
		plain, full := apitest.Get(t, ts, path)
		etag := plain.Header.Get("ETag")
		if plain.StatusCode != http.StatusOK || etag == "" {
			t.Fatalf("%s: %d, ETag %q", path, plain.StatusCode, etag)
		}
		for _, tc := range []struct {
			name    string
			hdr     []string
			matches bool
		}{
			{"its tag", []string{"If-Match", etag}, true},
			{"any", []string{"If-Match", "*"}, true},
			{"a list holding it", []string{"If-Match", other + ", " + etag}, true},
			{"another version's", []string{"If-Match", other}, false},
			{"its tag, weak", []string{"If-Match", "W/" + etag}, false},
			{"another's, with a matching If-None-Match", []string{"If-Match", other, "If-None-Match", etag}, false},
		} {
			resp, body := apitest.Get(t, ts, path, tc.hdr...)
			if tc.matches {
				if resp.StatusCode != http.StatusOK || string(body) != string(full) || resp.Header.Get("ETag") != etag {
					t.Errorf("%s, If-Match %s: %d, %d bytes (want the 200's %d), ETag %q", path, tc.name, resp.StatusCode, len(body), len(full), resp.Header.Get("ETag"))
				}
				continue
			}
			isProblem(t, resp, body, "precondition-failed", http.StatusPreconditionFailed)
			if !strings.Contains(string(body), "If-Match") || resp.Header.Get("Cache-Control") != "no-store" ||
				resp.Header.Get("ETag") != "" || len(resp.Trailer) != 0 || resp.Header.Get("Content-Range") != "" {
				t.Errorf("%s, If-Match %s: Cache-Control %q, ETag %q, trailers %v, Content-Range %q: %s", path, tc.name,
					resp.Header.Get("Cache-Control"), resp.Header.Get("ETag"), resp.Trailer, resp.Header.Get("Content-Range"), body)
			}
		}
		// HEAD: the same status, no body.
		if resp, body := apitest.Do(t, ts, http.MethodHead, path, "If-Match", other); resp.StatusCode != http.StatusPreconditionFailed || len(body) != 0 {
			t.Errorf("HEAD %s, If-Match another's: %d, %d bytes", path, resp.StatusCode, len(body))
		}
	}
	// RFC 9110 13.2.1: a failure found without the precondition (a
	// missing object, chunk or fragment: 404) is answered as it is.
	for _, path := range []string{
		"/api/v1/stores/graph/objects/99999",
		"/api/v1/stores/graph/levels/0/chunks/99.99.99",
		"/ng/skeleton/skeletons/99999",
		"/ng/points_pyramid/annotations/by_id/99999999",
	} {
		_, full := apitest.Get(t, ts, path)
		resp, body := apitest.Get(t, ts, path, "If-Match", other)
		isProblem(t, resp, body, "not-found", http.StatusNotFound)
		if string(body) != string(full) {
			t.Errorf("%s: the 404 with If-Match differs from the one without:\n%s\n%s", path, body, full)
		}
	}
	// A Neuroglancer Range read and If-None-Match: * are refused alike.
	const fragment = "/ng/skeleton/skeletons/0"
	for _, hdr := range [][]string{{"Range", "bytes=0-3"}, {"If-None-Match", "*"}} {
		resp, body := apitest.Get(t, ts, fragment, append(hdr, "If-Match", other)...)
		isProblem(t, resp, body, "precondition-failed", http.StatusPreconditionFailed)
	}
	plain, _ := apitest.Get(t, ts, fragment)
	if resp, body := apitest.Get(t, ts, fragment, "Range", "bytes=0-3", "If-Match", plain.Header.Get("ETag")); resp.StatusCode != http.StatusPartialContent || len(body) != 4 {
		t.Errorf("Range with a matching If-Match: %d, %d bytes", resp.StatusCode, len(body))
	}
	// A browser's preflight must allow the header.
	resp, _ := apitest.Do(t, ts, http.MethodOptions, "/api/v1/stores/graph", "Origin", "https://viewer.example",
		"Access-Control-Request-Method", "GET", "Access-Control-Request-Headers", "if-match")
	if !strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "If-Match") {
		t.Errorf("preflight allows %q", resp.Header.Get("Access-Control-Allow-Headers"))
	}
}

// TestIfMatchWithoutETag: an answer that carries no ETag (the catalog,
// health, metrics, this API's document, the viewer's files) has no
// current representation If-Match could name, so any If-Match but "*"
// is false and the answer a 412 problem (RFC 9110 13.1.1, 13.2.1); "*"
// matches what exists, and a 404 stays a 404. Before, these routes
// ignored If-Match and sent their 200, and the viewer's files answered
// the 412 of http.FileServer: no body, no problem.
func TestIfMatchWithoutETag(t *testing.T) {
	t.Parallel()
	_, ts := newServer(t, api.Options{UI: web.Handler(web.Options{})})
	const other = `"0123456789abcdef01234567"`
	for _, path := range []string{"/api/v1/stores", "/healthz", "/readyz", "/metrics", "/openapi.yaml", "/", "/api.js"} {
		plain, full := apitest.Get(t, ts, path)
		if plain.StatusCode != http.StatusOK || plain.Header.Get("ETag") != "" {
			t.Fatalf("%s: %d, ETag %q (the test wants a 200 without one)", path, plain.StatusCode, plain.Header.Get("ETag"))
		}
		for _, hdr := range [][]string{
			{"If-Match", other},
			{"If-Match", "W/" + other},
			{"If-Match", `""`},
			{"If-Match", other, "If-None-Match", "*"},
			{"If-Match", other, "Range", "bytes=0-3"},
		} {
			resp, body := apitest.Get(t, ts, path, hdr...)
			isProblem(t, resp, body, "precondition-failed", http.StatusPreconditionFailed)
			if !strings.Contains(string(body), "no ETag") || resp.Header.Get("Cache-Control") != "no-store" {
				t.Errorf("%s, %q: Cache-Control %q: %s", path, hdr, resp.Header.Get("Cache-Control"), body)
			}
		}
		if resp, body := apitest.Do(t, ts, http.MethodHead, path, "If-Match", other); resp.StatusCode != http.StatusPreconditionFailed || len(body) != 0 {
			t.Errorf("HEAD %s, If-Match %s: %d, %d bytes", path, other, resp.StatusCode, len(body))
		}
		resp, body := apitest.Get(t, ts, path, "If-Match", "*")
		if resp.StatusCode != http.StatusOK || (path != "/metrics" && string(body) != string(full)) {
			t.Errorf("%s, If-Match *: %d, %d bytes (want the 200's %d)", path, resp.StatusCode, len(body), len(full))
		}
	}
	// What does not exist is answered as it is, whatever If-Match says.
	for _, path := range []string{"/api/v1/stores/nosuchstore", "/nosuchfile.js", "/api/nosuchroute"} {
		_, full := apitest.Get(t, ts, path)
		resp, body := apitest.Get(t, ts, path, "If-Match", other)
		if resp.StatusCode != http.StatusNotFound || string(body) != string(full) {
			t.Errorf("%s, If-Match %s: %d, want the 404 without it:\n%s\n%s", path, other, resp.StatusCode, body, full)
		}
	}
}
