package api_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
)

// The rules a shared cache (a CDN, nginx's proxy_cache) needs to store
// zvfserve's answers and hand them to other clients: whatever a response
// depends on is in its Vary, a 304 stands only for a resource that
// exists, errors are problems with every status, and the framing of a
// response says what it is.

// isProblem decodes a problem+json body and checks its kind and status.
func isProblem(t *testing.T, resp *http.Response, body []byte, kind string, status int) {
	t.Helper()
	var p struct {
		Type   string `json:"type"`
		Status int    `json:"status"`
		Detail string `json:"detail"`
	}
	if resp.StatusCode != status || resp.Header.Get("Content-Type") != "application/problem+json" || json.Unmarshal(body, &p) != nil ||
		p.Type != "https://zvfserve.dev/problems/"+kind || p.Status != status {
		t.Fatalf("%s: %d %q %s; want a %d %s problem", resp.Request.URL.Path, resp.StatusCode, resp.Header.Get("Content-Type"), body, status, kind)
	}
}

// vary lists a response's Vary tokens.
func vary(h http.Header) []string {
	var out []string
	for _, v := range h.Values("Vary") {
		for _, t := range strings.Split(v, ",") {
			out = append(out, strings.TrimSpace(t))
		}
	}
	return out
}

// corsPaths are answers of every kind: data, a Neuroglancer source, a
// problem, operations, the catalog.
var corsPaths = []string{
	"/api/v1/stores",
	"/api/v1/stores/graph/bbox?min=0,0,0&max=500,500,500",
	"/ng/graph/skeletons/info",
	"/api/v1/stores/graph/objects/99999",
	"/healthz",
}

// TestCORSAnyOriginOnEveryResponse: with the default origins (*), every
// response allows any origin and exposes the API's headers, whether the
// request named an Origin or not: a cache that stored the answer to curl
// serves it to a browser that can read it. The bodies do not depend on
// Origin.
func TestCORSAnyOriginOnEveryResponse(t *testing.T) {
	t.Parallel()
	_, ts := newServer(t, api.Options{MaxAge: time.Hour})
	for _, path := range corsPaths {
		var bodies [][]byte
		for _, origin := range []string{"", "https://viewer.example"} {
			var hdr []string
			if origin != "" {
				hdr = []string{"Origin", origin}
			}
			resp, body := apitest.Get(t, ts, path, hdr...)
			h := resp.Header
			if h.Get("Access-Control-Allow-Origin") != "*" {
				t.Errorf("%s (Origin %q): Access-Control-Allow-Origin %q", path, origin, h.Get("Access-Control-Allow-Origin"))
			}
			exposed := strings.Split(strings.ReplaceAll(h.Get("Access-Control-Expose-Headers"), " ", ""), ",")
			for _, name := range []string{"X-Number-Matched", "X-Next-Cursor", "X-Vertex-Count", "Link", "ETag", "Content-Range"} {
				if !slices.Contains(exposed, name) {
					t.Errorf("%s (Origin %q): %s is not exposed: %v", path, origin, name, exposed)
				}
			}
			if len(body) == 0 {
				t.Errorf("%s: empty body", path)
			}
			bodies = append(bodies, body)
		}
		if !bytes.Equal(bodies[0], bodies[1]) {
			t.Errorf("%s: the body depends on Origin", path)
		}
	}
	// What each answer is: the catalog, a problem.
	resp, body := apitest.Get(t, ts, "/api/v1/stores")
	var cat struct{ Stores []struct{ Name string } }
	if json.Unmarshal(body, &cat) != nil || len(cat.Stores) != len(fixtureNames) {
		t.Fatalf("catalog: %d %s", resp.StatusCode, body)
	}
	resp, body = apitest.Get(t, ts, "/api/v1/stores/graph/objects/99999")
	isProblem(t, resp, body, "not-found", 404)
}

