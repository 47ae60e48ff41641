package api_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// answer is a bbox JSON answer (all pages joined) as the tests read it.
type answer struct {
	Vertices      [][]float64      `json:"vertices"`
	ObjectIDs     []int64          `json:"object_ids"`
	Attributes    map[string][]any `json:"attributes"`
	Edges         [][]int64        `json:"edges"`
	Faces         [][]int64        `json:"faces"`
	Count         int64            `json:"count"`
	Next          *string          `json:"next"`
	Offset        int64            `json:"offset"`
	NumberMatched *int64           `json:"number_matched"`
}

// fetchAll pages through a bbox answer by its next cursors and joins the
// pages (edges and faces sorted).
func fetchAll(t *testing.T, srv *api.Server, path string) *answer {
	t.Helper()
	var all answer
	all.Attributes = map[string][]any{}
	cur := ""
	for page := 0; ; page++ {
		p := path
		if cur != "" {
			p += "&cursor=" + url.QueryEscape(cur)
		}
		code, _, body := serve(t, srv.Handler(), p)
		if code != 200 {
			t.Fatalf("%s: %d %s", p, code, body)
		}
		var a answer
		if err := json.Unmarshal(body, &a); err != nil {
			t.Fatal(err)
		}
		if a.Offset != int64(len(all.Vertices)) {
			t.Fatalf("page %d at offset %d after %d rows", page, a.Offset, len(all.Vertices))
		}
		all.Vertices = append(all.Vertices, a.Vertices...)
		all.ObjectIDs = append(all.ObjectIDs, a.ObjectIDs...)
		for k, v := range a.Attributes {
			all.Attributes[k] = append(all.Attributes[k], v...)
		}
		all.Edges = append(all.Edges, a.Edges...)
		all.Faces = append(all.Faces, a.Faces...)
		all.Count += a.Count
		if a.Next == nil {
			all.NumberMatched = a.NumberMatched
			break
		}
		cur = *a.Next
	}
	for _, s := range [][][]int64{all.Edges, all.Faces} {
		slices.SortFunc(s, slices.Compare)
	}
	return &all
}

// keepRows is the unfiltered answer a cut to the rows keep holds, with
// the edges and faces whose every vertex is kept, indexed anew.
func keepRows(a *answer, keep func(i int) bool) *answer {
	out := &answer{Attributes: map[string][]any{}}
	idx := make([]int64, len(a.Vertices))
	for i := range a.Vertices {
		idx[i] = -1
		if !keep(i) {
			continue
		}
		idx[i] = int64(len(out.Vertices))
		out.Vertices = append(out.Vertices, a.Vertices[i])
		if a.ObjectIDs != nil {
			out.ObjectIDs = append(out.ObjectIDs, a.ObjectIDs[i])
		}
		for k, v := range a.Attributes {
			out.Attributes[k] = append(out.Attributes[k], v[i])
		}
	}
	out.Edges, out.Faces = zvftest.Reindex(a.Edges, idx), zvftest.Reindex(a.Faces, idx)
	slices.SortFunc(out.Edges, slices.Compare)
	slices.SortFunc(out.Faces, slices.Compare)
	out.Count = int64(len(out.Vertices))
	return out
}

func sameRows(t *testing.T, what string, got, want *answer) {
	t.Helper()
	if len(got.Vertices) != len(want.Vertices) {
		t.Fatalf("%s: %d rows, want %d", what, len(got.Vertices), len(want.Vertices))
	}
	// Compared value by value, floats by their bits: marshalling both
	// answers back to JSON to compare the bytes cost a quarter of
	// TestFiltersThroughHTTP.
	if !sameJSON(got.Vertices, want.Vertices) || !slices.Equal(got.ObjectIDs, want.ObjectIDs) ||
		!slices.EqualFunc(got.Edges, want.Edges, slices.Equal) || !slices.EqualFunc(got.Faces, want.Faces, slices.Equal) {
		t.Fatalf("%s: rows, ids or connectivity differ", what)
	}
	for k, v := range want.Attributes {
		if len(v) > 0 && !sameJSON(got.Attributes[k], v) {
			t.Fatalf("%s: attribute %s differs", what, k)
		}
	}
}

