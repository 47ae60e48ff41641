package api_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
)

// do sends one request to h and returns the recorded response.
func do(t *testing.T, h http.Handler, method, path string, hdr ...string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

// TestNegotiation: Accept and Accept-Encoding are read with their
// q-values (q=0 excludes), nothing acceptable is 406, binary is
// compressed like the text formats (it never was before precision=), and
// each content coding has its own ETag. Before, the first
// media type named won whatever its q (application/vnd.zvf…;q=0 was
// answered in binary), gzip;q=0 still got gzip, and identity, gzip and
// zstd shared one strong ETag.
func TestNegotiation(t *testing.T) {
	t.Parallel()
	srv := demoServer(t, api.Options{})
	h := srv.Handler()
	const box = "/api/v1/stores/cells/bbox?min=0,0,0&max=100,100,100"
	for _, tc := range []struct {
		accept, acceptEncoding string
		status                 int
		ctype, encoding        string
	}{
		{"", "", 200, "application/json", ""},
		{"*/*", "", 200, "application/json", ""},
		{"application/vnd.zvf.v1+octet-stream;q=0, application/json", "", 200, "application/json", ""},
		{"application/octet-stream;q=0, application/json", "", 200, "application/json", ""},
		{"application/x-ndjson;q=0.5, application/json;q=0.9", "", 200, "application/json", ""},
		{"application/json;q=0.2, application/x-ndjson", "", 200, "application/x-ndjson", ""},
		{"application/vnd.zvf.v1+octet-stream", "gzip, zstd", 200, "application/vnd.zvf.v1+octet-stream", "zstd"},
		{"application/vnd.zvf.v1+octet-stream", "gzip", 200, "application/vnd.zvf.v1+octet-stream", "gzip"},
		{"application/vnd.zvf.v1+octet-stream", "", 200, "application/vnd.zvf.v1+octet-stream", ""},
		{"application/*", "", 200, "application/json", ""},
		{"application/xml", "", 406, "application/problem+json", ""},
		{"", "gzip;q=0", 200, "application/json", ""},
		{"", "gzip", 200, "application/json", "gzip"},
		{"", "gzip, zstd;q=0.5", 200, "application/json", "gzip"},
		{"", "zstd", 200, "application/json", "zstd"},
		{"", "*", 200, "application/json", "zstd"},
		{"", "*;q=0, gzip", 200, "application/json", "gzip"},
		{"", "identity;q=0, gzip;q=0", 200, "application/json", ""},
		{"", "br", 200, "application/json", ""},
	} {
		resp := do(t, h, http.MethodGet, box, "Accept", tc.accept, "Accept-Encoding", tc.acceptEncoding)
		if resp.StatusCode != tc.status || resp.Header.Get("Content-Type") != tc.ctype || resp.Header.Get("Content-Encoding") != tc.encoding {
			t.Errorf("Accept %q, Accept-Encoding %q: %d %q %q; want %d %q %q", tc.accept, tc.acceptEncoding,
				resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Content-Encoding"), tc.status, tc.ctype, tc.encoding)
		}
	}
	// One URL, three codings: three bodies, three ETags, and a validator of
	// one is not a match for another.
	tags := map[string]string{}
	for _, enc := range []string{"identity", "gzip", "zstd"} {
		resp := do(t, h, http.MethodGet, box, "Accept-Encoding", enc)
		if resp.StatusCode != 200 || resp.Header.Get("ETag") == "" || !strings.Contains(resp.Header.Get("Vary"), "Accept-Encoding") {
			t.Fatalf("%s: %d %v", enc, resp.StatusCode, resp.Header)
		}
		for other, tag := range tags {
			if tag == resp.Header.Get("ETag") {
				t.Fatalf("%s and %s share the ETag %s", enc, other, tag)
			}
		}
		tags[enc] = resp.Header.Get("ETag")
	}
	if resp := do(t, h, http.MethodGet, box, "Accept-Encoding", "identity", "If-None-Match", tags["gzip"]); resp.StatusCode != 200 {
		t.Fatalf("the gzip ETag validated the identity body: %d", resp.StatusCode)
	}
	if resp := do(t, h, http.MethodGet, box, "Accept-Encoding", "gzip", "If-None-Match", tags["gzip"]); resp.StatusCode != 304 {
		t.Fatalf("the gzip ETag did not validate the gzip body: %d", resp.StatusCode)
	}
}

// TestHEAD: every GET route answers HEAD with GET's status and headers and
// no body. Before, API routes answered 405 (while sending Allow: GET, HEAD,
// OPTIONS) and /healthz, /readyz, /metrics and /openapi.yaml 404.
func TestHEAD(t *testing.T) {
	t.Parallel()
	srv := demoServer(t, api.Options{UI: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, "<html></html>")
	})})
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	send := func(method, path string) (*http.Response, []byte) {
		req, _ := http.NewRequest(method, ts.URL+path, nil)
		req.Header.Set("Accept-Encoding", "identity") // Go's client asks GET (only) for gzip
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	for _, path := range []string{
		"/healthz", "/readyz", "/metrics", "/openapi.yaml", "/",
		"/api/v1/stores", "/api/v1/stores/cells",
		"/api/v1/stores/cells/bbox?min=0,0,0&max=100,100,100",
		"/api/v1/stores/cells/bbox?min=0,0,0&max=100,100,100&f=bin",
		"/api/v1/stores/axons/objects/3", "/api/v1/stores/axons/objects/3/manifest",
		"/api/v1/stores/axons/objects/3/levels", "/api/v1/stores/cells/levels/1/chunks",
		"/api/v1/stores/nope", "/api/v1/stores/cells/bbox?min=0,0,0",
	} {
		get, _ := send(http.MethodGet, path)
		head, body := send(http.MethodHead, path)
		if head.StatusCode != get.StatusCode || len(body) != 0 {
			t.Errorf("HEAD %s: %d with %d bytes; GET %d", path, head.StatusCode, len(body), get.StatusCode)
			continue
		}
		for _, k := range []string{"Content-Type", "ETag", "Cache-Control"} {
			if head.Header.Get(k) != get.Header.Get(k) {
				t.Errorf("HEAD %s: %s %q, GET %q", path, k, head.Header.Get(k), get.Header.Get(k))
			}
		}
	}
}

