package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
)

// GeoArrow answers are read back with arrow-go and held against the JSON
// answer of the same request: a row per object in the order the answer
// meets them, each object's points (multipoint, linestring) or
// linestrings (multilinestring) made of the JSON answer's coordinates and
// edges, object_id beside the geometry and the object attributes the JSON
// object answer gives.

// geoAnswer is a GeoArrow stream read back: per row its object id (-1:
// null) and its geometry as parts of points, each point written as
// canonical text (coordText).
type geoAnswer struct {
	ext   string
	ids   []int64
	parts [][][]string
	s     *arrowStream
}

// coordText writes a coordinate tuple canonically: each value as the
// shortest float64 text.
func coordText(v []float64) string {
	b := []byte{'['}
	for i, x := range v {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendFloat(b, x, 'g', -1, 64)
	}
	return string(append(b, ']'))
}

// jsonCoord is a JSON vertex ("[x,y,z]" of a float32 store) as coordText.
// Called per vertex, it calls t.Helper (a stack walk) only on failure.
func jsonCoord(t testing.TB, raw string, bits int) string {
	var vs []json.Number
	if err := json.Unmarshal([]byte(raw), &vs); err != nil {
		t.Helper()
		t.Fatal(err)
	}
	out := make([]float64, len(vs))
	for i, v := range vs {
		f, err := strconv.ParseFloat(string(v), bits)
		if err != nil {
			t.Helper()
			t.Fatal(err)
		}
		out[i] = f
	}
	return coordText(out)
}

func readGeoArrow(t testing.TB, body []byte) *geoAnswer {
	t.Helper()
	s := readArrow(t, body)
	fs := s.schema.Fields()
	if len(fs) < 1 || fs[0].Name != "geometry" {
		t.Fatalf("first column %v, want geometry", fs)
	}
	g := &geoAnswer{s: s}
	g.ext, _ = fs[0].Metadata.GetValue("ARROW:extension:name")
	if m, _ := fs[0].Metadata.GetValue("ARROW:extension:metadata"); m != "{}" {
		t.Fatalf("extension metadata %q", m)
	}
	// Coordinates: FixedSizeList<double>[dims] named for its dimensions.
	coord := fs[0].Type
	depth := map[string]int{"geoarrow.point": 0, "geoarrow.multipoint": 1, "geoarrow.linestring": 1, "geoarrow.multilinestring": 2}[g.ext]
	names := []string{map[string]string{"geoarrow.multipoint": "points", "geoarrow.linestring": "vertices", "geoarrow.multilinestring": "linestrings"}[g.ext], "vertices"}
	for d := 0; d < depth; d++ {
		l, ok := coord.(*arrow.ListType)
		if !ok || l.ElemField().Name != names[d] {
			t.Fatalf("%s: level %d is %s, want a list of %q", g.ext, d, coord, names[d])
		}
		coord = l.Elem()
	}
	fsl, ok := coord.(*arrow.FixedSizeListType)
	if !ok || fsl.Elem().ID() != arrow.FLOAT64 || fsl.ElemField().Name != map[int32]string{2: "xy", 3: "xyz"}[fsl.Len()] {
		t.Fatalf("%s coordinates are %s, want FixedSizeList<double xy|xyz>", g.ext, coord)
	}
	dims := int(fsl.Len())
	idCol := -1
	if len(fs) > 1 && fs[1].Name == "object_id" {
		idCol = 1
		if fs[1].Type.ID() != arrow.INT64 {
			t.Fatalf("object_id is %s", fs[1].Type)
		}
	}
	point := func(a *array.FixedSizeList, i int) string {
		vals := a.ListValues().(*array.Float64).Float64Values()
		o := (a.Offset() + i) * dims
		return coordText(vals[o : o+dims])
	}
	for _, rec := range s.batches {
		geom := rec.Column(0)
		for i := 0; i < int(rec.NumRows()); i++ {
			var parts [][]string
			switch g.ext {
			case "geoarrow.point":
				parts = [][]string{{point(geom.(*array.FixedSizeList), i)}}
			case "geoarrow.multipoint", "geoarrow.linestring":
				l := geom.(*array.List)
				lo, hi := l.ValueOffsets(i)
				var pts []string
				for k := lo; k < hi; k++ {
					pts = append(pts, point(l.ListValues().(*array.FixedSizeList), int(k)))
				}
				parts = [][]string{pts}
			case "geoarrow.multilinestring":
				l := geom.(*array.List)
				lines := l.ListValues().(*array.List)
				lo, hi := l.ValueOffsets(i)
				for p := lo; p < hi; p++ {
					plo, phi := lines.ValueOffsets(int(p))
					var pts []string
					for k := plo; k < phi; k++ {
						pts = append(pts, point(lines.ListValues().(*array.FixedSizeList), int(k)))
					}
					parts = append(parts, pts)
				}
			default:
				t.Fatalf("extension %q", g.ext)
			}
			g.parts = append(g.parts, parts)
			id := int64(-1)
			if idCol >= 0 && !rec.Column(idCol).IsNull(i) {
				id = rec.Column(idCol).(*array.Int64).Value(i)
			}
			g.ids = append(g.ids, id)
		}
	}
	return g
}

