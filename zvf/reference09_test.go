package zvf_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
)

// fixtures09 holds the hand-built ZVF 0.9.0 stores (testdata/zvf-0.9/README.md).
const fixtures09 = "../testdata/zvf-0.9"

var stores09 = []string{"points_pyramid_v09", "streamlines_v09", "streamlines_zstd_v09", "graph_v09", "mesh_v09", "mesh_sharded_v09", "skeleton_v09"}

type coords [][]float64

type expected09 struct {
	Geometry         string                   `json:"geometry"`
	ObjectAttributes map[string][]json.Number `json:"object_attributes"`
	Levels           []expectedLevel09        `json:"levels"`
}

type expectedLevel09 struct {
	Level int `json:"level"`
	Meta  struct {
		VertexCount int64 `json:"vertex_count"`
	} `json:"level_metadata"`
	ChunkKeys [][]int64 `json:"chunk_keys"`
	ReadAll   struct {
		VertexCount      int64             `json:"vertex_count"`
		SortedSHA        string            `json:"sha256_sorted_positions_f32le"`
		Positions        coords            `json:"positions_sorted"`
		Attrs            map[string][]any  `json:"vertex_attributes_sorted"`
		AttrsSHA         map[string]string `json:"vertex_attributes_sha256_sorted"`
		EdgesCanon       []coords          `json:"edges_canonical"`
		EdgesCanonSHA    string            `json:"edges_canonical_sha256"`
		EdgesDirectedSHA string            `json:"edges_directed_sha256"`
		FacesSHA         string            `json:"faces_canonical_sha256"`
		EdgeCount        *int              `json:"edge_count"`
		FaceCount        *int              `json:"face_count"`
		Polylines        []struct {
			ObjectID int64   `json:"object_id"`
			Counts   []int64 `json:"fragment_vertex_counts"`
			Count    int64   `json:"vertex_count"`
			SHA      string  `json:"sha256_f32le"`
		} `json:"polylines"`
	} `json:"read_all"`
	BBox []struct {
		BBox struct {
			Min []float64 `json:"min"`
			Max []float64 `json:"max"`
		} `json:"bbox"`
		VertexCount   *int64           `json:"vertex_count"`
		Inside        *int64           `json:"vertices_inside_count"`
		SortedSHA     string           `json:"sha256_sorted_positions_f32le"`
		Sorted        coords           `json:"positions_sorted"`
		Attrs         map[string][]any `json:"vertex_attributes_sorted"`
		EdgesCanon    []coords         `json:"edges_canonical"`
		EdgesDirected []coords         `json:"edges_directed"`
		FacesCanon    []coords         `json:"faces_canonical"`
		EdgeCount     *int             `json:"edge_count"`
		FaceCount     *int             `json:"face_count"`
		IDsInside     []int64          `json:"object_ids_with_a_vertex_inside"`
	} `json:"bbox_queries"`
	Objects []struct {
		ObjectID int64 `json:"object_id"`
		Count    int64 `json:"vertex_count"`
		Manifest []struct {
			Chunk    []int64 `json:"chunk"`
			Fragment int64   `json:"fragment"`
		} `json:"manifest"`
		Counts        []int64     `json:"fragment_vertex_counts"`
		Positions     coords      `json:"positions"`
		SHA           string      `json:"sha256_positions_f32le"`
		SHA2          string      `json:"sha256_f32le"`
		EdgesCanon    []coords    `json:"edges_canonical"`
		EdgesDirected []coords    `json:"edges_directed"`
		FacesCanon    []coords    `json:"faces_canonical"`
		EdgeCount     *int        `json:"edge_count"`
		FaceCount     *int        `json:"face_count"`
		SegmentID     json.Number `json:"segment_id"`
	} `json:"object_queries"`
	Groups []struct {
		GroupID   int64   `json:"group_id"`
		ObjectIDs []int64 `json:"object_ids"`
		Count     int64   `json:"vertex_count"`
	} `json:"group_queries"`
	Links []struct {
		Delta    int `json:"delta"`
		Segments []struct {
			Segment     string   `json:"segment"`
			Nonempty    []string `json:"nonempty_chunks"`
			RecordCount int      `json:"record_count"`
		} `json:"segments"`
		RecordCount int               `json:"record_count"`
		RecordsSHA  string            `json:"records_canonical_sha256"`
		Records     []json.RawMessage `json:"records"`
		Cells       [][2]string       `json:"record_cells"`
	} `json:"links"`
}