// TestUnknownAPIPathIsAProblem: a mistyped API path is a 404 problem, even
// with the viewer mounted at / (its file server answered plain text).
func TestUnknownAPIPathIsAProblem(t *testing.T) {
	t.Parallel()
	srv := demoServer(t, api.Options{UI: http.NotFoundHandler()})
	for _, p := range []string{"/api/v1/store", "/api/v2/stores", "/api/v1/stores/cells/bboxx"} {
		resp := do(t, srv.Handler(), http.MethodGet, p)
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 404 || resp.Header.Get("Content-Type") != "application/problem+json" || !strings.Contains(string(body), "no such route") {
			t.Errorf("%s: %d %s %s", p, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
	}
}

// TestCompressedAnswersVaryOnEncoding: every answer whose bytes depend on
// Accept-Encoding says so in Vary, those without an ETag too — the
// catalog, and a descriptor sent without its Neuroglancer objects — so
// that a shared cache (a proxy caching by its own rules where the answer
// names none) never hands a zstd body to a client that cannot read it.
// Before, the catalog came zstd- or gzip-encoded with no Vary at all.
func TestCompressedAnswersVaryOnEncoding(t *testing.T) {
	t.Parallel()
	for _, token := range []string{"", "s3cret"} {
		_, ts := newServer(t, api.Options{Token: token})
		for _, path := range []string{"/api/v1/stores", "/api/v1/stores/graph", "/api/v1/stores/graph/queryables"} {
			hdr := []string{"Accept-Encoding", "zstd"}
			if token != "" {
				hdr = append(hdr, "Authorization", "Bearer "+token)
			}
			resp, _ := apitest.Get(t, ts, path, hdr...)
			vary := strings.Join(resp.Header.Values("Vary"), ",")
			if resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != "zstd" {
				t.Fatalf("%s: %d, Content-Encoding %q", path, resp.StatusCode, resp.Header.Get("Content-Encoding"))
			}
			for _, want := range []string{"Accept", "Accept-Encoding"} {
				if !slices.ContainsFunc(strings.Split(vary, ","), func(v string) bool { return strings.TrimSpace(v) == want }) {
					t.Errorf("token %q, %s: Vary %q lacks %s", token, path, vary, want)
				}
			}
			if token != "" && !strings.Contains(vary, "Authorization") {
				t.Errorf("%s: Vary %q lacks Authorization in token mode", path, vary)
			}
		}
	}
}