// rowsJSON is the part of a JSON vertex answer the GeoArrow checks use.
type rowsJSON struct {
	VertexDType string                       `json:"vertex_dtype"`
	Vertices    []json.RawMessage            `json:"vertices"`
	ObjectIDs   []int64                      `json:"object_ids"`
	Attributes  map[string][]json.RawMessage `json:"attributes"`
	Edges       [][2]int64                   `json:"edges"`
	Count       int64                        `json:"count"`
	Next        *string                      `json:"next"`
	ObjectAttrs map[string]json.RawMessage   `json:"object_attributes"`
}

func (j *rowsJSON) coords(t testing.TB) []string {
	bits := 32
	if j.VertexDType == "float64" {
		bits = 64
	}
	out := make([]string, len(j.Vertices))
	for i, v := range j.Vertices {
		out[i] = jsonCoord(t, string(v), bits)
	}
	return out
}

// checkGeoAgainstJSON holds a GeoArrow answer to the JSON answer of the
// same rows (geom: the store's geometry; objectID ≥ 0 on the object
// route).
func checkGeoAgainstJSON(t *testing.T, what string, g *geoAnswer, j *rowsJSON, geom string, objectID int64) {
	t.Helper()
	xyz := j.coords(t)
	n := len(xyz)
	ids := j.ObjectIDs
	if objectID >= 0 {
		ids = make([]int64, n)
		for i := range ids {
			ids[i] = objectID
		}
	}
	if ids == nil { // a level without objects: a point a row
		if g.ext != "geoarrow.point" || len(g.parts) != n {
			t.Fatalf("%s: %s with %d rows for %d vertices without objects", what, g.ext, len(g.parts), n)
		}
		for i := range n {
			if g.parts[i][0][0] != xyz[i] {
				t.Fatalf("%s: point %d is %s, JSON %s", what, i, g.parts[i][0][0], xyz[i])
			}
		}
		for name, vals := range j.Attributes {
			if got := g.s.column(t, name); !slices.Equal(got, raws(vals)) {
				t.Fatalf("%s: attribute %s differs", what, name)
			}
		}
		return
	}
	// Objects in the order the answer meets them, and their rows.
	var order []int64
	rowsOf := map[int64][]int{}
	for r, id := range ids {
		if _, ok := rowsOf[id]; !ok {
			order = append(order, id)
		}
		rowsOf[id] = append(rowsOf[id], r)
	}
	if !slices.Equal(g.ids, order) {
		t.Fatalf("%s: object_id %v, JSON objects in order %v", what, g.ids, order)
	}
	for row, id := range order {
		got := g.parts[row]
		rows := rowsOf[id]
		switch {
		case g.ext == "geoarrow.multipoint" || g.ext == "geoarrow.linestring":
			var want []string
			for _, r := range rows {
				want = append(want, xyz[r])
			}
			if len(got) != 1 || !slices.Equal(got[0], want) {
				t.Fatalf("%s: object %d: %v, want its %d rows in order", what, id, got, len(want))
			}
		case geom == "streamline" || geom == "polyline" || geom == "line":
			checkRuns(t, fmt.Sprintf("%s object %d", what, id), got, j.Edges, ids, id, xyz)
		default: // segments: the object's edges in order, then its lone rows
			var want [][]string
			touched := map[int64]bool{}
			for _, e := range j.Edges {
				if ids[e[0]] != id {
					continue
				}
				want = append(want, []string{xyz[e[0]], xyz[e[1]]})
				for _, v := range e {
					if ids[v] == id {
						touched[v] = true
					}
				}
			}
			for _, r := range rows {
				if !touched[int64(r)] {
					want = append(want, []string{xyz[r]})
				}
			}
			if !slices.EqualFunc(got, want, slices.Equal) {
				t.Fatalf("%s: object %d has %d linestrings, want %d (its edges, then its lone vertices)", what, id, len(got), len(want))
			}
		}
	}
}