// TestCORSOriginListVariesOnOrigin: with a list of origins the allowance
// depends on Origin, so every cacheable response says Vary: Origin — for
// a listed origin, another one and none, and on a 304 — and only a listed
// origin is allowed; the body is the same for all.
func TestCORSOriginListVariesOnOrigin(t *testing.T) {
	t.Parallel()
	_, ts := newServer(t, api.Options{MaxAge: time.Hour, CORSOrigins: []string{"https://viewer.example"}})
	for _, path := range corsPaths {
		var bodies [][]byte
		for _, origin := range []string{"https://viewer.example", "https://other.example", ""} {
			var hdr []string
			if origin != "" {
				hdr = []string{"Origin", origin}
			}
			resp, body := apitest.Get(t, ts, path, hdr...)
			h := resp.Header
			if !slices.Contains(vary(h), "Origin") {
				t.Errorf("%s (Origin %q): %d, Cache-Control %q, Vary %v: no Origin", path, origin, resp.StatusCode, h.Get("Cache-Control"), vary(h))
			}
			want := ""
			if origin == "https://viewer.example" {
				want = origin
			}
			if got := h.Get("Access-Control-Allow-Origin"); got != want {
				t.Errorf("%s (Origin %q): Access-Control-Allow-Origin %q, want %q", path, origin, got, want)
			}
			bodies = append(bodies, body)
			if etag := h.Get("ETag"); etag != "" {
				resp, body := apitest.Get(t, ts, path, append(hdr, "If-None-Match", etag)...)
				if resp.StatusCode != http.StatusNotModified || len(body) != 0 || !slices.Contains(vary(resp.Header), "Origin") {
					t.Errorf("%s (Origin %q) revalidated: %d, %d bytes, Vary %v", path, origin, resp.StatusCode, len(body), vary(resp.Header))
				}
			}
		}
		if !bytes.Equal(bodies[0], bodies[1]) || !bytes.Equal(bodies[0], bodies[2]) {
			t.Errorf("%s: the body depends on Origin", path)
		}
	}
}

// TestIfNoneMatchAnyOnlyForWhatExists: If-None-Match: * matches any
// current representation, so it is a 304 for a resource that exists and
// changes nothing for one that does not (a 404 problem, as without it).
// Each path is first asked for plainly: 200 means it exists.
func TestIfNoneMatchAnyOnlyForWhatExists(t *testing.T) {
	t.Parallel()
	_, ts := newServer(t, api.Options{MaxAge: time.Hour})
	var chunks struct{ Chunks []string }
	if _, body := apitest.Get(t, ts, "/api/v1/stores/graph/levels/0/chunks"); json.Unmarshal(body, &chunks) != nil || len(chunks.Chunks) == 0 {
		t.Fatalf("chunk list: %s", body)
	}
	for _, tc := range []struct {
		path   string
		exists bool
	}{
		{"/api/v1/stores/graph", true},
		{"/api/v1/stores/nosuchstore", false},
		{"/api/v1/stores/graph/bbox?min=0,0,0&max=500,500,500", true},
		{"/api/v1/stores/graph/objects/0", true},
		{"/api/v1/stores/graph/objects/99999", false},
		{"/api/v1/stores/graph/objects/0/manifest", true},
		{"/api/v1/stores/graph/objects/99999/manifest", false},
		{"/api/v1/stores/graph/levels/0/chunks/" + chunks.Chunks[0], true},
		{"/api/v1/stores/graph/levels/0/chunks/99.99.99", false},
		{"/ng/skeleton/skeletons/0", true},
		{"/ng/skeleton/skeletons/99999", false},
		{"/ng/mesh/meshes/frag/0", true},
		{"/ng/mesh/meshes/frag/99999", false},
		{"/ng/mesh/meshes/99999:0", false},
		{"/ng/points_pyramid/annotations/by_id/7", true},
		{"/ng/points_pyramid/annotations/by_id/99999999", false},
		{"/ng/points_pyramid/annotations/objects/0", true},
		{"/ng/points_pyramid/annotations/objects/99999", false},
	} {
		plain, full := apitest.Get(t, ts, tc.path)
		if (plain.StatusCode == http.StatusOK) != tc.exists {
			t.Fatalf("%s: %d without If-None-Match; exists: %v", tc.path, plain.StatusCode, tc.exists)
		}
		resp, body := apitest.Get(t, ts, tc.path, "If-None-Match", "*")
		if tc.exists {
			if resp.StatusCode != http.StatusNotModified || len(body) != 0 || resp.Header.Get("ETag") != plain.Header.Get("ETag") ||
				resp.Header.Get("Content-Length") != "" {
				t.Errorf("%s exists: If-None-Match: * got %d, %d bytes, ETag %q (the 200's %q), Content-Length %q",
					tc.path, resp.StatusCode, len(body), resp.Header.Get("ETag"), plain.Header.Get("ETag"), resp.Header.Get("Content-Length"))
			}
			continue
		}
		isProblem(t, resp, body, "not-found", 404)
		if !bytes.Equal(body, full) {
			t.Errorf("%s: the 404 with If-None-Match: * differs from the one without:\n%s\n%s", tc.path, body, full)
		}
	}
}

