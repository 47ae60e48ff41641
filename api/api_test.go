package api_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/go-chi/chi/v5"
	"go.uber.org/goleak"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

func TestMain(m *testing.M) {
	zvftest.CollectLess()
	goleak.VerifyTestMain(m, ignoredGoroutines()...)
}

// ignoredGoroutines are the goroutines that outlive a test on purpose.
func ignoredGoroutines() []goleak.Option {
	return []goleak.Option{goleak.IgnoreTopFunction("github.com/klauspost/compress/zstd.(*blockDec).startDecoder"),
		goleak.IgnoreAnyFunction("github.com/klauspost/compress/zstd.(*Decoder).startStreamDecoder"),
		// Idle keep-alive connections of the S3 SDK's shared HTTP client
		// (TestS3MatchesLocal): pooled, not leaked per request.
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop")}
}

const fixtures = "../testdata/zvf-reference"

var fixtureNames = []string{"points_bins", "points_pyramid", "polylines", "graph", "skeleton", "mesh", "points_bins_blosc"}

func openStores(t testing.TB, names ...string) []*zvf.Store {
	t.Helper()
	return apitest.OpenFixtures(t, fixtures, names...)
}

// newServer serves the stores of o, by default every fixture.
func newServer(t testing.TB, o api.Options) (*api.Server, *httptest.Server) {
	t.Helper()
	if o.Stores == nil && o.Handles == nil {
		o.Stores = openStores(t, fixtureNames...)
	}
	return apitest.Serve(t, o)
}

func loadSpec(t testing.TB) (*openapi3.T, routers.Router) {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(api.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatal(err)
	}
	doc.Servers = nil
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return doc, router
}

// checkSpec validates the answer to GET path (status, headers, body)
// against openapi.yaml, and returns the route the document has for it.
func checkSpec(router routers.Router, path string, resp *http.Response, body []byte) (*routers.Route, error) {
	req, err := http.NewRequest(http.MethodGet, "http://x"+path, nil)
	if err != nil {
		return nil, err
	}
	route, params, err := router.FindRoute(req)
	if err != nil {
		return nil, fmt.Errorf("openapi.yaml has no route for %s: %w", path, err)
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{ExcludeRequestBody: true, MultiError: true}}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode,
		Header: resp.Header, Body: io.NopCloser(bytes.NewReader(body)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}}
	return route, openapi3filter.ValidateResponse(context.Background(), out)
}