// checkRuns checks the linestrings of one object of a streamline box:
// their consecutive points are exactly the object's edges (each once),
// a row of the object no edge of it touches is a linestring of one point,
// and no other linestring has one point.
func checkRuns(t *testing.T, what string, got [][]string, edges [][2]int64, ids []int64, id int64, xyz []string) {
	t.Helper()
	want := map[[2]string]int{}
	touched := map[int64]bool{}
	for _, e := range edges {
		if ids[e[0]] != id {
			continue
		}
		want[[2]string{xyz[e[0]], xyz[e[1]]}]++
		for _, v := range e {
			if ids[v] == id {
				touched[v] = true
			}
		}
	}
	var lone []string
	for r, o := range ids {
		if o == id && !touched[int64(r)] {
			lone = append(lone, xyz[r])
		}
	}
	var gotLone []string
	for _, part := range got {
		if len(part) == 1 {
			gotLone = append(gotLone, part[0])
		}
		for k := 1; k < len(part); k++ {
			p := [2]string{part[k-1], part[k]}
			if want[p] == 0 {
				t.Fatalf("%s: linestring step %v is no edge of the object (or used twice)", what, p)
			}
			want[p]--
		}
	}
	for p, c := range want {
		if c != 0 {
			t.Fatalf("%s: edge %v in no linestring", what, p)
		}
	}
	slices.Sort(lone)
	slices.Sort(gotLone)
	if !slices.Equal(lone, gotLone) {
		t.Fatalf("%s: one-point linestrings %v, the object's lone vertices %v", what, gotLone, lone)
	}
}

func geoServer(t *testing.T, maxVertices int64) http.Handler {
	t.Helper()
	stores, err := pagingStores()
	if err != nil {
		t.Fatal(err)
	}
	// pagingStores is shared by parallel tests: append to a copy.
	stores = append(slices.Clone(stores), openStores(t, "points_bins")...)
	srv := apitest.New(t, api.Options{Stores: stores, MaxVertices: maxVertices})
	return srv.Handler()
}