func openFixture09(t testing.TB, name string) (*zvf.Store, *expected09) {
	t.Helper()
	ctx := context.Background()
	st, err := blobstore.Open(ctx, filepath.Join(fixtures09, name+".zarrvectors"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	s, err := zvf.Open(ctx, st, zvf.Options{Name: name, Cache: cache.New(256 << 20)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(fixtures09, name+".expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var e expected09
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&e); err != nil {
		t.Fatal(err)
	}
	return s, &e
}

// TestReference09Stores: every answer the ZVF 0.9 fixtures give — chunk
// keys, whole levels, boxes (vertices, attributes, graph edges, mesh faces
// with winding, skeleton and streamline edges), objects (manifest order,
// fragments, connectivity, object attributes), groups and every link
// family record by record — from the zstd and sharded variants too.
func TestReference09Stores(t *testing.T) {
	for _, name := range stores09 {
		t.Run(name, func(t *testing.T) {
			s, e := openFixture09(t, name)
			if got := s.Levels(); len(got) != len(e.Levels) {
				t.Fatalf("levels %v, want %d", got, len(e.Levels))
			}
			if info := s.Info(); info.ZVVersion != "0.9.0" || info.Layout != "chunk_grid_arrays" {
				t.Fatalf("descriptor says zv_version %q layout %q", info.ZVVersion, info.Layout)
			}
			for i := range e.Levels {
				el := &e.Levels[i]
				l, err := s.Level(el.Level)
				if err != nil {
					t.Fatal(err)
				}
				t.Run(fmt.Sprintf("level%d", el.Level), func(t *testing.T) {
					check09Level(t, e, el, l)
				})
			}
		})
	}
}

func check09Level(t *testing.T, e *expected09, el *expectedLevel09, l *zvf.Level) {
	ctx := context.Background()
	keys := l.Keys()
	if len(keys) != len(el.ChunkKeys) {
		t.Fatalf("%d chunk keys, want %d", len(keys), len(el.ChunkKeys))
	}
	for i, k := range el.ChunkKeys {
		if zvf.Key(k).String() != keys[i].String() {
			t.Fatalf("key %d = %s, want %v", i, keys[i], k)
		}
	}
	if l.Info().VertexCount != el.Meta.VertexCount {
		t.Errorf("level vertex_count %d, want %d", l.Info().VertexCount, el.Meta.VertexCount)
	}
	streamline := e.Geometry == "streamline"

	// The whole level.
	t.Run("read_all", func(t *testing.T) {
		all := bbox(t, l, everywhere.min, everywhere.max, []string{"*"}, true)
		ra := &el.ReadAll
		if int64(len(all.rows)) != ra.VertexCount || (ra.SortedSHA != "" && sortedSHA(all.rows) != ra.SortedSHA) {
			t.Fatalf("%d vertices (sorted sha %s), want %d (%s)", len(all.rows), sortedSHA(all.rows), ra.VertexCount, ra.SortedSHA)
		}
		rows, attrs := sortedWithAttrs(all)
		if ra.Positions != nil {
			checkRows(t, "positions", rows, ra.Positions)
		}
		checkAttrs(t, attrs, ra.Attrs)
		for n, want := range ra.AttrsSHA {
			if got := attrSHA(attrs[n], attrDType(l, n)); got != want {
				t.Errorf("attribute %s: sorted values sha %s, want %s", n, got, want)
			}
		}
		switch e.Geometry {
		case "graph":
			got := canonEdges(all.rows, all.edges, false)
			if !equalStrings(got, coordPairs(ra.EdgesCanon, false)) || pySHA(edgeLists(all.rows, all.edges, false)) != ra.EdgesCanonSHA {
				t.Errorf("%d edges differ from the expected %d", len(got), len(ra.EdgesCanon))
			}
		case "skeleton":
			if n := len(all.edges) / 2; n != *ra.EdgeCount || pySHA(edgeLists(all.rows, all.edges, true)) != ra.EdgesDirectedSHA {
				t.Errorf("%d (child, parent) edges, want %d with sha %s", n, *ra.EdgeCount, ra.EdgesDirectedSHA)
			}
		case "mesh":
			if n := len(all.faces) / max(all.fw, 1); n != *ra.FaceCount || all.fw != 3 || pySHA(faceLists(all.rows, all.faces, all.fw)) != ra.FacesSHA {
				t.Errorf("%d faces of width %d, want %d with sha %s", n, all.fw, *ra.FaceCount, ra.FacesSHA)
			}
		}
		for _, p := range ra.Polylines {
			o, err := l.Object(ctx, p.ObjectID, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := f32rows(o.Vertices.Data); o.Count != p.Count || shaRows(got) != p.SHA || fmt.Sprint(o.FragmentCounts) != fmt.Sprint(p.Counts) {
				t.Errorf("polyline %d: %d vertices, fragments %v; want %d, %v", p.ObjectID, o.Count, o.FragmentCounts, p.Count, p.Counts)
			}
		}
	})

	for qi, q := range el.BBox {
		t.Run(fmt.Sprintf("bbox%d%v-%v", qi, q.BBox.Min, q.BBox.Max), func(t *testing.T) {
			got := bbox(t, l, q.BBox.Min, q.BBox.Max, []string{"*"}, true)
			want := q.VertexCount
			if streamline {
				want = q.Inside // the vertex-level answer; vertex_count is the 0.7 reference's chunk-granular one
			}
			if int64(len(got.rows)) != *want || (q.SortedSHA != "" && sortedSHA(got.rows) != q.SortedSHA) {
				t.Fatalf("%d vertices, want %d", len(got.rows), *want)
			}
			rows, attrs := sortedWithAttrs(got)
			checkRows(t, "positions", rows, q.Sorted)
			checkAttrs(t, attrs, q.Attrs)
			switch e.Geometry {
			case "graph":
				if g, w := canonEdges(got.rows, got.edges, false), coordPairs(q.EdgesCanon, false); !equalStrings(g, w) {
					t.Fatalf("%d edges, want %d", len(g), len(w))
				}
			case "skeleton", "streamline":
				if g, w := canonEdges(got.rows, got.edges, true), coordPairs(q.EdgesDirected, true); !equalStrings(g, w) {
					t.Fatalf("%d directed edges, want %d:\n got %v\nwant %v", len(g), len(w), g, w)
				}
			case "mesh":
				if g, w := canonFaces(got.rows, got.faces, got.fw), coordFaces(q.FacesCanon); !equalStrings(g, w) {
					t.Fatalf("%d faces, want %d", len(g), len(w))
				}
			}
			if q.IDsInside != nil {
				ids := slices.Compact(slices.Sorted(slices.Values(got.ids)))
				if fmt.Sprint(ids) != fmt.Sprint(q.IDsInside) {
					t.Fatalf("object ids with a vertex inside %v, want %v", ids, q.IDsInside)
				}
			}
		})
	}

	for _, q := range el.Objects {
		t.Run(fmt.Sprintf("object%d", q.ObjectID), func(t *testing.T) {
			o, err := l.Object(ctx, q.ObjectID, nil)
			if err != nil {
				t.Fatal(err)
			}
			rows := f32rows(o.Vertices.Data)
			sha := q.SHA + q.SHA2
			if int64(len(rows)) != q.Count || shaRows(rows) != sha {
				t.Fatalf("%d vertices in manifest order (sha %s), want %d (%s)", len(rows), shaRows(rows), q.Count, sha)
			}
			for i, p := range q.Positions {
				if rowOf(p) != rows[i] {
					t.Fatalf("vertex %d = %v, want %v", i, rows[i], p)
				}
			}
			if fmt.Sprint(o.FragmentCounts) != fmt.Sprint(q.Counts) {
				t.Fatalf("fragment counts %v, want %v", o.FragmentCounts, q.Counts)
			}
			m, err := l.Manifest(ctx, q.ObjectID)
			if err != nil {
				t.Fatal(err)
			}
			var refs, wantRefs []string
			for _, b := range m.Blocks {
				for _, f := range b.Fragments {
					refs = append(refs, fmt.Sprint(b.Chunk.String(), "/", f.Fragment))
				}
			}
			for _, r := range q.Manifest {
				wantRefs = append(wantRefs, fmt.Sprint(zvf.Key(r.Chunk).String(), "/", r.Fragment))
			}
			if !equalStrings(refs, wantRefs) {
				t.Fatalf("manifest %v, want %v", refs, wantRefs)
			}
			switch e.Geometry {
			case "graph":
				if g, w := canonEdges(rows, o.Edges, false), coordPairs(q.EdgesCanon, false); !equalStrings(g, w) {
					t.Fatalf("%d edges, want %d", len(g), len(w))
				}
			case "skeleton":
				if g, w := canonEdges(rows, o.Edges, true), coordPairs(q.EdgesDirected, true); !equalStrings(g, w) {
					t.Fatalf("%d (child, parent) edges, want %d", len(g), len(w))
				}
			case "mesh":
				if g, w := canonFaces(rows, o.Faces, o.FaceWidth), coordFaces(q.FacesCanon); !equalStrings(g, w) {
					t.Fatalf("%d faces, want %d", len(g), len(w))
				}
			}
			if q.SegmentID != "" {
				checkObjectAttr(t, o, "segment_id", q.SegmentID)
			}
		})
	}
	if el.Level == 0 {
		t.Run("object_attributes", func(t *testing.T) {
			for name, vals := range e.ObjectAttributes {
				for id, v := range vals {
					o, err := l.Object(ctx, int64(id), nil)
					if err != nil {
						t.Fatal(err)
					}
					checkObjectAttr(t, o, name, v)
				}
			}
		})
	}

	for _, q := range el.Groups {
		t.Run(fmt.Sprintf("group%d", q.GroupID), func(t *testing.T) {
			ids, err := l.Group(ctx, q.GroupID)
			if err != nil {
				t.Fatal(err)
			}
			var n int64
			for _, id := range ids {
				o, err := l.Object(ctx, id, nil)
				if err != nil {
					t.Fatal(err)
				}
				n += o.Count
			}
			if fmt.Sprint(ids) != fmt.Sprint(q.ObjectIDs) || n != q.Count {
				t.Fatalf("members %v with %d vertices, want %v with %d", ids, n, q.ObjectIDs, q.Count)
			}
		})
	}

	for _, f := range el.Links {
		t.Run(fmt.Sprintf("links%+d", f.Delta), func(t *testing.T) {
			recs, err := zvf.ReadLinks(ctx, l, f.Delta)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != f.RecordCount {
				t.Fatalf("%d records, want %d", len(recs), f.RecordCount)
			}
			perSeg := map[string]int{}
			var all []any
			for _, r := range recs {
				perSeg[r.Segment]++
				all = append(all, r.JSON())
			}
			for _, sg := range f.Segments {
				if perSeg[sg.Segment] != sg.RecordCount {
					t.Errorf("segment %s: %d records, want %d", sg.Segment, perSeg[sg.Segment], sg.RecordCount)
				}
			}
			if got := pySHA(all); got != f.RecordsSHA {
				t.Errorf("records (sorted) sha %s, want %s", got, f.RecordsSHA)
			}
			for i, raw := range f.Records { // read_links order, record by record
				var want any
				d := json.NewDecoder(bytes.NewReader(raw))
				d.UseNumber()
				if err := d.Decode(&want); err != nil {
					t.Fatal(err)
				}
				if g, w := pyJSON(recs[i].JSON()), pyJSON(want); g != w || recs[i].Segment != f.Cells[i][0] || recs[i].Cell != f.Cells[i][1] {
					t.Fatalf("record %d = %s in %s cell %s, want %s in %v", i, g, recs[i].Segment, recs[i].Cell, w, f.Cells[i])
				}
			}
		})
	}
}

func checkRows(t *testing.T, what string, got [][3]float32, want coords) {
	t.Helper()
	if want == nil {
		return
	}
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows, want %d", what, len(got), len(want))
	}
	for i, r := range want {
		if rowOf(r) != got[i] {
			t.Fatalf("%s: row %d = %v, want %v", what, i, got[i], r)
		}
	}
}

func checkAttrs(t *testing.T, got, want map[string][]any) {
	t.Helper()
	for n, vals := range want {
		gv := got[n]
		if len(gv) != len(vals) {
			t.Fatalf("attribute %s: %d values, want %d", n, len(gv), len(vals))
		}
		for i := range vals {
			if fmt.Sprint(normalize(number(vals[i]))) != fmt.Sprint(normalize(gv[i])) {
				t.Fatalf("attribute %s row %d = %v, want %v", n, i, gv[i], vals[i])
			}
		}
	}
}

// number turns the fixtures' json.Number values into float64 (as
// decodeColumn gives them).
func number(v any) any {
	switch x := v.(type) {
	case json.Number:
		f, _ := x.Float64()
		return f
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = number(x[i])
		}
		return out
	}
	return v
}

func checkObjectAttr(t *testing.T, o *zvf.Object, name string, want json.Number) {
	t.Helper()
	for _, c := range o.ObjectAttributes {
		if c.Name != name {
			continue
		}
		v := c.At(0)
		var got string
		switch v.Kind {
		case zvf.KindUint:
			got = strconv.FormatUint(v.U, 10)
		case zvf.KindInt:
			got = strconv.FormatInt(v.I, 10)
		default:
			f, _ := want.Float64()
			if float32(v.Float64()) == float32(f) {
				return
			}
			got = fmt.Sprint(v.Float64())
		}
		if got != want.String() {
			t.Fatalf("object %d %s = %s, want %s", o.ID, name, got, want)
		}
		return
	}
	t.Fatalf("object %d has no object attribute %s (has %d)", o.ID, name, len(o.ObjectAttributes))
}

func coordPairs(pairs []coords, directed bool) []string {
	rows := make([][3]float32, 0, 2*len(pairs))
	edges := make([]int64, 0, 2*len(pairs))
	for _, p := range pairs {
		edges = append(edges, int64(len(rows)), int64(len(rows)+1))
		rows = append(rows, rowOf(p[0]), rowOf(p[1]))
	}
	return canonEdges(rows, edges, directed)
}

func coordFaces(faces []coords) []string {
	var rows [][3]float32
	var idx []int64
	w := 3
	for _, f := range faces {
		w = len(f)
		for _, c := range f {
			idx = append(idx, int64(len(rows)))
			rows = append(rows, rowOf(c))
		}
	}
	return canonFaces(rows, idx, w)
}

// edgeLists renders edges as the fixtures' JSON lists: [a, b] coordinate
// pairs, each undirected pair sorted.
func edgeLists(rows [][3]float32, edges []int64, directed bool) []any {
	var out []any
	for i := 0; i+1 < len(edges); i += 2 {
		a, b := rows[edges[i]], rows[edges[i+1]]
		if !directed && less(b, a) {
			a, b = b, a
		}
		out = append(out, []any{pyRow(a), pyRow(b)})
	}
	return out
}

// faceLists renders faces rotated so the smallest corner comes first.
func faceLists(rows [][3]float32, faces []int64, w int) []any {
	var out []any
	for i := 0; i+w <= len(faces); i += w {
		m := 0
		for k := 1; k < w; k++ {
			if less(rows[faces[i+k]], rows[faces[i+m]]) {
				m = k
			}
		}
		f := make([]any, w)
		for k := 0; k < w; k++ {
			f[k] = pyRow(rows[faces[i+(m+k)%w]])
		}
		out = append(out, f)
	}
	return out
}

func pyRow(r [3]float32) []any {
	return []any{float64(r[0]), float64(r[1]), float64(r[2])}
}

// attrSHA is the fixtures' sha of one attribute's values, sorted with the
// rows: SHA-256 of their compact JSON (integer types as integers).
func attrSHA(vals []any, dtype string) string {
	out := make([]any, len(vals))
	for i, v := range vals {
		out[i] = v
		if f, ok := v.(float64); ok && (strings.HasPrefix(dtype, "int") || strings.HasPrefix(dtype, "uint")) {
			out[i] = int64(f)
		}
	}
	h := sha256.Sum256([]byte(pyJSON(out)))
	return hex.EncodeToString(h[:])
}

func attrDType(l *zvf.Level, name string) string {
	for _, a := range l.Info().VertexAttributes {
		if a.Name == name {
			return a.DType
		}
	}
	return ""
}

// pySHA is the fixtures' hash of a list: sorted the way Python sorts
// lists, rendered as compact JSON, SHA-256.
func pySHA(list []any) string {
	s := slices.Clone(list)
	sort.SliceStable(s, func(i, j int) bool { return pyCompare(s[i], s[j]) < 0 })
	h := sha256.Sum256([]byte(pyJSON(s)))
	return hex.EncodeToString(h[:])
}

// pyCompare orders numbers and lists as Python does.
func pyCompare(a, b any) int {
	switch x := a.(type) {
	case []any:
		y := b.([]any)
		for i := 0; i < len(x) && i < len(y); i++ {
			if c := pyCompare(x[i], y[i]); c != 0 {
				return c
			}
		}
		return len(x) - len(y)
	}
	fa, fb := num(a), num(b)
	switch {
	case fa < fb:
		return -1
	case fa > fb:
		return 1
	}
	return 0
}

func num(v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case int64:
		return float64(x)
	case int:
		return float64(x)
	}
	panic(fmt.Sprintf("not a number: %T", v))
}

// pyJSON renders v like Python's json.dumps(separators=(",", ":")):
// integers as integers, floats by their shortest repr.
func pyJSON(v any) string {
	var b strings.Builder
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case []any:
			b.WriteByte('[')
			for i, e := range x {
				if i > 0 {
					b.WriteByte(',')
				}
				walk(e)
			}
			b.WriteByte(']')
		case int64:
			b.WriteString(strconv.FormatInt(x, 10))
		case int:
			b.WriteString(strconv.Itoa(x))
		case json.Number:
			b.WriteString(x.String())
		case string:
			q, _ := json.Marshal(x)
			b.Write(q)
		case nil:
			b.WriteString("null")
		case float64:
			switch a := math.Abs(x); {
			case x == math.Trunc(x) && a < 1e16:
				b.WriteString(strconv.FormatFloat(x, 'f', 1, 64))
			case a >= 1e16 || a < 1e-4:
				b.WriteString(strconv.FormatFloat(x, 'e', -1, 64))
			default:
				b.WriteString(strconv.FormatFloat(x, 'f', -1, 64))
			}
		default:
			panic(fmt.Sprintf("pyJSON: %T", v))
		}
	}
	walk(v)
	return b.String()
}
