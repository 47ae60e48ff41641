package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/memstore"
	"github.com/zvfserve/zvfserve/zvf/writer"
)

// TestAutoLevelETagFollowsTheAnswer: level=auto chooses from estimates
// that get exact as chunks are read, so one URL can be answered from one
// level cold and another warm. A strong ETag names one body: the two
// answers must not share it, and a client revalidating the first (an
// empty level-1 answer here) must get the second, not a 304.
func TestAutoLevelETagFollowsTheAnswer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ store, box, limit string }{
		// Level 0 holds 47 rows, level 1 none: cold, the estimate of
		// level 0 is over 100 and auto answers level 1.
		{"points_pyramid", "min=100,100,100&max=300,400,300", "100"},
	} {
		t.Run(tc.store, func(t *testing.T) {
			s := apitest.Open(t, filepath.Join(fixtures, tc.store+".zarrvectors"), tc.store, cache.New(64<<20))
			h := apitest.New(t, api.Options{Stores: []*zvf.Store{s}}).Handler()
			auto := "/api/v1/stores/" + tc.store + "/bbox?" + tc.box + "&level=auto&limit=" + tc.limit
			for _, f := range []string{"", "&f=bin"} {
				_, h1, b1 := diffGet(t, h, auto+f)
				// Reading level 0 in the box makes its count exact.
				if code, _, b := diffGet(t, h, "/api/v1/stores/"+tc.store+"/bbox?"+tc.box+"&level=0"+f); code != 200 {
					t.Fatalf("level 0: %d %s", code, b)
				}
				_, h2, b2 := diffGet(t, h, auto+f)
				if bytes.Equal(b1, b2) {
					if h1.Get("ETag") != h2.Get("ETag") {
						t.Errorf("%s: same body, ETags %s and %s", f, h1.Get("ETag"), h2.Get("ETag"))
					}
					continue
				}
				if h1.Get("ETag") == h2.Get("ETag") {
					t.Errorf("%s: one ETag %s for two bodies:\n%.200q\n%.200q", f, h1.Get("ETag"), b1, b2)
				}
				rec := httptest.NewRecorder()
				req := httptest.NewRequest(http.MethodGet, auto+f, nil)
				req.Header.Set("If-None-Match", h1.Get("ETag"))
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK || !bytes.Equal(rec.Body.Bytes(), b2) {
					t.Errorf("%s: revalidating the cold answer: %d %.200q, want 200 and the warm answer", f, rec.Code, rec.Body.Bytes())
				}
			}
		})
	}
}

// TestLimitBeyondInt64IsClamped: openapi.yaml says a limit larger than
// the server's --max-vertices is clamped to it; one too large for int64
// is such a value too, not a bad parameter.
func TestLimitBeyondInt64IsClamped(t *testing.T) {
	t.Parallel()
	s := apitest.Open(t, filepath.Join(fixtures, "points_bins.zarrvectors"), "points_bins", cache.New(64<<20))
	h := apitest.New(t, api.Options{Stores: []*zvf.Store{s}, MaxVertices: 1000}).Handler()
	base := "/api/v1/stores/points_bins/bbox?min=0,0,0&max=600,600,600"
	code, _, want := diffGet(t, h, base+"&limit=1000")
	if code != 200 {
		t.Fatalf("limit=1000: %d %s", code, want)
	}
	for _, lim := range []string{"1001", "9223372036854775807", "9223372036854775808", "99999999999999999999"} {
		code, _, got := diffGet(t, h, base+"&limit="+lim)
		if code != 200 {
			t.Errorf("limit=%s: %d %s", lim, code, got)
			continue
		}
		// The same page as limit=1000 but for its cursor, which names
		// the query's limit as given.
		var a, b struct {
			Vertices json.RawMessage `json:"vertices"`
			Count    int64           `json:"count"`
			Next     *string         `json:"next"`
		}
		if json.Unmarshal(got, &a) != nil || json.Unmarshal(want, &b) != nil || !bytes.Equal(a.Vertices, b.Vertices) || a.Count != 1000 || (a.Next == nil) != (b.Next == nil) {
			t.Errorf("limit=%s: %.200s, want the page of limit=1000", lim, got)
		}
	}
	for _, lim := range []string{"-99999999999999999999", "0", "-1", "1e3"} {
		if code, _, body := diffGet(t, h, base+"&limit="+lim); code != 400 {
			t.Errorf("limit=%s: %d %.200s, want 400", lim, code, body)
		}
	}
}

