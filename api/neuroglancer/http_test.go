package neuroglancer_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/api/neuroglancer"
	"github.com/zvfserve/zvfserve/cache"
)

const cellPath = "/ng/points_pyramid/annotations/spatial1/1_1_1"

// TestCORSAndRanges: a cross-origin page can preflight a Range request and
// read Content-Range; a Range request gets exactly its bytes as 206, never
// encoded; gzip and zstd decode to the same bytes; validators give 304;
// HEAD answers the headers alone.
func TestCORSAndRanges(t *testing.T) {
	t.Parallel()
	_, ts := newServer(t, api.Options{Stores: fixtureStores(t)})
	whole := apitest.MustGet(t, ts, cellPath)
	if len(whole) < 100 {
		t.Fatalf("cell of %d bytes", len(whole))
	}
	origin := "http://viewer.example"

	resp, _ := apitest.Do(t, ts, http.MethodOptions, cellPath, "Origin", origin, "Access-Control-Request-Method", "GET", "Access-Control-Request-Headers", "range")
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Origin") != "*" ||
		!strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "Range") {
		t.Fatalf("preflight: %d %v", resp.StatusCode, resp.Header)
	}

	for _, tc := range []struct {
		name     string
		hdr      []string
		status   int
		body     []byte
		encoding string
	}{
		{"plain", []string{"Origin", origin}, 200, whole, ""},
		{"range", []string{"Origin", origin, "Range", "bytes=8-23", "Accept-Encoding", "gzip, zstd"}, 206, whole[8:24], ""},
		{"suffix range", []string{"Range", "bytes=-16"}, 206, whole[len(whole)-16:], ""},
		{"gzip", []string{"Accept-Encoding", "gzip"}, 200, whole, "gzip"},
		{"zstd", []string{"Accept-Encoding", "gzip, deflate, br, zstd"}, 200, whole, "zstd"},
		{"zstd refused", []string{"Accept-Encoding", "zstd;q=0, gzip"}, 200, whole, "gzip"},
		// The API's own negotiation: q-values order the codings, and q=0.0 refuses one.
		{"q-values", []string{"Accept-Encoding", "zstd;q=0.0, gzip;q=0.8"}, 200, whole, "gzip"},
		{"gzip preferred", []string{"Accept-Encoding", "zstd;q=0.2, gzip"}, 200, whole, "gzip"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, ts.URL+cellPath, nil)
			for i := 0; i+1 < len(tc.hdr); i += 2 {
				req.Header.Set(tc.hdr[i], tc.hdr[i+1])
			}
			// The transport must not decode for us: the test reads the coding.
			resp, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || resp.Header.Get("Content-Encoding") != tc.encoding {
				t.Fatalf("%d, Content-Encoding %q: %.200s", resp.StatusCode, resp.Header.Get("Content-Encoding"), raw)
			}
			body := raw
			switch tc.encoding {
			case "gzip":
				zr, err := gzip.NewReader(bytes.NewReader(raw))
				if err != nil {
					t.Fatal(err)
				}
				body, _ = io.ReadAll(zr)
			case "zstd":
				zr, err := zstd.NewReader(nil)
				if err != nil {
					t.Fatal(err)
				}
				body, err = zr.DecodeAll(raw, nil)
				zr.Close()
				if err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(body, tc.body) {
				t.Fatalf("%d bytes, want %d", len(body), len(tc.body))
			}
			if tc.status == 206 && resp.Header.Get("Content-Range") == "" {
				t.Fatal("206 without Content-Range")
			}
			if o := req.Header.Get("Origin"); o != "" && (resp.Header.Get("Access-Control-Allow-Origin") != "*" ||
				!strings.Contains(resp.Header.Get("Access-Control-Expose-Headers"), "Content-Range")) {
				t.Fatalf("CORS headers: %v", resp.Header)
			}
			if !strings.Contains(strings.Join(resp.Header.Values("Vary"), ","), "Accept-Encoding") || resp.Header.Get("ETag") == "" {
				t.Fatalf("caching headers: %v", resp.Header)
			}
		})
	}

	resp, _ = apitest.Get(t, ts, cellPath)
	if r2, b := apitest.Get(t, ts, cellPath, "If-None-Match", resp.Header.Get("ETag")); r2.StatusCode != http.StatusNotModified || len(b) != 0 {
		t.Fatalf("If-None-Match: %d", r2.StatusCode)
	}
	// Each content coding is its own representation, with its own ETag.
	tags := map[string]bool{}
	for _, enc := range []string{"identity", "gzip", "zstd"} {
		r, _ := apitest.Get(t, ts, cellPath, "Accept-Encoding", enc)
		tags[r.Header.Get("ETag")] = true
	}
	if len(tags) != 3 {
		t.Fatalf("ETags of the identity, gzip and zstd answers: %v", tags)
	}
	if r3, b := apitest.Do(t, ts, http.MethodHead, cellPath); r3.StatusCode != http.StatusOK || len(b) != 0 || r3.ContentLength != int64(len(whole)) {
		t.Fatalf("HEAD: %d, %d bytes, Content-Length %d", r3.StatusCode, len(b), r3.ContentLength)
	}
}