// sameJSON reports whether a and b, decoded from JSON (or slices of
// such values), are the same values, floats the same bits (-0 is not 0).
func sameJSON[T any](a, b []T) bool {
	return slices.EqualFunc(a, b, func(x, y T) bool { return sameJSONValue(any(x), any(y)) })
}

func sameJSONValue(a, b any) bool {
	switch x := a.(type) {
	case float64:
		y, ok := b.(float64)
		return ok && math.Float64bits(x) == math.Float64bits(y)
	case []float64:
		y, ok := b.([]float64)
		return ok && sameJSON(x, y)
	case []any:
		y, ok := b.([]any)
		return ok && sameJSON(x, y)
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if w, ok := y[k]; !ok || !sameJSONValue(v, w) {
				return false
			}
		}
		return true
	default: // string, bool, nil
		return a == b
	}
}

// jsonF32 is a JSON number as the float32 it spells (the answers print each
// float32 as its shortest decimal).
func jsonF32(v any) float64 { return float64(float32(v.(float64))) }

// TestFiltersThroughHTTP: each filter, in cql2-text and cql2-json, over
// the demo stores' attribute types, object ids and groups, answers the
// unfiltered answer's rows it keeps — the predicate here is written
// independently in Go — with the connections whose every vertex is kept;
// paged by cursors, sampled, counted and binned the same.
func TestFiltersThroughHTTP(t *testing.T) {
	t.Parallel()
	srv := demoServer(t, api.Options{})
	groupOf := func(store string, g int) map[int64]bool {
		code, _, body := serve(t, srv.Handler(), fmt.Sprintf("/api/v1/stores/%s/groups/%d", store, g))
		var v struct {
			IDs []int64 `json:"object_ids"`
		}
		if code != 200 || json.Unmarshal(body, &v) != nil {
			t.Fatalf("group %d of %s: %d %s", g, store, code, body)
		}
		out := map[int64]bool{}
		for _, id := range v.IDs {
			out[id] = true
		}
		return out
	}
	g2, a1 := groupOf("cells", 2), groupOf("axons", 1)
	for _, c := range []struct {
		store, box, text, json string
		keep                   func(a *answer, i int) bool
	}{
		{"cells", "0,0,0&max=600,700,600", "cell_type = 'neuron'", `{"op":"=","args":[{"property":"cell_type"},"neuron"]}`,
			func(a *answer, i int) bool { return a.Attributes["cell_type"][i] == "neuron" }},
		{"cells", "100,0,0&max=900,900,500", "intensity BETWEEN 80 AND 100 AND object_id < 700",
			`{"op":"and","args":[{"op":"between","args":[{"property":"intensity"},80,100]},{"op":"<","args":[{"property":"object_id"},700]}]}`,
			func(a *answer, i int) bool {
				v := jsonF32(a.Attributes["intensity"][i])
				return v >= 80 && v <= 100 && a.ObjectIDs[i] < 700
			}},
		{"cells", "0,0,0&max=1000,1000,600", "group = 2 OR cell_type LIKE 'astro%'",
			`{"op":"or","args":[{"op":"=","args":[{"property":"group"},2]},{"op":"like","args":[{"property":"cell_type"},"astro%"]}]}`,
			func(a *answer, i int) bool {
				return g2[a.ObjectIDs[i]] || strings.HasPrefix(a.Attributes["cell_type"][i].(string), "astro")
			}},
		{"cells", "0,0,0&max=1000,1000,600", `NOT ("intensity" < 95) AND cell_type NOT IN ('microglia','neuron')`,
			`{"op":"and","args":[{"op":"not","args":[{"op":"<","args":[{"property":"intensity"},95]}]},{"op":"not","args":[{"op":"in","args":[{"property":"cell_type"},["microglia","neuron"]]}]}]}`,
			func(a *answer, i int) bool {
				ct := a.Attributes["cell_type"][i]
				return jsonF32(a.Attributes["intensity"][i]) >= 95 && ct != "microglia" && ct != "neuron"
			}},
		{"axons", "0,0,0&max=1000,1000,600", "fa > 0.5 OR object_id IN (3, 5, 8)",
			`{"op":"or","args":[{"op":">","args":[{"property":"fa"},0.5]},{"op":"in","args":[{"property":"object_id"},[3,5,8]]}]}`,
			func(a *answer, i int) bool {
				return jsonF32(a.Attributes["fa"][i]) > 0.5 || slices.Contains([]int64{3, 5, 8}, a.ObjectIDs[i])
			}},
		{"axons", "200,200,0&max=800,800,600", "group <> 1", `{"op":"<>","args":[{"property":"group"},1]}`,
			func(a *answer, i int) bool { return !a1[a.ObjectIDs[i]] }},
		{"skeletons", "0,0,0&max=1000,1000,600", "radius>=1.5", `{"op":">=","args":[{"property":"radius"},1.5]}`,
			func(a *answer, i int) bool { return jsonF32(a.Attributes["radius"][i]) >= 1.5 }},
		{"meshes", "0,0,0&max=1000,1000,600", "radius < 15 AND object_id IS NOT NULL",
			`{"op":"and","args":[{"op":"<","args":[{"property":"radius"},15]},{"op":"not","args":[{"op":"isNull","args":[{"property":"object_id"}]}]}]}`,
			func(a *answer, i int) bool { return jsonF32(a.Attributes["radius"][i]) < 15 }},
	} {
		// A case pages through its store some thirty times: the cases
		// run in parallel on the one server.
		t.Run(c.store+" "+c.text, func(t *testing.T) {
			t.Parallel()
			base := "/api/v1/stores/" + c.store
			box := "min=" + c.box
			all := fetchAll(t, srv, base+"/bbox?"+box+"&attributes=*")
			want := keepRows(all, func(i int) bool { return c.keep(all, i) })
			if len(want.Vertices) == 0 || len(want.Vertices) == len(all.Vertices) {
				t.Fatalf("%s: keeps %d of %d rows; choose a filter that keeps some", c.text, len(want.Vertices), len(all.Vertices))
			}
			for _, enc := range []string{"filter=" + url.QueryEscape(c.text), "filter-lang=cql2-json&filter=" + url.QueryEscape(c.json)} {
				what := c.store + " " + enc
				got := fetchAll(t, srv, base+"/bbox?"+box+"&attributes=*&"+enc)
				sameRows(t, what, got, want)
				if got.NumberMatched == nil || *got.NumberMatched != int64(len(want.Vertices)) {
					t.Fatalf("%s: number_matched %v, want %d", what, got.NumberMatched, len(want.Vertices))
				}
				// Paged by cursors, with a limit that cuts chunks.
				paged := fetchAll(t, srv, base+"/bbox?"+box+"&attributes=*&limit=997&"+enc)
				sameRows(t, what+" paged", paged, want)
				// Sampled after the filter: the kept objects' rows.
				sampled := fetchAll(t, srv, base+"/bbox?"+box+"&attributes=*&sample=0.3&"+enc)
				kept := map[int64]bool{}
				for _, id := range sampled.ObjectIDs {
					kept[id] = true
				}
				sameRows(t, what+" sampled", sampled, keepRows(want, func(i int) bool { return kept[want.ObjectIDs[i]] }))
				if len(kept) == 0 {
					t.Fatalf("%s: the sample kept nothing", what)
				}
				code, _, body := serve(t, srv.Handler(), base+"/count?"+box+"&"+enc)
				var n struct{ Count int64 }
				if code != 200 || json.Unmarshal(body, &n) != nil || n.Count != int64(len(want.Vertices)) {
					t.Fatalf("%s: count %d %s, want %d", what, code, body, len(want.Vertices))
				}
				lo, hi := corners(c.box)
				shape := []int{4, 3, 2}
				code, _, body = serve(t, srv.Handler(), fmt.Sprintf("%s/density?%s&shape=4,3,2&%s", base, box, enc))
				var d struct {
					Shape  []int    `json:"shape"`
					Counts []uint32 `json:"counts"`
				}
				if code != 200 || json.Unmarshal(body, &d) != nil || !slices.Equal(d.Shape, shape) {
					t.Fatalf("%s: density %d %.200s", what, code, body)
				}
				if wd := bin(want.Vertices, lo, hi, shape); !slices.Equal(d.Counts, wd) {
					t.Fatalf("%s: density %v, want %v", what, d.Counts, wd)
				}
			}
		})
	}
}