// TestNextLinkIsServed: a page's Link, and its cursor with the request's
// other parameters, must be requests the same server answers. The Link's
// query was re-encoded (each comma of min, max and an IN list became
// %2C) and the cursor counted against the 4 KiB bound of a query string,
// so a first page the server answered could hand out a next page it
// refuses with 414.
func TestNextLinkIsServed(t *testing.T) {
	t.Parallel()
	s := apitest.Open(t, filepath.Join(fixtures, "polylines.zarrvectors"), "polylines", cache.New(64<<20))
	h := apitest.New(t, api.Options{Stores: []*zvf.Store{s}}).Handler()
	in := func(n int) string {
		ids := make([]string, n)
		for i := range ids {
			ids[i] = strconv.Itoa(i % 200)
		}
		return "object_id IN (" + strings.Join(ids, ",") + ")"
	}
	box := "min=0,0,0&max=1000,1000,1000&limit=100"
	cases := map[string]string{
		// Written as curl sends it: commas and parentheses as they are.
		"raw commas": box + "&filter=" + strings.NewReplacer(" ", "%20").Replace(in(1015)),
	}
	// Encoded as url.Values encodes it (as the Link is), 4,096 bytes
	// or a few less: no room left for a cursor.
	for n := 600; n < 900; n++ {
		v := url.Values{"min": {"0,0,0"}, "max": {"1000,1000,1000"}, "limit": {"100"}, "filter": {in(n)}}
		if e := v.Encode(); len(e) > 4096-8 && len(e) <= 4096 {
			cases["encoded, "+strconv.Itoa(len(e))+" bytes"] = e
		}
	}
	for name, q := range cases {
		if len(q) > 4096 {
			t.Fatalf("%s: a query of %d bytes", name, len(q))
		}
		p := "/api/v1/stores/polylines/bbox?" + q
		code, hdr, body := diffGet(t, h, p)
		if code != 200 {
			t.Fatalf("%s: first page: %d %.300s", name, code, body)
		}
		link, next := hdr.Get("Link"), hdr.Get("X-Next-Cursor")
		if link == "" || next == "" {
			t.Fatalf("%s: first page without a next page (%.200s)", name, body)
		}
		target := strings.TrimSuffix(strings.TrimPrefix(link, "<"), `>; rel="next"`)
		for what, u := range map[string]string{"its Link": target, "its query with the cursor": p + "&cursor=" + next} {
			if code, _, body := diffGet(t, h, u); code != 200 {
				t.Errorf("%s: following %s: %d %.200s", name, what, code, body)
			}
		}
	}
}

// TestNextLinkEscapesWhatAURICannotHold: the Link keeps the query as sent
// but for bytes a URI cannot hold, which a client may still send (a
// filter's '>' typed into curl): escaped, the Link's <…> stays whole and
// leads to the same next page.
func TestNextLinkEscapesWhatAURICannotHold(t *testing.T) {
	t.Parallel()
	s := apitest.Open(t, filepath.Join(fixtures, "polylines.zarrvectors"), "polylines", cache.New(64<<20))
	h := apitest.New(t, api.Options{Stores: []*zvf.Store{s}}).Handler()
	p := "/api/v1/stores/polylines/bbox?min=0,0,0&max=1000,1000,1000&limit=10&filter=object_id>3"
	code, hdr, body := diffGet(t, h, p)
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	link := hdr.Get("Link")
	target, ok := strings.CutSuffix(strings.TrimPrefix(link, "<"), `>; rel="next"`)
	if !ok || strings.ContainsAny(target, `<>" `) || !strings.Contains(target, "filter=object_id%3E3&") {
		t.Fatalf("Link %q", link)
	}
	_, _, want := diffGet(t, h, p+"&cursor="+hdr.Get("X-Next-Cursor"))
	if code, _, got := diffGet(t, h, target); code != 200 || !bytes.Equal(got, want) {
		t.Fatalf("following the Link: %d %.200s", code, got)
	}
}