// TestNeuroglancerRangeErrorsAreProblems: a Range past the end of a
// Neuroglancer answer is a 416 problem document with Content-Range
// naming the size, like every other error; a range inside it is its bytes.
func TestNeuroglancerRangeErrorsAreProblems(t *testing.T) {
	t.Parallel()
	_, ts := newServer(t, api.Options{MaxAge: time.Hour})
	for _, path := range []string{"/ng/skeleton/skeletons/info", "/ng/skeleton/skeletons/0", "/ng/points_pyramid/annotations/spatial0/0_0_0"} {
		_, full := apitest.Get(t, ts, path, "Accept-Encoding", "identity")
		if len(full) < 20 {
			t.Fatalf("%s: %d bytes", path, len(full))
		}
		resp, body := apitest.Get(t, ts, path, "Range", fmt.Sprintf("bytes=%d-", len(full)+10))
		isProblem(t, resp, body, "range-not-satisfiable", http.StatusRequestedRangeNotSatisfiable)
		if got, want := resp.Header.Get("Content-Range"), fmt.Sprintf("bytes */%d", len(full)); got != want {
			t.Errorf("%s: Content-Range %q, want %q", path, got, want)
		}
		if resp.Header.Get("ETag") != "" || resp.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("%s: the 416 has ETag %q, Cache-Control %q", path, resp.Header.Get("ETag"), resp.Header.Get("Cache-Control"))
		}
		resp, body = apitest.Get(t, ts, path, "Range", "bytes=4-11")
		if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(body, full[4:12]) ||
			resp.Header.Get("Content-Range") != fmt.Sprintf("bytes 4-11/%d", len(full)) {
			t.Errorf("%s: bytes=4-11 got %d %q %x; want 206 with %x", path, resp.StatusCode, resp.Header.Get("Content-Range"), body, full[4:12])
		}
	}
}