func corners(box string) (lo, hi []float64) {
	a, b, _ := strings.Cut(box, "&max=")
	parse := func(s string) []float64 {
		var out []float64
		for _, p := range strings.Split(s, ",") {
			var v float64
			fmt.Sscan(p, &v)
			out = append(out, v)
		}
		return out
	}
	return parse(a), parse(b)
}

// bin counts verts (as float32) by the density rule by scanning.
func bin(verts [][]float64, lo, hi []float64, shape []int) []uint32 {
	n := 1
	for _, s := range shape {
		n *= s
	}
	out := make([]uint32, n)
	p := make([]float64, len(shape))
	for _, v := range verts {
		for a := range p {
			p[a] = jsonF32(v[a])
		}
		out[zvftest.DensityCell(p, lo, hi, shape)]++
	}
	return out
}

// TestSampleOneIsTheUnsampledAnswer: sample=1 answers the same bytes as no
// sample, in every format, its cursor included.
func TestSampleOneIsTheUnsampledAnswer(t *testing.T) {
	t.Parallel()
	srv := demoServer(t, api.Options{})
	for _, f := range []string{"json", "ndjson", "bin"} {
		p := "/api/v1/stores/axons/bbox?min=0,0,0&max=500,500,500&attributes=*&limit=3000&f=" + f
		_, _, plain := serve(t, srv.Handler(), p)
		_, _, one := serve(t, srv.Handler(), p+"&sample=1")
		if !bytes.Equal(plain, one) || len(plain) < 1000 {
			t.Fatalf("%s: sample=1 gives %d bytes, no sample %d", f, len(one), len(plain))
		}
	}
}