// TestAttributeNamedTwice: attributes=label,label answered a JSON object
// with the member "label" twice (and two Arrow columns, two CSV columns
// of one name); a name given twice is a mistake to say, as a parameter
// given twice is.
func TestAttributeNamedTwice(t *testing.T) {
	t.Parallel()
	s := apitest.Open(t, filepath.Join(fixtures, "points_bins.zarrvectors"), "points_bins", cache.New(64<<20))
	h := apitest.New(t, api.Options{Stores: []*zvf.Store{s}}).Handler()
	for _, p := range []string{
		"/api/v1/stores/points_bins/bbox?min=0,0,0&max=1000,1000,1000&limit=2&attributes=label,label",
		"/api/v1/stores/points_bins/bbox?min=0,0,0&max=1000,1000,1000&limit=2&attributes=label,color,label&f=csv",
		"/api/v1/stores/points_bins/levels/0/chunks/0.0.0?attributes=intensity,intensity",
	} {
		code, hdr, body := diffGet(t, h, p)
		var pr struct {
			Type, Detail string
		}
		if code != 400 || hdr.Get("Content-Type") != "application/problem+json" || json.Unmarshal(body, &pr) != nil ||
			!strings.HasSuffix(pr.Type, "/bad-parameter") || !strings.Contains(pr.Detail, "twice") {
			t.Errorf("%s: %d %.300s, want a 400 saying the attribute is named twice", p, code, body)
		}
	}
	// Each name once is as before.
	if code, _, body := diffGet(t, h, "/api/v1/stores/points_bins/bbox?min=0,0,0&max=1000,1000,1000&limit=2&attributes=label,color"); code != 200 {
		t.Errorf("label,color: %d %.200s", code, body)
	}
}

// TestUndeclaredChannelsAgreeWithTheRows: the reference layout of a
// polyline, graph or mesh store names no channel_names for a vertex
// attribute, so its channels are only known from a chunk's bytes. The
// descriptor and every answer's attribute_info said 1 ("values per
// vertex") while the rows carried 4: a binary client sizing the attribute
// block by attribute_info reads 4R values as R, Arrow answers 500, a
// filter cannot name a channel, and a JSON page holds 4 times the bytes
// its bound allows.
func TestUndeclaredChannelsAgreeWithTheRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem := memstore.New()
	var w []float32
	for i := range 3 {
		w = append(w, float32(i), 1, 2, 3)
	}
	pl := &writer.Polylines{Positions: []float32{1, 1, 1, 2, 2, 2, 3, 3, 3}, Offsets: []int{0, 3}, Attributes: []writer.Attribute{writer.Float32Attribute("rgba", 4, w)}}
	if _, err := writer.WritePolylines(ctx, mem, "lines", pl, writer.Options{ChunkShape: []float64{10, 10, 10}}); err != nil {
		t.Fatal(err)
	}
	s, err := zvf.Open(ctx, storage.Sub(mem, "lines"), zvf.Options{Name: "lines", Cache: cache.New(1 << 20)})
	if err != nil {
		t.Fatal(err)
	}
	h := apitest.New(t, api.Options{Stores: []*zvf.Store{s}}).Handler()
	var d struct {
		Levels []struct {
			VertexAttributes []diffAttr `json:"vertex_attributes"`
		} `json:"levels"`
	}
	if _, _, b := diffGet(t, h, "/api/v1/stores/lines"); json.Unmarshal(b, &d) != nil || len(d.Levels) != 1 || len(d.Levels[0].VertexAttributes) != 1 || d.Levels[0].VertexAttributes[0].Channels != 4 {
		t.Errorf("descriptor: %+v, want rgba with 4 channels", d.Levels)
	}
	box := "/api/v1/stores/lines/bbox?min=0,0,0&max=9,9,9&attributes=rgba"
	_, _, jb := diffGet(t, h, box)
	var j struct {
		Info  []diffAttr             `json:"attribute_info"`
		Attrs map[string][][]float32 `json:"attributes"`
	}
	if err := json.Unmarshal(jb, &j); err != nil || len(j.Info) != 1 || len(j.Attrs["rgba"]) != 3 || j.Info[0].Channels != len(j.Attrs["rgba"][0]) {
		t.Errorf("JSON: %v %s: attribute_info's channels are not the values a row holds", err, jb)
	}
	_, _, bb := diffGet(t, h, box+"&f=bin")
	a := parseDiffBin(t, bb, 0, nil)
	if a.attrs[0].Channels != 4 || len(a.attrRows[0]) != 3 {
		t.Errorf("binary: attribute_info %+v, %d attribute rows of %d vertices", a.attrs, len(a.attrRows[0]), len(a.verts))
	}
	// Arrow's schema is written from the declared channels: a 500.
	if code, _, b := diffGet(t, h, box+"&f=arrow"); code != 200 {
		t.Errorf("arrow: %d %.200s", code, b)
	}
	// And the channels cannot be filtered on: rgba[1] is unknown, rgba a
	// 422 once a chunk is read.
	if code, _, b := diffGet(t, h, box+"&filter="+url.QueryEscape("rgba[1] > 0")); code != 200 {
		t.Errorf("filter on rgba[1]: %d %.200s", code, b)
	}
}