// TestEveryRouteDocumented walks the chi routes and checks each is a path
// of openapi.yaml, and that every documented path is routed.
func TestEveryRouteDocumented(t *testing.T) {
	t.Parallel()
	doc, _ := loadSpec(t)
	srv, _ := newServer(t, api.Options{UI: http.NotFoundHandler()})
	routes := api.MountedRouter(srv)
	seen := map[string]bool{}
	err := chi.Walk(routes, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if method != http.MethodGet {
			return nil
		}
		p := strings.TrimSuffix(route, "/")
		if p == "/*" || p == "" {
			p = "/"
		}
		seen[p] = true
		if doc.Paths.Find(p) == nil {
			t.Errorf("route %s %s is not in openapi.yaml", method, route)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for p := range doc.Paths.Map() {
		if !seen[p] {
			t.Errorf("openapi.yaml documents %s, which is not routed", p)
		}
	}
}

// TestResponsesMatchSpec validates real responses (success and error)
// against openapi.yaml.
func TestResponsesMatchSpec(t *testing.T) {
	t.Parallel()
	_, router := loadSpec(t)
	_, ts := newServer(t, api.Options{UI: http.NotFoundHandler()})
	for _, tc := range []struct {
		path   string
		status int
	}{
		{"/api/v1/stores", 200},
		{"/api/v1/stores/points_pyramid", 200},
		{"/api/v1/stores/points_pyramid/bbox?min=0,0,0&max=500,500,500&attributes=*&limit=50", 200},
		{"/api/v1/stores/points_pyramid/bbox?min=0,0,0&max=1000,1000,1000&level=auto&limit=100", 200},
		{"/api/v1/stores/graph/bbox?min=390,223,585&max=480,313,675", 200},
		{"/api/v1/stores/graph/bbox?min=390,223,585&max=480,313,675&edge_attributes=*", 200},
		{"/api/v1/stores/graph", 200},
		{"/api/v1/stores/mesh/bbox?min=150,150,150&max=250,250,250", 200},
		{"/api/v1/stores/points_pyramid/objects/0?attributes=*", 200},
		{"/api/v1/stores/skeleton/objects/1", 200},
		{"/api/v1/stores/points_pyramid/objects/0/manifest?level=1", 200},
		{"/api/v1/stores/points_pyramid/objects/3/levels", 200},
		{"/api/v1/stores/points_pyramid/groups/0", 200},
		{"/api/v1/stores/graph/levels/0/chunks", 200},
		{"/api/v1/stores/graph/levels/0/chunks/3.4.2", 200},
		{"/healthz", 200},
		{"/readyz", 200},
		{"/metrics", 200},
		{"/openapi.yaml", 200},
		{"/api/v1/stores/nope", 404},
		{"/api/v1/stores/points_pyramid/bbox?min=0,0&max=1,1", 400},
		{"/api/v1/stores/points_pyramid/bbox?min=0,0,0&max=1,1,1&level=9", 404},
		{"/api/v1/stores/points_pyramid/objects/999999", 404},
		{"/api/v1/stores/points_pyramid/objects/x", 400},
		// One object, one URL: caches and the export's file name key
		// on it (they were p-object+0-level0 and p-object00-level0).
		{"/api/v1/stores/points_pyramid/objects/+0", 400},
		{"/api/v1/stores/points_pyramid/objects/00", 400},
		{"/api/v1/stores/points_pyramid/objects/-0/manifest", 400},
		{"/api/v1/stores/points_pyramid/objects/03/levels", 400},
		{"/api/v1/stores/points_pyramid/groups/77", 404},
		{"/api/v1/stores/graph/levels/0/chunks/9.9.9", 404},
		{"/api/v1/stores/graph/levels/0/chunks/a.b", 400},
		{"/api/v1/stores/points_pyramid/bbox?min=0,0,0&max=1,1,1&limit=99999999999", 200},
		{"/ng/points_pyramid/annotations/info", 200},
		{"/ng/points_pyramid/annotations/spatial1/0_0_0", 200},
		{"/ng/points_pyramid/annotations/by_id/7", 200},
		{"/ng/polylines/lines/spatial0/1_2_3", 200},
		{"/ng/skeleton/skeletons/1", 200},
		{"/ng/mesh/meshes/1:0", 200},
		{"/ng/mesh/meshes/frag/1", 200},
		{"/ng/mesh/annotations/info", 404},
		{"/ng/points_pyramid/annotations/spatial9/0_0_0", 404},
		{"/ng/points_pyramid/annotations/spatial1/0_x_0", 400},
		{"/ng/skeleton/skeletons/99", 404},
		{"/ng/nope/meshes/info", 404},
	} {
		t.Run(tc.path, func(t *testing.T) {
			resp, body := apitest.Get(t, ts, tc.path)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			if tc.status >= 400 && resp.Header.Get("Content-Type") != "application/problem+json" {
				t.Fatalf("error without problem+json: %s", resp.Header.Get("Content-Type"))
			}
			if _, err := checkSpec(router, tc.path, resp, body); err != nil {
				t.Fatalf("response does not match openapi.yaml: %v\n%.300s", err, body)
			}
		})
	}
}

type jsonPayload struct {
	Vertices   [][]float64      `json:"vertices"`
	ObjectIDs  []int64          `json:"object_ids"`
	Attributes map[string][]any `json:"attributes"`
	Edges      [][2]int64       `json:"edges"`
	Faces      [][]int64        `json:"faces"`
	Count      int64            `json:"count"`
	Next       *string          `json:"next"`
	Extra      map[string]any   `json:"-"`
}

// readerAnswer runs the same bbox through the library.
func readerAnswer(t *testing.T, s *zvf.Store, level int, min, max []float64) ([][]float64, []int64) {
	l, err := s.Level(level)
	if err != nil {
		t.Fatal(err)
	}
	var rows [][]float64
	res, err := l.BBox(context.Background(), zvf.BBoxQuery{Min: min, Max: max, Connectivity: true}, func(b *zvf.Batch) error {
		for i := 0; i < b.Rows; i++ {
			r := make([]float64, 3)
			for k := range r {
				r[k] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b.Vertices.Data[12*i+4*k:])))
			}
			rows = append(rows, r)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return rows, res.Edges
}

// f32 narrows parsed JSON numbers to the stored float32 precision (the
// JSON carries the shortest float32 representation).
func f32(rows [][]float64) [][]float64 {
	for _, r := range rows {
		for i := range r {
			r[i] = float64(float32(r[i]))
		}
	}
	return rows
}

func corner(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}

// TestHTTPEqualsReader: every fixture's bbox answers over HTTP (JSON and
// binary, paged and whole) equal the library's.
func TestHTTPEqualsReader(t *testing.T) {
	t.Parallel()
	stores := openStores(t, fixtureNames...)
	_, ts := newServer(t, api.Options{Stores: stores})
	boxes := [][2][]float64{
		{{0, 0, 0}, {1000, 1000, 1000}},
		{{100, 100, 100}, {400, 450, 500}},
		{{260, 260, 260}, {490, 490, 490}},
	}
	for _, s := range stores {
		for _, lv := range s.Levels() {
			for _, b := range boxes {
				name := fmt.Sprintf("%s/L%d/%v", s.Name(), lv, b)
				t.Run(name, func(t *testing.T) {
					want, wantEdges := readerAnswer(t, s, lv, b[0], b[1])
					base := fmt.Sprintf("/api/v1/stores/%s/bbox?min=%s&max=%s&level=%d", s.Name(), corner(b[0]), corner(b[1]), lv)
					resp, body := apitest.Get(t, ts, base)
					if resp.StatusCode != 200 {
						t.Fatalf("%d %s", resp.StatusCode, body)
					}
					var p jsonPayload
					if err := json.Unmarshal(body, &p); err != nil {
						t.Fatal(err)
					}
					if fmt.Sprint(f32(p.Vertices)) != fmt.Sprint(want) {
						t.Fatalf("JSON: %d vertices, reader %d (or values differ)", len(p.Vertices), len(want))
					}
					if len(p.Edges) != len(wantEdges)/2 {
						t.Fatalf("JSON: %d edges, reader %d", len(p.Edges), len(wantEdges)/2)
					}
					// binary
					_, bin := apitest.Get(t, ts, base+"&f=bin")
					rows := decodeBinaryVertices(t, bin)
					if fmt.Sprint(rows) != fmt.Sprint(want) {
						t.Fatalf("binary: %d vertices, reader %d", len(rows), len(want))
					}
					// paged in threes of the total
					limit := len(want)/3 + 1
					var paged [][]float64
					cur := ""
					for pages := 0; ; pages++ {
						if pages > 10 {
							t.Fatal("paging does not end")
						}
						u := fmt.Sprintf("%s&limit=%d", base, limit)
						if cur != "" {
							u += "&cursor=" + url.QueryEscape(cur)
						}
						_, body := apitest.Get(t, ts, u)
						var p jsonPayload
						if err := json.Unmarshal(body, &p); err != nil {
							t.Fatalf("%v: %s", err, body)
						}
						paged = append(paged, f32(p.Vertices)...)
						if p.Next == nil {
							break
						}
						cur = *p.Next
					}
					if fmt.Sprint(paged) != fmt.Sprint(want) {
						t.Fatalf("paged: %d vertices, reader %d", len(paged), len(want))
					}
				})
			}
		}
	}
}

// decodeBinaryVertices walks docs/binary-format.md's layout.
func decodeBinaryVertices(t *testing.T, b []byte) [][]float64 {
	t.Helper()
	if len(b) < 16 || string(b[:6]) != "ZVFBIN" {
		t.Fatalf("bad magic %q", b[:min(len(b), 8)])
	}
	hl := int(binary.LittleEndian.Uint64(b[8:]))
	var meta struct {
		Dims        int    `json:"dims"`
		VertexDType string `json:"vertex_dtype"`
	}
	if err := json.Unmarshal(b[16:16+hl], &meta); err != nil {
		t.Fatal(err)
	}
	p := 16 + (hl+7)/8*8
	var rows [][]float64
	sawTrailer := false
	for p < len(b) {
		if p%8 != 0 {
			t.Fatalf("block at unaligned offset %d", p)
		}
		kind := binary.LittleEndian.Uint32(b[p:])
		n := int(binary.LittleEndian.Uint64(b[p+8:]))
		payload := b[p+16 : p+16+n]
		if kind == 1 {
			for i := 0; i+12 <= len(payload); i += 12 {
				r := make([]float64, 3)
				for k := range r {
					r[k] = float64(math.Float32frombits(binary.LittleEndian.Uint32(payload[i+4*k:])))
				}
				rows = append(rows, r)
			}
		}
		if kind == 15 {
			sawTrailer = true
		}
		p += 16 + (n+7)/8*8
	}
	if !sawTrailer {
		t.Fatal("no trailer block")
	}
	return rows
}

func TestConditionalAndCompression(t *testing.T) {
	t.Parallel()
	_, ts := newServer(t, api.Options{MaxAge: time.Hour})
	path := "/api/v1/stores/graph/bbox?min=0,0,0&max=500,500,500"
	resp, _ := apitest.Get(t, ts, path)
	etag := resp.Header.Get("ETag")
	if etag == "" || resp.Header.Get("Cache-Control") != "public, max-age=3600" {
		t.Fatalf("ETag %q Cache-Control %q", etag, resp.Header.Get("Cache-Control"))
	}
	resp, body := apitest.Get(t, ts, path, "If-None-Match", etag)
	if resp.StatusCode != http.StatusNotModified || len(body) != 0 {
		t.Fatalf("If-None-Match: %d", resp.StatusCode)
	}
	req, _ := http.NewRequest("GET", ts.URL+path, nil)
	req.Header.Set("Accept-Encoding", "gzip")
	tr := &http.Transport{DisableCompression: true}
	defer tr.CloseIdleConnections()
	r2, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, r2.Body)
	r2.Body.Close()
	if r2.Header.Get("Content-Encoding") != "gzip" || !strings.Contains(r2.Header.Get("Vary"), "Accept-Encoding") {
		t.Fatalf("JSON not gzipped: %q vary %q", r2.Header.Get("Content-Encoding"), r2.Header.Get("Vary"))
	}
	req.URL.RawQuery += "&f=bin"
	r3, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, r3.Body)
	r3.Body.Close()
	if r3.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("binary not gzipped: %q", r3.Header.Get("Content-Encoding"))
	}
}