// TestFilterProblems: a filter or sample that cannot be used is a 400
// whose problem names what is wrong (and where, for syntax), before
// anything is read; a cursor does not carry over to another filter.
func TestFilterProblems(t *testing.T) {
	t.Parallel()
	srv := demoServer(t, api.Options{})
	const b = "/api/v1/stores/cells/"
	const box = "min=0,0,0&max=500,500,500"
	for _, c := range []struct {
		path, kind string
		contains   []string
	}{
		{b + "bbox?" + box + "&filter=" + url.QueryEscape("cell_type = 'neuron' AND (intensity > 3"), "bad-filter",
			[]string{"expected ')'", "position 39", "end of input"}},
		{b + "bbox?" + box + "&filter=" + url.QueryEscape("intensity >> 3"), "bad-filter", []string{"position 11"}},
		{b + "bbox?" + box + "&level=1&filter=" + url.QueryEscape("cell_type = 'neuron'"), "bad-filter", []string{`level 1 has no attribute "cell_type"`}},
		{b + "count?" + box + "&filter=" + url.QueryEscape("volume > 2"), "bad-filter", []string{`level 0 has no attribute "volume"`, "intensity"}},
		{b + "density?" + box + "&shape=2,2,2&filter=" + url.QueryEscape("intensity = 'x'"), "bad-filter", []string{"intensity", "'x'"}},
		{b + "bbox?" + box + "&filter-lang=cql2-json&filter=" + url.QueryEscape(`{"op":"between","args":[{"property":"intensity"},1]}`), "bad-filter",
			[]string{`"between" takes 3 arguments, got 2`}},
		{b + "bbox?" + box + "&filter-lang=cql2-json&filter=" + url.QueryEscape(`{"op":"=",`), "bad-filter", []string{"position"}},
		{b + "bbox?" + box + "&filter=" + url.QueryEscape("group < 2"), "bad-filter", []string{"group", "<"}},
		{b + "bbox?" + box + "&filter-lang=cql3&filter=a", "bad-parameter", []string{"filter-lang", "cql2-text or cql2-json"}},
		{b + "bbox?" + box + "&sample=0", "bad-parameter", []string{"sample", "above 0"}},
		{b + "count?" + box + "&sample=1.5", "bad-parameter", []string{"sample"}},
		{b + "count?" + box + "&sample=NaN", "bad-parameter", []string{"sample"}},
		{b + "density?" + box, "bad-parameter", []string{"shape is required"}},
		{b + "density?" + box + "&shape=2,2", "bad-parameter", []string{"3 numbers"}},
		{b + "density?" + box + "&shape=2,0,2", "bad-parameter", []string{"shape[1]"}},
		{b + "density?" + box + "&shape=200,200,200", "bad-parameter", []string{"2097152"}},
		{b + "density?" + box + "&shape=2,2,2&f=ndjson", "bad-parameter", []string{"json, bin or arrow"}},
		{b + "queryables?level=9", "not-found", []string{"level"}},
	} {
		code, ct, body := serve(t, srv.Handler(), c.path)
		p := problemOf(t, code, body)
		if ct != "application/problem+json" || !strings.HasSuffix(p.Type, "/"+c.kind) {
			t.Errorf("%s: %d %s %s", c.path, code, ct, body)
			continue
		}
		for _, want := range c.contains {
			if !strings.Contains(p.Detail, want) {
				t.Errorf("%s: detail %q lacks %q", c.path, p.Detail, want)
			}
		}
	}
	// A cursor of one filter is refused with another.
	code, _, body := serve(t, srv.Handler(), b+"bbox?"+box+"&limit=10&filter="+url.QueryEscape("intensity > 90"))
	var a answer
	if code != 200 || json.Unmarshal(body, &a) != nil || a.Next == nil {
		t.Fatalf("%d %s", code, body)
	}
	code, _, body = serve(t, srv.Handler(), b+"bbox?"+box+"&limit=10&filter="+url.QueryEscape("intensity > 91")+"&cursor="+url.QueryEscape(*a.Next))
	if p := problemOf(t, code, body); !strings.Contains(p.Detail, "cursor") {
		t.Fatalf("a cursor carried over to another filter: %d %s", code, body)
	}
}