// TestCornerBeyondTheBoundSaysWhy: docs/security.md says box corners must
// be finite and within ±1e300. A corner of 1e301 was refused as "not a
// finite number", which it is: the problem must name the bound it broke.
func TestCornerBeyondTheBoundSaysWhy(t *testing.T) {
	t.Parallel()
	s := apitest.Open(t, filepath.Join(fixtures, "points_bins.zarrvectors"), "points_bins", cache.New(64<<20))
	h := apitest.New(t, api.Options{Stores: []*zvf.Store{s}}).Handler()
	for _, q := range []string{"min=0,0,0&max=1e301,1,1", "min=-1e301,0,0&max=1,1,1", "min=0,0,0&max=inf,1,1"} {
		code, _, b := diffGet(t, h, "/api/v1/stores/points_bins/bbox?"+q)
		if code != http.StatusBadRequest || !strings.Contains(string(b), "within ±1e300") {
			t.Errorf("%s: %d %s, want 400 naming the bound ±1e300", q, code, b)
		}
	}
	if code, _, b := diffGet(t, h, "/api/v1/stores/points_bins/bbox?min=-1e300,0,0&max=1e300,1,1&limit=1"); code != 200 {
		t.Errorf("corners at ±1e300: %d %s", code, b)
	}
}

// TestDescriptorShardedOnlyWhenTrue: openapi.yaml and docs/formats.md
// say the descriptor's sharded is there when the store's chunks are
// packed into shards and absent when they are not.
func TestDescriptorShardedOnlyWhenTrue(t *testing.T) {
	t.Parallel()
	for store, want := range map[string]string{"points_pyramid": "", "points_pyramid_sharded": "true"} {
		s := apitest.Open(t, filepath.Join(fixtures, store+".zarrvectors"), store, cache.New(64<<20))
		h := apitest.New(t, api.Options{Stores: []*zvf.Store{s}}).Handler()
		code, _, b := diffGet(t, h, "/api/v1/stores/"+store)
		var d map[string]json.RawMessage
		if code != 200 || json.Unmarshal(b, &d) != nil {
			t.Fatalf("%s: %d %s", store, code, b)
		}
		if got := string(d["sharded"]); got != want {
			t.Errorf("%s: sharded %q, want %q", store, got, want)
		}
	}
}

// TestOpenAPIDocumentHasItsLength: openapi.yaml says an answer sent whole
// has a Content-Length. /openapi.yaml, written whole from memory, was sent
// chunked without one, and its HEAD said nothing of its size.
func TestOpenAPIDocumentHasItsLength(t *testing.T) {
	t.Parallel()
	s := apitest.Open(t, filepath.Join(fixtures, "points_bins.zarrvectors"), "points_bins", cache.New(64<<20))
	ts := httptest.NewServer(apitest.New(t, api.Options{Stores: []*zvf.Store{s}}).Handler())
	t.Cleanup(ts.Close)
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		req, _ := http.NewRequest(method, ts.URL+"/openapi.yaml", nil)
		req.Header.Set("Accept-Encoding", "identity") // as curl asks
		res, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 200 || res.ContentLength != int64(len(api.OpenAPI())) || len(res.TransferEncoding) != 0 {
			t.Errorf("%s /openapi.yaml: %d, Content-Length %d (want %d), Transfer-Encoding %v", method, res.StatusCode, res.ContentLength, len(api.OpenAPI()), res.TransferEncoding)
		}
	}
}

// TestChunkTileIsWhole: README and openapi.yaml say a chunk tile is its
// whole chunk whatever --max-vertices is (a bound on pages and objects);
// README's "per response" did not say so.
func TestChunkTileIsWhole(t *testing.T) {
	t.Parallel()
	s := apitest.Open(t, filepath.Join(fixtures, "points_bins.zarrvectors"), "points_bins", cache.New(64<<20))
	h := apitest.New(t, api.Options{Stores: []*zvf.Store{s}, MaxVertices: 2}).Handler()
	code, _, b := diffGet(t, h, "/api/v1/stores/points_bins/levels/0/chunks")
	var list struct{ Chunks []string }
	if code != 200 || json.Unmarshal(b, &list) != nil || len(list.Chunks) == 0 {
		t.Fatalf("chunks: %d %s", code, b)
	}
	most := 0
	for _, k := range list.Chunks {
		code, _, b := diffGet(t, h, "/api/v1/stores/points_bins/levels/0/chunks/"+k)
		var c struct{ Count int }
		if code != 200 || json.Unmarshal(b, &c) != nil {
			t.Fatalf("chunk %s: %d %.300s", k, code, b)
		}
		most = max(most, c.Count)
	}
	if most <= 2 {
		t.Fatalf("no chunk holds more than --max-vertices (%d): the test proves nothing", most)
	}
}