// TestGeoArrowMatchesJSON: for the demo points, streamlines and skeletons
// and a point store without objects, at every level, over two boxes (and
// points paged by 257), the GeoArrow answer is the JSON answer grouped by
// object, with the geometry type, coordinates and linestrings the
// contract gives; the object route gives the object's JSON rows.
func TestGeoArrowMatchesJSON(t *testing.T) {
	t.Parallel()
	h := geoServer(t, 1<<40)
	for _, c := range []struct {
		store, geom, ext, objectExt string
	}{
		{"cells", "point_cloud", "geoarrow.multipoint", "geoarrow.multipoint"},
		{"axons", "streamline", "geoarrow.multilinestring", "geoarrow.linestring"},
		{"skeletons", "skeleton", "geoarrow.multilinestring", "geoarrow.multilinestring"},
		{"points_bins", "point_cloud", "geoarrow.point", ""},
	} {
		t.Run(c.store, func(t *testing.T) {
			t.Parallel()
			_, desc := serveOK(t, h, "/api/v1/stores/"+c.store)
			var d struct {
				Levels []struct {
					Level            int `json:"level"`
					ObjectAttributes []struct {
						Name string `json:"name"`
					} `json:"object_attributes"`
				} `json:"levels"`
			}
			if err := json.Unmarshal(desc, &d); err != nil {
				t.Fatal(err)
			}
			for _, lv := range d.Levels {
				for bi, box := range pagingBoxes {
					limits := []string{""}
					if c.geom == "point_cloud" {
						limits = append(limits, "&limit=257")
					}
					for _, limit := range limits {
						path := fmt.Sprintf("/api/v1/stores/%s/bbox?%s&level=%d%s", c.store, box, lv.Level, limit)
						if c.ext == "geoarrow.point" {
							path += "&attributes=*"
						}
						checked := 0
						for cur, page := "", 0; ; page++ {
							u := path
							if cur != "" {
								u += "&cursor=" + url.QueryEscape(cur)
							}
							what := fmt.Sprintf("level %d box %d%s page %d", lv.Level, bi, limit, page)
							_, jb := serveOK(t, h, u+"&f=json")
							var j rowsJSON
							if err := json.Unmarshal(jb, &j); err != nil {
								t.Fatal(err)
							}
							hdr, gb := serveOK(t, h, u+"&f=geoarrow")
							g := readGeoArrow(t, gb)
							if g.ext != c.ext {
								t.Fatalf("%s: %s, want %s", what, g.ext, c.ext)
							}
							checkGeoAgainstJSON(t, what, g, &j, c.geom, -1)
							next := ""
							if j.Next != nil {
								next = *j.Next
							}
							if g.s.last["zvf:next"] != next || hdr.Get("X-Next-Cursor") != next || g.s.last["zvf:count"] != strconv.FormatInt(j.Count, 10) {
								t.Fatalf("%s: closing metadata %v, X-Next-Cursor %q; JSON next %q count %d", what, g.s.last, hdr.Get("X-Next-Cursor"), next, j.Count)
							}
							if c.ext != "geoarrow.point" {
								checkObjectAttributes(t, h, what, c.store, lv.Level, g, len(lv.ObjectAttributes))
							}
							checked += len(g.ids)
							if cur = next; cur == "" {
								break
							}
						}
						if bi == 0 && checked < 3 {
							t.Fatalf("level %d: %d rows: too few to test", lv.Level, checked)
						}
					}
				}
				if c.objectExt == "" {
					continue
				}
				// The object route: the first object of the box.
				_, jb := serveOK(t, h, fmt.Sprintf("/api/v1/stores/%s/bbox?min=-1,-1,-1&max=1001,1001,601&level=%d&f=json&connectivity=false&limit=1", c.store, lv.Level))
				var first rowsJSON
				if err := json.Unmarshal(jb, &first); err != nil || len(first.ObjectIDs) != 1 {
					t.Fatalf("%v %s", err, jb)
				}
				id := first.ObjectIDs[0]
				path := fmt.Sprintf("/api/v1/stores/%s/objects/%d?level=%d", c.store, id, lv.Level)
				_, jb = serveOK(t, h, path+"&f=json")
				var j rowsJSON
				if err := json.Unmarshal(jb, &j); err != nil {
					t.Fatal(err)
				}
				_, gb := serveOK(t, h, path+"&f=geoarrow")
				g := readGeoArrow(t, gb)
				what := fmt.Sprintf("level %d object %d", lv.Level, id)
				if g.ext != c.objectExt || len(g.ids) != 1 || g.ids[0] != id {
					t.Fatalf("%s: %s rows %v", what, g.ext, g.ids)
				}
				checkGeoAgainstJSON(t, what, g, &j, c.geom, id)
				checkObjectAttributes(t, h, what, c.store, lv.Level, g, len(lv.ObjectAttributes))
			}
		})
	}
}