// TestQueryables: the queryables are a JSON Schema served as
// application/schema+json (or JSON to a client that asks), listed in
// the descriptor, with each property's type, labels and levels.
func TestQueryables(t *testing.T) {
	t.Parallel()
	srv := demoServer(t, api.Options{PublicURL: "https://zvf.example"})
	code, _, body := serve(t, srv.Handler(), "/api/v1/stores/cells")
	var d struct {
		Queryables string `json:"queryables"`
	}
	if code != 200 || json.Unmarshal(body, &d) != nil || d.Queryables != "https://zvf.example/api/v1/stores/cells/queryables" {
		t.Fatalf("descriptor: %d %s", code, d.Queryables)
	}
	code, hdr, body := serveFull(t, srv.Handler(), "/api/v1/stores/cells/queryables")
	if code != 200 || hdr.Get("Content-Type") != "application/schema+json" {
		t.Fatalf("%d %s", code, hdr.Get("Content-Type"))
	}
	var q struct {
		Schema     string `json:"$schema"`
		ID         string `json:"$id"`
		Type       string `json:"type"`
		Properties map[string]struct {
			Type    string   `json:"type"`
			Enum    []string `json:"enum"`
			DType   string   `json:"x-zvf-dtype"`
			Levels  []int    `json:"x-zvf-levels"`
			Minimum *float64 `json:"minimum"`
			Maximum *float64 `json:"maximum"`
		} `json:"properties"`
		Additional *bool `json:"additionalProperties"`
	}
	if err := json.Unmarshal(body, &q); err != nil {
		t.Fatal(err)
	}
	if q.Schema != "https://json-schema.org/draft/2020-12/schema" || q.ID != d.Queryables || q.Type != "object" || q.Additional == nil || *q.Additional {
		t.Fatalf("%s", body)
	}
	ct, in, oid, grp := q.Properties["cell_type"], q.Properties["intensity"], q.Properties["object_id"], q.Properties["group"]
	if ct.Type != "string" || !slices.Equal(ct.Enum, []string{"astrocyte", "microglia", "neuron", "oligodendrocyte"}) || ct.DType != "uint8" || !slices.Equal(ct.Levels, []int{0}) {
		t.Errorf("cell_type: %+v", ct)
	}
	if in.Type != "number" || in.DType != "float32" || !slices.Equal(in.Levels, []int{0}) {
		t.Errorf("intensity: %+v", in)
	}
	if oid.Type != "integer" || !slices.Equal(oid.Levels, []int{0, 1, 2}) || oid.Minimum == nil || *oid.Minimum != 0 {
		t.Errorf("object_id: %+v", oid)
	}
	if grp.Type != "integer" || grp.Maximum == nil || *grp.Maximum != 3 {
		t.Errorf("group: %+v", grp)
	}
	if len(q.Properties) != 4 {
		t.Errorf("%d properties: %s", len(q.Properties), body)
	}
	// One level's; and JSON to a client that asks for it.
	code, _, body = serve(t, srv.Handler(), "/api/v1/stores/cells/queryables?level=1")
	if code != 200 || strings.Contains(string(body), "cell_type") || !strings.Contains(string(body), "object_id") {
		t.Fatalf("level 1: %d %s", code, body)
	}
	req, _ := http.NewRequest(http.MethodGet, "/api/v1/stores/cells/queryables", nil)
	req.Header.Set("Accept", "application/json")
	code, hdr, _ = serveRequest(t, srv.Handler(), req)
	if code != 200 || hdr.Get("Content-Type") != "application/json" {
		t.Fatalf("Accept: application/json: %d %s", code, hdr.Get("Content-Type"))
	}
}