// TestCursorSurvivesRespelling: openapi.yaml says a cursor is valid with
// the same store, box, level, attributes and limit. It was bound to their
// spelling: a cursor of ?min=…&max=… was refused with &level=0 added (the
// default, which zvfserve query names), or with max=300.0 for 300, as
// "not valid for this query". Another level or box is still refused.
func TestCursorSurvivesRespelling(t *testing.T) {
	t.Parallel()
	s := apitest.Open(t, filepath.Join(fixtures, "points_bins.zarrvectors"), "points_bins", cache.New(64<<20))
	h := apitest.New(t, api.Options{Stores: []*zvf.Store{s}}).Handler()
	const base = "/api/v1/stores/points_bins/bbox?"
	first := func(q string) string {
		code, _, b := diffGet(t, h, base+q)
		var a struct{ Next *string }
		if code != 200 || json.Unmarshal(b, &a) != nil || a.Next == nil {
			t.Fatalf("%s: %d %.200s", q, code, b)
		}
		return *a.Next
	}
	const q = "min=0,0,0&max=600,600,600&limit=5"
	c := first(q)
	_, _, want := diffGet(t, h, base+q+"&cursor="+c)
	for _, same := range []string{
		"min=0,0,0&max=600,600,600&limit=5&level=0",
		"min=0.0,0,0&max=600.0,6e2,600&limit=5",
		"min=0,0,0&max=600,600,600&level=0&limit=5",
	} {
		if got := first(same); got != c {
			t.Errorf("%s: cursor %s, want %s (the same query)", same, got, c)
		}
		code, _, b := diffGet(t, h, base+same+"&cursor="+c)
		if code != 200 || !bytes.Equal(b, want) {
			t.Errorf("%s with the cursor of %s: %d %.200s", same, q, code, b)
		}
	}
	for _, other := range []string{"min=0,0,0&max=600,600,601&limit=5", "min=0,0,0&max=600,600,600&limit=6"} {
		if code, _, b := diffGet(t, h, base+other+"&cursor="+c); code != http.StatusBadRequest {
			t.Errorf("%s with the cursor of %s: %d %.200s, want 400", other, q, code, b)
		}
	}
}

// TestCornerGrammar: a box corner is decimal numbers, as openapi.yaml
// says — an optional sign, digits with an optional fraction (or a
// fraction alone), an optional exponent. strconv.ParseFloat also took Go's
// own syntax, so min=0x1p4 was the box from 16 and min=1_0 the box from
// 10, spellings no client of the documented API means and another server
// behind the same URL would refuse. They are refused naming the corner,
// the coordinate and the form wanted.
func TestCornerGrammar(t *testing.T) {
	t.Parallel()
	s := apitest.Open(t, filepath.Join(fixtures, "points_bins.zarrvectors"), "points_bins", cache.New(64<<20))
	h := apitest.New(t, api.Options{Stores: []*zvf.Store{s}}).Handler()
	for _, v := range []string{"0", "-2.5", "%2B3", ".5", "5.", "1e3", "1.5E-2", ".5e%2B1", "%207%20", "00012"} {
		if code, _, b := diffGet(t, h, "/api/v1/stores/points_bins/count?min="+v+",0,0&max=1e6,1e6,1e6"); code != 200 {
			t.Errorf("min[0] = %s: %d %.300s, want 200", v, code, b)
		}
	}
	for _, v := range []string{"0x1p4", "0x10", "1_0", "0b1", "0o7", "Infinity", "%2BInf", "nan", "1e", "e3", "--1", "1.2.3", "1e%2B", "%2B", ".", "1%200"} {
		code, _, b := diffGet(t, h, "/api/v1/stores/points_bins/count?min=0,0,0&max=1,"+v+",1")
		p := problemOf(t, code, b)
		if code != http.StatusBadRequest || !strings.HasSuffix(p.Type, "/bad-parameter") || !strings.Contains(p.Detail, "max[1] = ") ||
			!strings.Contains(p.Detail, "not a decimal number") || !strings.Contains(p.Detail, "1.5e3") {
			t.Errorf("max[1] = %s: %d %s, want 400 naming max[1] and the decimal form", v, code, b)
		}
	}
}