// checkObjectAttributes holds the object attribute columns of a few rows
// (first, middle, last) to the JSON object answer's object_attributes.
func checkObjectAttributes(t *testing.T, h http.Handler, what, store string, level int, g *geoAnswer, n int) {
	t.Helper()
	fs := g.s.schema.Fields()
	if len(fs) != 2+n {
		t.Fatalf("%s: columns %v, want geometry, object_id and %d object attributes", what, fs, n)
	}
	if len(g.ids) == 0 {
		return
	}
	for _, row := range []int{0, len(g.ids) / 2, len(g.ids) - 1} {
		id := g.ids[row]
		if id < 0 {
			continue
		}
		_, jb := serveOK(t, h, fmt.Sprintf("/api/v1/stores/%s/objects/%d?level=%d&f=json", store, id, level))
		var j rowsJSON
		if err := json.Unmarshal(jb, &j); err != nil {
			t.Fatal(err)
		}
		for _, f := range fs[2:] {
			got := g.s.column(t, f.Name)[row]
			want, ok := j.ObjectAttrs[f.Name]
			if !ok {
				want = json.RawMessage("null")
			}
			if got != string(want) {
				t.Fatalf("%s: object %d %s is %s, JSON %s", what, id, f.Name, got, want)
			}
		}
	}
}

// TestArrowRefusals: what the Arrow formats cannot answer is a problem
// before any byte of an answer, never a 200 with less than asked.
func TestArrowRefusals(t *testing.T) {
	t.Parallel()
	h := geoServer(t, 1<<40)
	box := "min=-1,-1,-1&max=1001,1001,601"
	_, first := serveOK(t, h, "/api/v1/stores/axons/bbox?"+box+"&f=json&limit=100")
	var j rowsJSON
	if err := json.Unmarshal(first, &j); err != nil || j.Next == nil {
		t.Fatalf("%v: a first page of 100 vertices has no next", err)
	}
	for _, c := range []struct {
		path, kind, detail string
		status             int
	}{
		{"/api/v1/stores/meshes/bbox?" + box + "&f=geoarrow", "not-acceptable", "mesh", 406},
		{"/api/v1/stores/meshes/objects/1?f=geoarrow", "not-acceptable", "mesh", 406},
		{"/api/v1/stores/axons/bbox?" + box + "&f=geoarrow&limit=100", "too-large", "more than 100 vertices", 413},
		{"/api/v1/stores/axons/bbox?" + box + "&f=geoarrow&limit=100&cursor=" + url.QueryEscape(*j.Next), "bad-parameter", "not paged", 400},
		{"/api/v1/stores/cells/bbox?" + box + "&f=geoarrow&attributes=cell_type", "bad-parameter", "row per object", 400},
		{"/api/v1/stores/cells/bbox?" + box + "&f=json&table=edges", "bad-parameter", "table=", 400},
		{"/api/v1/stores/cells/bbox?" + box + "&f=geoarrow&table=edges", "bad-parameter", "table=", 400},
		{"/api/v1/stores/cells/bbox?" + box + "&f=arrow&table=edges", "bad-parameter", "no edges", 400},
		{"/api/v1/stores/axons/bbox?" + box + "&f=arrow&table=faces", "bad-parameter", "no faces", 400},
		{"/api/v1/stores/meshes/objects/1?f=arrow&table=edges", "bad-parameter", "table=faces", 400},
		{"/api/v1/stores/cells/levels/0/chunks/0.0.0?f=geoarrow", "bad-parameter", "arrow", 400},
		{"/api/v1/stores/cells/levels/0/chunks/0.0.0?f=arrow&table=edges", "bad-parameter", "table", 400},
	} {
		t.Run(c.path, func(t *testing.T) {
			code, hdr, body := serveFull(t, h, c.path)
			var p struct {
				Type   string `json:"type"`
				Detail string `json:"detail"`
			}
			if err := json.Unmarshal(body, &p); err != nil {
				t.Fatalf("%d %q: %v", code, body, err)
			}
			if code != c.status || !strings.HasSuffix(p.Type, "/"+c.kind) || !strings.Contains(p.Detail, c.detail) || hdr.Get("Content-Type") != "application/problem+json" {
				t.Fatalf("%d %s %q (%s), want %d %s containing %q", code, p.Type, p.Detail, hdr.Get("Content-Type"), c.status, c.kind, c.detail)
			}
			for _, k := range []string{"Link", "X-Next-Cursor", "ETag"} {
				if hdr.Get(k) != "" {
					t.Fatalf("a problem with the answer's %s: %q", k, hdr.Get(k))
				}
			}
		})
	}
}