// TestNumberMatchedOnTheFirstPage: the first page says how many rows the
// whole answer has when few chunks follow it (filtered or not), whatever
// is cached — equal requests, equal bytes — and not when many follow.
func TestNumberMatchedOnTheFirstPage(t *testing.T) {
	t.Parallel()
	srv := demoServer(t, api.Options{})
	count := func(box, extra string) int64 {
		code, _, body := serve(t, srv.Handler(), "/api/v1/stores/cells/count?"+box+extra)
		var n struct{ Count int64 }
		if code != 200 || json.Unmarshal(body, &n) != nil {
			t.Fatalf("%d %s", code, body)
		}
		return n.Count
	}
	const small = "min=0,0,0&max=400,400,400" // 8 chunks of 250
	filter := "&filter=" + url.QueryEscape("intensity > 95")
	for _, extra := range []string{"", filter, "&sample=0.5"} {
		p := "/api/v1/stores/cells/bbox?" + small + "&limit=100" + extra
		_, _, first := serve(t, srv.Handler(), p)
		n := count(small, extra) // now every chunk is cached
		code, hdr, again := serveFull(t, srv.Handler(), p)
		var a answer
		if code != 200 || json.Unmarshal(again, &a) != nil || a.Next == nil || a.NumberMatched == nil || *a.NumberMatched != n ||
			hdr.Get("X-Number-Matched") != fmt.Sprint(n) || n < 200 {
			t.Fatalf("%s: first page number_matched %v (header %q), want %d", extra, a.NumberMatched, hdr.Get("X-Number-Matched"), n)
		}
		if !bytes.Equal(first, again) {
			t.Fatalf("%s: the first page changed with the cache", extra)
		}
		// The binary trailer and Arrow's closing batch say it too
		// (docs/binary-format.md, docs/arrow.md).
		_, _, bin := serve(t, srv.Handler(), p+"&f=bin")
		var tr struct {
			NumberMatched *int64 `json:"number_matched"`
		}
		if json.Unmarshal(binaryTrailer(t, bin), &tr) != nil || tr.NumberMatched == nil || *tr.NumberMatched != n {
			t.Fatalf("%s: binary first page number_matched %v, want %d", extra, tr.NumberMatched, n)
		}
		_, _, arw := serve(t, srv.Handler(), p+"&f=arrow")
		if got := readArrow(t, arw).last["zvf:number_matched"]; got != fmt.Sprint(n) {
			t.Fatalf("%s: Arrow first page zvf:number_matched %q, want %d", extra, got, n)
		}
		if all := fetchAll(t, srv, "/api/v1/stores/cells/bbox?"+small+"&limit=300"+extra); int64(len(all.Vertices)) != n || *all.NumberMatched != n {
			t.Fatalf("%s: %d rows in all, count %d", extra, len(all.Vertices), n)
		}
	}
	const large = "/api/v1/stores/cells/bbox?min=0,0,0&max=1000,1000,600&limit=100" // 48 chunks
	code, _, body := serve(t, srv.Handler(), large)
	var a answer
	if code != 200 || json.Unmarshal(body, &a) != nil || a.Next == nil || a.NumberMatched != nil {
		t.Fatalf("a first page with many chunks after it: %d %v", code, a.NumberMatched)
	}
}