func TestSecurityDefaults(t *testing.T) {
	t.Parallel()
	_, ts := newServer(t, api.Options{Token: "s3cret", CORSOrigins: []string{"https://viewer.example"}})
	for _, tc := range []struct {
		method, path string
		hdr          []string
		status       int
	}{
		{"GET", "/healthz", nil, 200},
		{"GET", "/api/v1/stores", nil, 401},
		{"GET", "/api/v1/stores", []string{"Authorization", "Bearer wrong"}, 401},
		{"GET", "/api/v1/stores", []string{"Authorization", "Bearer s3cret"}, 200},
		{"POST", "/api/v1/stores", []string{"Authorization", "Bearer s3cret"}, 405},
		{"DELETE", "/api/v1/stores/graph", []string{"Authorization", "Bearer s3cret"}, 405},
		{"GET", "/api/v1/stores/..%2F..%2Fetc", []string{"Authorization", "Bearer s3cret"}, 400},
		{"GET", "/api/v1/stores/graph/levels/0/chunks/..%2F..%2Fzarr.json", []string{"Authorization", "Bearer s3cret"}, 400},
		{"GET", "/api/v1/stores/graph/bbox?min=" + strings.Repeat("1", 5000), []string{"Authorization", "Bearer s3cret"}, 414},
	} {
		req, _ := http.NewRequest(tc.method, ts.URL+tc.path, nil)
		for i := 0; i+1 < len(tc.hdr); i += 2 {
			req.Header.Set(tc.hdr[i], tc.hdr[i+1])
		}
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s %s: %d, want %d (%s)", tc.method, tc.path, resp.StatusCode, tc.status, body)
		}
		if bytes.Contains(body, []byte("testdata")) || bytes.Contains(body, []byte("goroutine")) {
			t.Errorf("%s leaks a path or stack: %s", tc.path, body)
		}
	}
	req, _ := http.NewRequest("OPTIONS", ts.URL+"/api/v1/stores", nil)
	req.Header.Set("Origin", "https://viewer.example")
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != "https://viewer.example" {
		t.Fatalf("preflight: %d %q", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	}
}