// TestProblems: what is not there is a 404 problem (a store of another
// geometry says which sources it has), a malformed cell or id a 400, an
// empty cell inside the grid an empty list.
func TestProblems(t *testing.T) {
	t.Parallel()
	_, ts := newServer(t, api.Options{Stores: fixtureStores(t)})
	wantProblems(t, ts, []problemCase{
		{"/ng/mesh/annotations/info", 404, "/ng/mesh/meshes"},
		{"/ng/points_pyramid/skeletons/info", 404, "/ng/points_pyramid/annotations"},
		{"/ng/points_pyramid/lines/info", 404, "these Neuroglancer sources: /ng/points_pyramid/annotations"},
		{"/ng/graph/meshes/1:0", 404, "/ng/graph/annotations, /ng/graph/lines, /ng/graph/skeletons"},
		{"/ng/nope/annotations/info", 404, `no store "nope"`},
		{"/ng/skeleton/skeletons/3", 404, "no object 3"},
		{"/ng/mesh/meshes/99:0", 404, "no object 99"},
		{"/ng/mesh/meshes/frag/99", 404, "no object 99"},
		{"/ng/points_pyramid/annotations/by_id/20000", 404, "no point annotation 20000"},
		{"/ng/points_pyramid/annotations/spatial2/0_0_0", 404, "spatial0 to spatial1"},
		{"/ng/points_pyramid/annotations/spatial1/4_0_0", 404, "outside the grid"},
		{"/ng/points_pyramid/annotations/spatial1/0_0", 400, "3 cell coordinates"},
		{"/ng/points_pyramid/annotations/spatial1/0_01_0", 400, `"01" is not an integer`},
		{"/ng/points_pyramid/annotations/spatial1/-1_0_0", 404, "outside the grid"},
		{"/ng/skeleton/skeletons/x1", 400, "not a decimal integer"},
	})
	// The graph's grid has cells no chunk is in: an empty list, not 404
	// (which Neuroglancer would log as an error).
	empty := 0
	for i := range 5 {
		body := apitest.MustGet(t, ts, fmt.Sprintf("/ng/graph/annotations/spatial0/%d_0_0", i))
		if bytes.Equal(body, make([]byte, 8)) {
			empty++
		}
	}
	if empty == 0 {
		t.Fatal("no empty cell answered an empty list")
	}
}