// TestLevelAutoWithAFilter: level=auto chooses among the levels that have
// every property the filter names, and refuses naming the level when none
// has.
func TestLevelAutoWithAFilter(t *testing.T) {
	t.Parallel()
	srv := demoServer(t, api.Options{})
	const p = "/api/v1/stores/cells/bbox?min=0,0,0&max=1000,1000,600&level=auto&limit=10"
	var a struct{ Level int }
	code, _, body := serve(t, srv.Handler(), p)
	if code != 200 || json.Unmarshal(body, &a) != nil || a.Level == 0 {
		t.Fatalf("no filter: level %d (%d)", a.Level, code)
	}
	code, _, body = serve(t, srv.Handler(), p+"&filter="+url.QueryEscape("cell_type = 'neuron'"))
	if code != 200 || json.Unmarshal(body, &a) != nil || a.Level != 0 {
		t.Fatalf("a level-0 attribute: level %d (%d %s)", a.Level, code, body)
	}
	code, _, body = serve(t, srv.Handler(), p+"&filter="+url.QueryEscape("nope = 1"))
	if pr := problemOf(t, code, body); !strings.Contains(pr.Detail, `level 0 has no attribute "nope"`) {
		t.Fatalf("%s", body)
	}
}

// densityAnswers is the demo server's density answer to path: its counts
// as JSON, and the Content-Type and body of it in format f.
func densityAnswers(t *testing.T, path, f string) ([]uint32, string, []byte) {
	t.Helper()
	h := demoServer(t, api.Options{}).Handler()
	var d struct{ Counts []uint32 }
	code, _, b := serve(t, h, path)
	if code != 200 || json.Unmarshal(b, &d) != nil {
		t.Fatalf("%s: %d %.300s", path, code, b)
	}
	code, ct, b := serve(t, h, path+"&f="+f)
	if code != 200 {
		t.Fatalf("%s as %s: %d %s: %.300s", path, f, code, ct, b)
	}
	return d.Counts, ct, b
}

// TestDensityBinary: the binary density is the container of
// docs/binary-format.md: the header, one counts block of uint32 per cell
// (x fastest, as JSON), the trailer with the total.
func TestDensityBinary(t *testing.T) {
	t.Parallel()
	counts, ct, b := densityAnswers(t, "/api/v1/stores/axons/density?min=0,0,0&max=1000,1000,600&shape=5,4,3", "bin")
	if ct != "application/vnd.zvf.v1+octet-stream" || string(b[:8]) != "ZVFBIN\x00\x01" {
		t.Fatalf("%s %q", ct, b[:8])
	}
	hl := int(binary.LittleEndian.Uint64(b[8:]))
	var h struct {
		Kind  string
		Shape []int
		Min   []float64
	}
	if err := json.Unmarshal(b[16:16+hl], &h); err != nil || h.Kind != "density" || !slices.Equal(h.Shape, []int{5, 4, 3}) {
		t.Fatalf("header %s: %v", b[16:16+hl], err)
	}
	at := 16 + (hl+7)/8*8
	kind, aux, n := binary.LittleEndian.Uint32(b[at:]), binary.LittleEndian.Uint32(b[at+4:]), int(binary.LittleEndian.Uint64(b[at+8:]))
	if kind != 7 || aux != 60 || n != 240 {
		t.Fatalf("block %d aux %d, %d bytes", kind, aux, n)
	}
	var total uint64
	for i := range counts {
		c := binary.LittleEndian.Uint32(b[at+16+4*i:])
		if c != counts[i] {
			t.Fatalf("cell %d: %d, JSON %d", i, c, counts[i])
		}
		total += uint64(c)
	}
	at += 16 + (n+7)/8*8
	if k := binary.LittleEndian.Uint32(b[at:]); k != 15 || !strings.Contains(string(b[at+16:]), fmt.Sprintf(`{"count":%d}`, total)) || total == 0 {
		t.Fatalf("trailer %d %q, total %d", k, b[at+16:], total)
	}
}