func TestNDJSON(t *testing.T) {
	t.Parallel()
	_, ts := newServer(t, api.Options{})
	resp, body := apitest.Get(t, ts, "/api/v1/stores/points_pyramid/bbox?min=0,0,0&max=300,300,300&attributes=*", "Accept", "application/x-ndjson")
	if resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatal(resp.Header.Get("Content-Type"))
	}
	lines := strings.Split(strings.TrimSpace(string(body)), "\n")
	var last struct{ Count int }
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil {
		t.Fatal(err)
	}
	if last.Count != len(lines)-2 || last.Count == 0 {
		t.Fatalf("count %d, %d vertex lines", last.Count, len(lines)-2)
	}
	// The lines openapi.yaml and README describe: the header, a line per
	// vertex with "id" when the header says has_object_ids, the rest.
	var head struct {
		Kind         string `json:"kind"`
		HasObjectIDs *bool  `json:"has_object_ids"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &head); err != nil || head.Kind != "bbox" || head.HasObjectIDs == nil {
		t.Fatalf("header line %q: %v", lines[0], err)
	}
	for _, l := range lines[1 : len(lines)-1] {
		var v struct {
			V  []float64      `json:"v"`
			ID *int64         `json:"id"`
			A  map[string]any `json:"a"`
		}
		if err := json.Unmarshal([]byte(l), &v); err != nil || len(v.V) != 3 || len(v.A) != 3 || (v.ID != nil) != *head.HasObjectIDs {
			t.Fatalf("line %q: %v", l, err)
		}
	}
	// Without attributes a line has no "a".
	_, body = apitest.Get(t, ts, "/api/v1/stores/points_pyramid/bbox?min=0,0,0&max=300,300,300&f=ndjson")
	if l := strings.Split(string(body), "\n")[1]; strings.Contains(l, `"a"`) || !strings.HasPrefix(l, `{"v":[`) {
		t.Fatalf("a vertex line without attributes: %q", l)
	}
}

func TestMetricsCount(t *testing.T) {
	t.Parallel()
	_, ts := newServer(t, api.Options{Cache: cache.New(1 << 20)})
	apitest.Get(t, ts, "/api/v1/stores/graph")
	_, body := apitest.Get(t, ts, "/metrics")
	for _, want := range []string{`zvfserve_http_requests_total{code="200",outcome="complete",route="/api/v1/stores/{store}"}`, "zvfserve_cache_budget_bytes 1.048576e+06"} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