// TestLimitsAuthMetricsCache: the API's token, response limit, metrics and
// cache apply to these routes too.
func TestLimitsAuthMetricsCache(t *testing.T) {
	t.Parallel()
	stores := fixtureStores(t)
	ch := cache.New(64 << 20)
	_, ts := newServer(t, api.Options{Stores: stores, Cache: ch, MaxVertices: 100, Token: "s3cret"})
	auth := []string{"Authorization", "Bearer s3cret"}
	if resp, _ := apitest.Get(t, ts, cellPath); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: %d", resp.StatusCode)
	}
	for _, p := range []string{cellPath, "/ng/skeleton/skeletons/1", "/ng/mesh/meshes/frag/1", "/ng/mesh/multilod/1"} {
		resp, body := apitest.Get(t, ts, p, auth...)
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), "more than this server's 100") {
			t.Fatalf("%s over --max-vertices: %d %.200q", p, resp.StatusCode, body)
		}
	}
	small := "/ng/points_pyramid/annotations/spatial0/0_0_0" // a coarse cell of a few points
	resp, first := apitest.Get(t, ts, small, auth...)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Cache-Control"), "private") {
		t.Fatalf("with the token: %d %v", resp.StatusCode, resp.Header)
	}
	before := ch.Stats()
	resp, again := apitest.Get(t, ts, small, auth...)
	after := ch.Stats()
	if resp.StatusCode != http.StatusOK || !bytes.Equal(first, again) || after.Misses != before.Misses || after.Hits <= before.Hits {
		t.Fatalf("a second request for a cell is not served from the cache: misses %d → %d, hits %d → %d", before.Misses, after.Misses, before.Hits, after.Hits)
	}
	_, metrics := apitest.Get(t, ts, "/metrics", auth...)
	want := `zvfserve_http_requests_total{code="200",outcome="complete",route="/ng/{store}/annotations/spatial{level}/{cell}"} 2`
	if !strings.Contains(string(metrics), want) {
		t.Fatalf("metrics lack %s", want)
	}
}

// FuzzRequests: whatever the object id, level or cell a request names, the
// answer is a well-formed one (200, 400, 404), never a failure of the
// server.
func FuzzRequests(f *testing.F) {
	stores := fixtureStores(f)
	var handlers []http.Handler // unsharded, and sharded (shard file names then mean something)
	for _, mode := range []neuroglancer.ShardMode{neuroglancer.ShardAuto, neuroglancer.ShardAlways} {
		srv := apitest.New(f, api.Options{Stores: stores, Cache: cache.New(64 << 20), NGSharded: mode})
		handlers = append(handlers, srv.Handler())
	}
	for _, s := range [][3]string{
		{"points_pyramid", "1", "1_1_1"}, {"polylines", "0", "0_0_0"}, {"graph", "655", "4_7_5"},
		{"mesh", "1", "0_0_0"}, {"skeleton", "18446744073709551615", "99999999999999999999_0_0"},
		{"points_bins", "-1", "0_0_-0"}, {"polylines", "00", "1_2"}, {"graph", "1e3", "0__0"}, {"mesh", "", ""},
		{"points_pyramid", "0", "0-4_0-4_0-4"}, {"graph", "1", "-64-0_0-64_9223372036854775807-0"},
		{"points_pyramid", "0.shard", "0.shard"}, {"graph", "00.shard", "1.shard"}, {"skeleton", ".shard", "ff.shard"},
		{"mesh", "0", "-32-0_0-32_0-32"}, {"skeleton", "3", "0-1_0-1_0-1"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	routes := []string{"annotations/by_id/%[1]s", "lines/by_id/%[1]s", "annotations/spatial%[1]s/%[2]s", "lines/spatial0/%[2]s",
		"skeletons/%[1]s", "meshes/%[1]s:0", "meshes/frag/%[1]s", "annotations/spatial0/%[2]s", "multilod/%[1]s.index", "multilod/%[1]s",
		"density/%[1]s/%[2]s", "density/0/%[2]s", "segments/labels/%[1]s/%[2]s", "segments/labels/0/%[2]s"}
	f.Fuzz(func(t *testing.T, store, id, cell string) {
		for _, r := range routes {
			path := "/ng/" + url.PathEscape(store) + "/" + fmt.Sprintf(r, url.PathEscape(id), url.PathEscape(cell))
			for _, h := range handlers {
				req := httptest.NewRequest(http.MethodGet, "http://x"+path, nil)
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				switch w.Code {
				case 200, 400, 404, 414:
				default:
					t.Fatalf("%s: %d %s", path, w.Code, w.Body.Bytes())
				}
			}
		}
	})
}