// TestNoTrailerWithContentLength: an answer held back whole goes out with
// its Content-Length and every header its end decides, and declares no
// trailer (a Trailer header with Content-Length promises what can never
// come); one too large to hold back streams chunked with its trailers.
func TestNoTrailerWithContentLength(t *testing.T) {
	t.Parallel()
	_, ts := newServer(t, api.Options{MaxAge: time.Hour})
	demo := httptest.NewServer(demoServer(t, api.Options{MaxAge: time.Hour}).Handler())
	t.Cleanup(demo.Close)
	type answer struct {
		Count         int64  `json:"count"`
		Next          string `json:"next"`
		NumberMatched *int64 `json:"number_matched"`
	}
	for _, tc := range []struct {
		ts       *httptest.Server
		path     string
		whole    bool // small enough to be held back
		headers  []string
		trailers []string
	}{
		// The last page: numberMatched, no next.
		{ts, "/api/v1/stores/graph/bbox?min=0,0,0&max=500,500,500", true, []string{"X-Vertex-Count", "X-Number-Matched"}, nil},
		// A page with a next one: no numberMatched.
		{ts, "/api/v1/stores/graph/bbox?min=0,0,0&max=500,500,500&limit=5", true, []string{"X-Vertex-Count", "X-Next-Cursor", "Link"}, nil},
		// The demo's cells with their attributes, in the binary format
		// (which writes each chunk's rows as they come): streamed.
		{demo, "/api/v1/stores/cells/bbox?min=0,0,0&max=1000,1000,1000&attributes=*&f=bin", false, nil, []string{"X-Vertex-Count", "X-Number-Matched"}},
	} {
		// Identity: the client would hide a gzip answer's framing.
		resp, body := apitest.Get(t, tc.ts, tc.path, "Accept-Encoding", "identity")
		var a answer
		if strings.HasSuffix(tc.path, "f=bin") && resp.StatusCode == 200 {
			_ = json.Unmarshal(binaryTrailer(t, body), &a)
		} else if resp.StatusCode == 200 {
			_ = json.Unmarshal(body, &a)
		}
		if resp.StatusCode != 200 || a.Count == 0 {
			t.Fatalf("%s: %d, count %d", tc.path, resp.StatusCode, a.Count)
		}
		if tc.whole {
			// (Go's client leaves a Trailer header that came with a
			// Content-Length among the headers.)
			if resp.ContentLength != int64(len(body)) || len(resp.Trailer) != 0 || resp.Header.Get("Trailer") != "" {
				t.Errorf("%s: Content-Length %d for %d bytes, Trailer %q", tc.path, resp.ContentLength, len(body), resp.Header.Values("Trailer"))
			}
		} else if resp.ContentLength != -1 || len(resp.Trailer) == 0 {
			t.Errorf("%s: %d bytes streamed with Content-Length %d, trailers %v", tc.path, len(body), resp.ContentLength, resp.Trailer)
		}
		if got := resp.Header.Get("X-Vertex-Count") + resp.Trailer.Get("X-Vertex-Count"); got != fmt.Sprint(a.Count) {
			t.Errorf("%s: X-Vertex-Count %q, the body counts %d", tc.path, got, a.Count)
		}
		for _, k := range tc.headers {
			if resp.Header.Get(k) == "" {
				t.Errorf("%s: no %s header", tc.path, k)
			}
		}
		for _, k := range tc.trailers {
			if resp.Trailer.Get(k) == "" {
				t.Errorf("%s: no %s trailer (%v)", tc.path, k, resp.Trailer)
			}
		}
		// The last page knows number_matched (a first page may too, when
		// counting the rest is cheap).
		if (a.Next != "") != (resp.Header.Get("X-Next-Cursor") != "") || (a.Next == "" && a.NumberMatched == nil) {
			t.Errorf("%s: next %q, number_matched %v; X-Next-Cursor %q", tc.path, a.Next, a.NumberMatched, resp.Header.Get("X-Next-Cursor"))
		}
	}
}

// binaryTrailer is the JSON of a binary answer's trailer block (kind 15),
// the last of its blocks (docs/binary-format.md).
func binaryTrailer(t *testing.T, b []byte) []byte {
	t.Helper()
	if len(b) < 16 || string(b[:6]) != "ZVFBIN" {
		t.Fatalf("bad magic %q", b[:min(len(b), 8)])
	}
	p := 16 + (int(binary.LittleEndian.Uint64(b[8:]))+7)/8*8
	var last []byte
	for p+16 <= len(b) {
		kind, n := binary.LittleEndian.Uint32(b[p:]), int(binary.LittleEndian.Uint64(b[p+8:]))
		if n > len(b)-p-16 {
			t.Fatalf("block of %d bytes at %d past the end (%d)", n, p, len(b))
		}
		last = nil
		if kind == 15 {
			last = b[p+16 : p+16+n]
		}
		p += 16 + (n+7)/8*8
	}
	if last == nil {
		t.Fatal("the answer does not end with a trailer block")
	}
	return last
}