// TestDensityArrow: f=arrow carries the JSON answer's cells in its order
// as one uint32 column, and the shape, box, level and total in the
// schema's zvf:density metadata.
func TestDensityArrow(t *testing.T) {
	t.Parallel()
	counts, ct, b := densityAnswers(t, "/api/v1/stores/axons/density?min=0,0,0&max=1000,1000,600&shape=5,4,3&filter=object_id%3C%3E2", "arrow")
	if ct != "application/vnd.apache.arrow.stream" {
		t.Fatalf("%s: %s", ct, b)
	}
	r, err := ipc.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	md := r.Schema().Metadata()
	var h struct {
		Kind  string
		Level int
		Shape []int
		Min   []float64
		Count uint64
	}
	if i := md.FindKey("zvf:density"); i < 0 {
		t.Fatalf("no zvf:density metadata: %v", md)
	} else if err := json.Unmarshal([]byte(md.Values()[i]), &h); err != nil || h.Kind != "density" || !slices.Equal(h.Shape, []int{5, 4, 3}) || !slices.Equal(h.Min, []float64{0, 0, 0}) {
		t.Fatalf("metadata %s: %v", md.Values()[i], err)
	}
	var got []uint32
	var total uint64
	for r.Next() {
		col, ok := r.RecordBatch().Column(0).(*array.Uint32)
		if !ok {
			t.Fatalf("column %T", r.RecordBatch().Column(0))
		}
		got = append(got, col.Uint32Values()...)
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	for _, c := range got {
		total += uint64(c)
	}
	if !slices.Equal(got, counts) || total != h.Count || total == 0 {
		t.Fatalf("arrow cells %v (total %d, metadata %d), JSON %v", got, total, h.Count, counts)
	}
}

// FuzzQuestions: whatever filter, filter language, sample and shape a
// request carries, bbox, count and density answer 200 or a 400 problem
// (bad-filter or bad-parameter), never a failure of the server.
func FuzzQuestions(f *testing.F) {
	srv := apitest.New(f, api.Options{Stores: openStores(f, "points_pyramid", "polylines")})
	for _, s := range [][4]string{
		{"cell_type = 'neuron' AND intensity > 3", "", "", "2,2,2"},
		{`{"op":"in","args":[{"property":"label"},[1,2,3]]}`, "cql2-json", "0.5", "1,1,1"},
		{"object_id BETWEEN 3 AND 1 OR group IS NULL", "cql2-text", "1", "3,0,1"},
		{"NOT (((((", "", "1e-300", "99999999999,1,1"},
		{"\"label\"[0] LIKE '%\\'", "cql2-json", "-0", ""},
		{"intensity = 0.1000000000000000055511151231257827", "", "NaN", "1,1"},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	h := srv.Handler()
	f.Fuzz(func(t *testing.T, filter, lang, sample, shape string) {
		for _, store := range []string{"points_pyramid", "polylines"} {
			for _, route := range []string{"bbox", "count", "density"} {
				q := url.Values{"min": {"0,0,0"}, "max": {"600,600,600"}, "filter": {filter}}
				if lang != "" {
					q.Set("filter-lang", lang)
				}
				if sample != "" {
					q.Set("sample", sample)
				}
				if route == "density" {
					q.Set("shape", shape)
				}
				if route == "bbox" {
					q.Set("limit", "50")
				}
				path := "/api/v1/stores/" + store + "/" + route + "?" + q.Encode()
				code, ct, body := serve(t, h, path)
				switch {
				case code == 200:
				case code == 400 || code == 414:
					var p api.Problem
					if ct != "application/problem+json" || json.Unmarshal(body, &p) != nil || p.Detail == "" {
						t.Fatalf("%s: %d %s %s", path, code, ct, body)
					}
				default:
					t.Fatalf("%s: %d %s", path, code, body)
				}
			}
		}
	})
}

// TestFilteredExportFitsItsFile: a file format that holds one answer whole
// (CSV without a limit) counts the filtered rows against the server's
// limit, not the unfiltered box's (it probed past the limit without the
// filter and refused a small filtered answer with 413).
func TestFilteredExportFitsItsFile(t *testing.T) {
	t.Parallel()
	srv := demoServer(t, api.Options{MaxVertices: 1000})
	const p = "/api/v1/stores/cells/bbox?min=0,0,0&max=1000,1000,600&f=csv&filter="
	code, _, body := serve(t, srv.Handler(), p+url.QueryEscape("object_id < 5"))
	if code != 200 || bytes.Count(body, []byte("\n")) < 10 {
		t.Fatalf("a filtered answer of a few rows: %d %.300s", code, body)
	}
	code, _, body = serve(t, srv.Handler(), p+url.QueryEscape("object_id < 500"))
	if p := problemOf(t, code, body); code != 413 || !strings.Contains(p.Detail, "1000") {
		t.Fatalf("a filtered answer over the limit: %d %s", code, body)
	}
}