// TestArrowNegotiation: Accept of Arrow's media type gets the vertex
// table (GeoArrow, of the same media type, only by f=), and the stream is
// compressed by Accept-Encoding like the text formats, to the same bytes.
func TestArrowNegotiation(t *testing.T) {
	t.Parallel()
	_, ts := newServer(t, api.Options{})
	path := "/api/v1/stores/points_pyramid/bbox?min=0,0,0&max=1000,1000,1000&attributes=*"
	resp, plain := apitest.Get(t, ts, path+"&f=arrow", "Accept-Encoding", "identity")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != "" {
		t.Fatalf("%d %q", resp.StatusCode, resp.Header.Get("Content-Encoding"))
	}
	resp, byAccept := apitest.Get(t, ts, path, "Accept", "application/vnd.apache.arrow.stream", "Accept-Encoding", "identity")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/vnd.apache.arrow.stream" || string(byAccept) != string(plain) {
		t.Fatalf("Accept: %d %q, %d bytes, f=arrow %d", resp.StatusCode, resp.Header.Get("Content-Type"), len(byAccept), len(plain))
	}
	if readArrow(t, plain).schema.Fields()[0].Name != "position" {
		t.Fatal("Accept did not get the vertex table")
	}
	for _, enc := range []string{"gzip", "zstd"} {
		req, _ := http.NewRequest(http.MethodGet, ts.URL+path+"&f=arrow", nil)
		req.Header.Set("Accept-Encoding", enc)
		// A transport that does not undo the coding.
		r, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		b := readAllClose(t, r)
		if r.Header.Get("Content-Encoding") != enc {
			t.Fatalf("%s: Content-Encoding %q", enc, r.Header.Get("Content-Encoding"))
		}
		if got := decompress(t, enc, b); string(got) != string(plain) {
			t.Fatalf("%s: decoded %d bytes, identity %d", enc, len(got), len(plain))
		}
	}
}

func readAllClose(t *testing.T, r *http.Response) []byte {
	t.Helper()
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func decompress(t *testing.T, enc string, b []byte) []byte {
	t.Helper()
	var rd io.Reader
	switch enc {
	case "gzip":
		z, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		rd = z
	case "zstd":
		z, err := zstd.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer z.Close()
		rd = z
	}
	out, err := io.ReadAll(rd)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestNotAcceptableNamesEachMediaTypeOnce: Arrow and GeoArrow share a
// media type; a 406 lists the route's media types once each.
func TestNotAcceptableNamesEachMediaTypeOnce(t *testing.T) {
	t.Parallel()
	_, ts := newServer(t, api.Options{})
	resp, body := apitest.Get(t, ts, "/api/v1/stores/graph/objects/0", "Accept", "image/png")
	if resp.StatusCode != http.StatusNotAcceptable {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if n := strings.Count(string(body), "application/vnd.apache.arrow.stream"); n != 1 {
		t.Fatalf("Arrow's media type %d times in %s", n, body)
	}
}
