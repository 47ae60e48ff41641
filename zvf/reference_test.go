package zvf_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// A fixture set is a folder of stores, each beside the answers the
// implementation that wrote it gives (NAME.expected.json): the reference's
// 0.6/0.7 stores and the hand-built ZVF 0.9 ones. One checker reads every
// answer either set holds; where the sets mean different things by the
// same answer, the set says so.
type fixtureSet struct {
	dir    string
	stores []string
	// version and layout the descriptor must name ("": not checked).
	version, layout string
	// edgesFromInput: graph and skeleton edges are checked against the
	// generator's input, not against the writer's answers (FORMAT.md
	// quirk 1: the reference invents skeleton edges at chunk starts and
	// tree roots, 600 where the input has 597, and its box edges follow).
	edgesFromInput bool
}

const (
	fixtures   = "../testdata/zvf-reference"
	fixtures09 = "../testdata/zvf-0.9"
)

var (
	ref07 = fixtureSet{dir: fixtures, edgesFromInput: true, stores: []string{
		"points_bins", "points_bins_zstd", "points_bins_blosc", "points_pyramid", "quirk_points_objects_bins",
		"polylines", "graph", "skeleton", "mesh", "graph_sharded", "points_pyramid_sharded", "polylines_sharded"}}
	ref09 = fixtureSet{dir: fixtures09, version: "0.9.0", layout: "chunk_grid_arrays", stores: []string{
		"points_pyramid_v09", "streamlines_v09", "streamlines_zstd_v09", "graph_v09", "mesh_v09", "mesh_sharded_v09", "skeleton_v09"}}
)

type coords [][]float64

// expected is what a NAME.expected.json holds, of both sets: each field is
// checked where a fixture has it.
type expected struct {
	Geometry string `json:"geometry"`
	Input    *struct {
		Positions [][]float64 `json:"positions"`
		Edges     [][2]int    `json:"edges"`
	} `json:"input"`
	ObjectAttributes map[string][]json.Number `json:"object_attributes"`
	Levels           []expectedLevel          `json:"levels"`
}

type polyline struct {
	ObjectID int64   `json:"object_id"`
	Counts   []int64 `json:"fragment_vertex_counts"`
	Count    int64   `json:"vertex_count"`
	SHA      string  `json:"sha256_f32le"`
}

type expectedLevel struct {
	Level int `json:"level"`
	Meta  struct {
		VertexCount *int64 `json:"vertex_count"` // 0.9
		Level07     struct {
			VertexCount *int64 `json:"vertex_count"`
		} `json:"zarr_vectors_level"`
	} `json:"level_metadata"`
	ChunkKeys [][]int64 `json:"chunk_keys"`
	ReadAll   struct {
		VertexCount      *int64            `json:"vertex_count"`
		NodeCount        *int64            `json:"node_count"`
		SortedSHA        string            `json:"sha256_sorted_positions_f32le"`
		SortedSHAv       string            `json:"sha256_sorted_vertices_f32le"`
		Positions        coords            `json:"positions"` // the reference's graph, in its order
		Edges            [][2]int          `json:"edges"`
		Vertices         coords            `json:"vertices"` // the reference's mesh, in its order
		Faces            [][]int           `json:"faces"`
		PositionsSorted  coords            `json:"positions_sorted"`
		Attrs            map[string][]any  `json:"vertex_attributes_sorted"`
		AttrsSHA         map[string]string `json:"vertex_attributes_sha256_sorted"`
		EdgesCanon       []coords          `json:"edges_canonical"`
		EdgesCanonSHA    string            `json:"edges_canonical_sha256"`
		EdgesDirectedSHA string            `json:"edges_directed_sha256"`
		FacesSHA         string            `json:"faces_canonical_sha256"`
		EdgeCount        *int              `json:"edge_count"`
		FaceCount        *int              `json:"face_count"`
		Polylines        []polyline        `json:"polylines"`
	} `json:"read_all"`
	BBox []struct {
		BBox struct {
			Min []float64 `json:"min"`
			Max []float64 `json:"max"`
		} `json:"bbox"`
		Source        string           `json:"source"`
		VertexCount   *int64           `json:"vertex_count"`
		NodeCount     *int64           `json:"node_count"`
		Inside        *int64           `json:"vertices_inside_count"`
		SortedSHA     string           `json:"sha256_sorted_positions_f32le"`
		Sorted        coords           `json:"positions_sorted"`
		SortedV       coords           `json:"vertices_sorted"`
		Attrs         map[string][]any `json:"vertex_attributes_sorted"`
		EdgesCanon    []coords         `json:"edges_canonical"`
		EdgesDirected []coords         `json:"edges_directed"`
		FacesCanon    []coords         `json:"faces_canonical"`
		IDsInside     []int64          `json:"object_ids_with_a_vertex_inside"`
	} `json:"bbox_queries"`
	Objects []struct {
		ObjectID int64 `json:"object_id"`
		Count    int64 `json:"vertex_count"`
		Manifest []struct {
			Chunk    []int64 `json:"chunk"`
			Fragment int64   `json:"fragment"`
		} `json:"manifest"`
		Counts        []int64          `json:"fragment_vertex_counts"`
		Positions     coords           `json:"positions"`
		SHA           string           `json:"sha256_positions_f32le"`
		SHA2          string           `json:"sha256_f32le"`
		Attrs         map[string][]any `json:"vertex_attributes"`
		EdgesCanon    []coords         `json:"edges_canonical"`
		EdgesDirected []coords         `json:"edges_directed"`
		FacesCanon    []coords         `json:"faces_canonical"`
		SegmentID     json.Number      `json:"segment_id"`
	} `json:"object_queries"`
	Groups []struct {
		GroupID   int64   `json:"group_id"`
		ObjectIDs []int64 `json:"object_ids"`
		Unique    []int64 `json:"object_ids_sorted_unique"`
		Count     int64   `json:"vertex_count"`
		SortedSHA string  `json:"sha256_sorted_positions_f32le"`
	} `json:"group_queries"`
	Links []struct {
		Delta    int `json:"delta"`
		Segments []struct {
			Segment     string `json:"segment"`
			RecordCount int    `json:"record_count"`
		} `json:"segments"`
		RecordCount int               `json:"record_count"`
		RecordsSHA  string            `json:"records_canonical_sha256"`
		Records     []json.RawMessage `json:"records"`
		Cells       [][2]string       `json:"record_cells"`
	} `json:"links"`
}

// open opens the set's store name and reads its expected answers. A
// _sharded store is its namesake packed by the reference's own
// shard_store (testdata/zvf-reference/make_sharded_fixtures.py checks the
// reads are equal), so the namesake's answers hold for it.
func (set fixtureSet) open(t testing.TB, name string) (*zvf.Store, *expected) {
	t.Helper()
	ctx := context.Background()
	st := zvftest.Store(t, filepath.Join(set.dir, name+".zarrvectors"))
	s, err := zvf.Open(ctx, st, zvf.Options{Name: name, Cache: cache.New(256 << 20)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(set.dir, strings.TrimSuffix(name, "_sharded")+".expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var e expected
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&e); err != nil {
		t.Fatal(err)
	}
	return s, &e
}

// TestReferenceStores: every answer the fixtures give — chunk keys, whole
// levels, boxes (vertices, attributes, graph edges, mesh faces with
// winding, skeleton and streamline edges), objects (manifest order,
// fragments, attributes, connectivity), object attributes, groups and
// every link family record by record — for the reference's 0.6/0.7 stores
// and the ZVF 0.9 ones, their zstd, blosc and sharded variants included.
func TestReferenceStores(t *testing.T) {
	t.Parallel()
	for _, set := range []fixtureSet{ref07, ref09} {
		for _, name := range set.stores {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				s, e := set.open(t, name)
				if got := s.Levels(); len(got) != len(e.Levels) {
					t.Fatalf("levels %v, want %d", got, len(e.Levels))
				}
				if info := s.Info(); set.version != "" && (info.ZVVersion != set.version || info.Layout != set.layout) {
					t.Fatalf("descriptor says zv_version %q layout %q, want %q %q", info.ZVVersion, info.Layout, set.version, set.layout)
				}
				for i := range e.Levels {
					el := &e.Levels[i]
					l, err := s.Level(el.Level)
					if err != nil {
						t.Fatal(err)
					}
					t.Run(fmt.Sprintf("level%d", el.Level), func(t *testing.T) {
						c := &levelCheck{set: set, e: e, el: el, l: l}
						c.keys(t)
						all := c.whole(t)
						c.boxes(t, all)
						c.objects(t)
						c.groups(t)
						c.links(t)
					})
				}
			})
		}
	}
}

// levelCheck checks one level of a fixture against its expected answers.
type levelCheck struct {
	set fixtureSet
	e   *expected
	el  *expectedLevel
	l   *zvf.Level
}

func (c *levelCheck) keys(t *testing.T) {
	keys := c.l.Keys()
	if len(keys) != len(c.el.ChunkKeys) {
		t.Fatalf("%d chunk keys, want %d", len(keys), len(c.el.ChunkKeys))
	}
	for i, k := range c.el.ChunkKeys {
		if zvf.Key(k).String() != keys[i].String() {
			t.Fatalf("key %d = %s, want %v", i, keys[i], k)
		}
	}
	for _, n := range []*int64{c.el.Meta.VertexCount, c.el.Meta.Level07.VertexCount} {
		if n != nil && c.l.Info().VertexCount != *n {
			t.Errorf("level vertex_count %d, want %d", c.l.Info().VertexCount, *n)
		}
	}
}

// whole checks the whole level's answer and returns it.
func (c *levelCheck) whole(t *testing.T) *answer {
	all := bbox(t, c.l, everywhere.min, everywhere.max, []string{"*"}, true)
	ra := &c.el.ReadAll
	t.Run("read_all", func(t *testing.T) {
		if n := firstOf(ra.VertexCount, ra.NodeCount); n != nil && int64(len(all.rows)) != *n {
			t.Errorf("%d vertices, want %d", len(all.rows), *n)
		}
		if sha := ra.SortedSHA + ra.SortedSHAv; sha != "" && sortedSHA(all.rows) != sha {
			t.Errorf("sorted positions: sha %s, want %s", sortedSHA(all.rows), sha)
		}
		rows, attrs := sortedWithAttrs(all)
		checkRows(t, "positions", rows, ra.PositionsSorted)
		checkAttrs(t, attrs, ra.Attrs)
		for n, want := range ra.AttrsSHA {
			if got := attrSHA(attrs[n], attrDType(c.l, n)); got != want {
				t.Errorf("attribute %s: sorted values sha %s, want %s", n, got, want)
			}
		}
		switch {
		case c.e.Geometry == "graph" && c.set.edgesFromInput:
			if got, want := canonEdges(all.rows, all.edges, false), canonEdges(listRows(ra.Positions), pairs(ra.Edges), false); !slices.Equal(got, want) {
				t.Errorf("%d edges differ from the reference's %d", len(got), len(want))
			}
		case c.e.Geometry == "graph":
			got := canonEdges(all.rows, all.edges, false)
			if !slices.Equal(got, coordPairs(ra.EdgesCanon, false)) || pySHA(edgeLists(all.rows, all.edges, false)) != ra.EdgesCanonSHA {
				t.Errorf("%d edges differ from the expected %d", len(got), len(ra.EdgesCanon))
			}
		case c.e.Geometry == "skeleton" && c.set.edgesFromInput:
			if got, want := canonEdges(all.rows, all.edges, true), canonEdges(listRows(c.e.Input.Positions), pairs(c.e.Input.Edges), true); !slices.Equal(got, want) {
				t.Errorf("%d (child, parent) edges, the input has %d; they differ", len(got), len(want))
			}
		case c.e.Geometry == "skeleton":
			if n := len(all.edges) / 2; n != *ra.EdgeCount || pySHA(edgeLists(all.rows, all.edges, true)) != ra.EdgesDirectedSHA {
				t.Errorf("%d (child, parent) edges, want %d with sha %s", n, *ra.EdgeCount, ra.EdgesDirectedSHA)
			}
		case c.e.Geometry == "mesh":
			if n := len(all.faces) / max(all.fw, 1); (ra.FaceCount != nil && n != *ra.FaceCount) || all.fw != 3 ||
				(ra.FacesSHA != "" && pySHA(faceLists(all.rows, all.faces, all.fw)) != ra.FacesSHA) {
				t.Errorf("%d faces of width %d, want %v with sha %s", n, all.fw, ra.FaceCount, ra.FacesSHA)
			}
			if ra.Faces != nil {
				w := len(ra.Faces[0])
				var faces []int64
				for _, f := range ra.Faces {
					faces = append(faces, ints(f)...)
				}
				if !slices.Equal(canonFaces(all.rows, all.faces, all.fw), canonFaces(listRows(ra.Vertices), faces, w)) {
					t.Errorf("%d faces differ from the reference's %d", len(all.faces)/max(all.fw, 1), len(ra.Faces))
				}
			}
		}
		for _, p := range ra.Polylines {
			o, err := c.l.Object(context.Background(), p.ObjectID, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := f32rows(o.Vertices.Data); o.Count != p.Count || shaRows(got) != p.SHA || fmt.Sprint(o.FragmentCounts) != fmt.Sprint(p.Counts) {
				t.Errorf("polyline %d: %d vertices, fragments %v; want %d, %v", p.ObjectID, o.Count, o.FragmentCounts, p.Count, p.Counts)
			}
		}
	})
	return all
}

func (c *levelCheck) boxes(t *testing.T, all *answer) {
	for qi, q := range c.el.BBox {
		t.Run(fmt.Sprintf("bbox%d%v-%v", qi, q.BBox.Min, q.BBox.Max), func(t *testing.T) {
			got := bbox(t, c.l, q.BBox.Min, q.BBox.Max, []string{"*"}, true)
			want := firstOf(q.VertexCount, q.NodeCount)
			if c.e.Geometry == "streamline" {
				// vertex_count is the reference's chunk-granular answer
				// (whole polylines of the box's chunks); the vertex-level one
				// is the brute-force filter of the whole level.
				var brute [][3]float32
				for _, r := range all.rows {
					if inBox(r, q.BBox.Min, q.BBox.Max) {
						brute = append(brute, r)
					}
				}
				if len(got.rows) != len(brute) || sortedSHA(got.rows) != sortedSHA(brute) {
					t.Fatalf("%d vertices, brute force %d", len(got.rows), len(brute))
				}
				want = q.Inside
			}
			if want != nil && int64(len(got.rows)) != *want {
				t.Fatalf("%d vertices, want %d (source %q)", len(got.rows), *want, q.Source)
			}
			if q.SortedSHA != "" && sortedSHA(got.rows) != q.SortedSHA {
				t.Fatalf("sorted positions: sha %s, want %s", sortedSHA(got.rows), q.SortedSHA)
			}
			rows, attrs := sortedWithAttrs(got)
			checkRows(t, "positions", rows, q.Sorted)
			checkRows(t, "vertices", rows, q.SortedV)
			checkAttrs(t, attrs, q.Attrs)
			switch {
			case (c.e.Geometry == "graph" || c.e.Geometry == "skeleton") && c.set.edgesFromInput:
				truth := truthEdges(c.e, q.BBox.Min, q.BBox.Max)
				if g := canonEdges(got.rows, got.edges, c.e.Geometry == "skeleton"); !slices.Equal(g, truth) {
					t.Fatalf("%d edges, truth (input edges with both ends inside) has %d", len(g), len(truth))
				}
			case c.e.Geometry == "graph":
				if g, w := canonEdges(got.rows, got.edges, false), coordPairs(q.EdgesCanon, false); !slices.Equal(g, w) {
					t.Fatalf("%d edges, want %d", len(g), len(w))
				}
			case c.e.Geometry == "skeleton" || (c.e.Geometry == "streamline" && q.EdgesDirected != nil):
				if g, w := canonEdges(got.rows, got.edges, true), coordPairs(q.EdgesDirected, true); !slices.Equal(g, w) {
					t.Fatalf("%d directed edges, want %d:\n got %v\nwant %v", len(g), len(w), g, w)
				}
			case c.e.Geometry == "streamline":
				for i := 0; i+1 < len(got.edges); i += 2 {
					if got.edges[i] < 0 || got.edges[i+1] >= int64(len(got.rows)) {
						t.Fatalf("edge %d out of range", i/2)
					}
				}
			case c.e.Geometry == "mesh":
				if g, w := canonFaces(got.rows, got.faces, got.fw), coordFaces(q.FacesCanon); !slices.Equal(g, w) {
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
}

func (c *levelCheck) objects(t *testing.T) {
	ctx := context.Background()
	for _, q := range c.el.Objects {
		t.Run(fmt.Sprintf("object%d", q.ObjectID), func(t *testing.T) {
			var attrs []string
			if len(q.Attrs) > 0 {
				attrs = []string{"*"}
			}
			o, err := c.l.Object(ctx, q.ObjectID, attrs)
			if err != nil {
				t.Fatal(err)
			}
			rows := f32rows(o.Vertices.Data)
			if sha := q.SHA + q.SHA2; int64(len(rows)) != q.Count || shaRows(rows) != sha {
				t.Fatalf("%d vertices in manifest order (sha %s), want %d (%s)", len(rows), shaRows(rows), q.Count, sha)
			}
			checkRows(t, "vertices in manifest order", rows, q.Positions)
			if q.Counts != nil && fmt.Sprint(o.FragmentCounts) != fmt.Sprint(q.Counts) {
				t.Fatalf("fragment counts %v, want %v", o.FragmentCounts, q.Counts)
			}
			for _, col := range o.Attributes {
				if exp, ok := q.Attrs[col.Name]; ok && fmt.Sprint(normalizeAll(decodeColumn(t, col))) != fmt.Sprint(normalizeAll(numbers(exp))) {
					t.Fatalf("attribute %s differs", col.Name)
				}
			}
			m, err := c.l.Manifest(ctx, q.ObjectID)
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
			if q.Manifest != nil && !slices.Equal(refs, wantRefs) {
				t.Fatalf("manifest %v, want %v", refs, wantRefs)
			}
			switch {
			case q.EdgesCanon != nil:
				if g, w := canonEdges(rows, o.Edges, false), coordPairs(q.EdgesCanon, false); !slices.Equal(g, w) {
					t.Fatalf("%d edges, want %d", len(g), len(w))
				}
			case q.EdgesDirected != nil:
				if g, w := canonEdges(rows, o.Edges, true), coordPairs(q.EdgesDirected, true); !slices.Equal(g, w) {
					t.Fatalf("%d (child, parent) edges, want %d", len(g), len(w))
				}
			case q.FacesCanon != nil:
				if g, w := canonFaces(rows, o.Faces, o.FaceWidth), coordFaces(q.FacesCanon); !slices.Equal(g, w) {
					t.Fatalf("%d faces, want %d", len(g), len(w))
				}
			}
			if q.SegmentID != "" {
				checkObjectAttr(t, o, "segment_id", q.SegmentID)
			}
		})
	}
	if c.el.Level == 0 && len(c.e.ObjectAttributes) > 0 {
		t.Run("object_attributes", func(t *testing.T) {
			for name, vals := range c.e.ObjectAttributes {
				for id, v := range vals {
					o, err := c.l.Object(ctx, int64(id), nil)
					if err != nil {
						t.Fatal(err)
					}
					checkObjectAttr(t, o, name, v)
				}
			}
		})
	}
}

func (c *levelCheck) groups(t *testing.T) {
	ctx := context.Background()
	for _, q := range c.el.Groups {
		t.Run(fmt.Sprintf("group%d", q.GroupID), func(t *testing.T) {
			ids, err := c.l.Group(ctx, q.GroupID)
			if err != nil {
				t.Fatal(err)
			}
			if q.ObjectIDs != nil && fmt.Sprint(ids) != fmt.Sprint(q.ObjectIDs) {
				t.Fatalf("members %v, want %v", ids, q.ObjectIDs)
			}
			if q.Unique != nil {
				if u := slices.Compact(slices.Sorted(slices.Values(ids))); fmt.Sprint(u) != fmt.Sprint(q.Unique) {
					t.Fatalf("members (sorted, unique) %v, want %v", u, q.Unique)
				}
			}
			var rows [][3]float32
			for _, id := range ids {
				o, err := c.l.Object(ctx, id, nil)
				if err != nil {
					t.Fatal(err)
				}
				rows = append(rows, f32rows(o.Vertices.Data)...)
			}
			if int64(len(rows)) != q.Count || (q.SortedSHA != "" && sortedSHA(rows) != q.SortedSHA) {
				t.Fatalf("group vertices: %d, want %d", len(rows), q.Count)
			}
		})
	}
}

func (c *levelCheck) links(t *testing.T) {
	for _, f := range c.el.Links {
		t.Run(fmt.Sprintf("links%+d", f.Delta), func(t *testing.T) {
			recs, err := zvf.ReadLinks(context.Background(), c.l, f.Delta)
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

func firstOf(v ...*int64) *int64 {
	for _, x := range v {
		if x != nil {
			return x
		}
	}
	return nil
}

func listRows(c coords) [][3]float32 {
	out := make([][3]float32, len(c))
	for i, p := range c {
		out[i] = rowOf(p)
	}
	return out
}

func pairs(edges [][2]int) []int64 {
	out := make([]int64, 0, 2*len(edges))
	for _, e := range edges {
		out = append(out, int64(e[0]), int64(e[1]))
	}
	return out
}

func ints(v []int) []int64 {
	out := make([]int64, len(v))
	for i, x := range v {
		out[i] = int64(x)
	}
	return out
}

func truthEdges(e *expected, min, max []float64) []string {
	rows := listRows(e.Input.Positions)
	var edges []int64
	for _, ed := range e.Input.Edges {
		if inBox(rows[ed[0]], min, max) && inBox(rows[ed[1]], min, max) {
			edges = append(edges, int64(ed[0]), int64(ed[1]))
		}
	}
	return canonEdges(rows, edges, e.Geometry == "skeleton")
}

var everywhere = struct{ min, max []float64 }{[]float64{-1e30, -1e30, -1e30}, []float64{1e30, 1e30, 1e30}}

func inBox(r [3]float32, min, max []float64) bool {
	for i := range r {
		if float64(r[i]) < min[i] || float64(r[i]) > max[i] {
			return false
		}
	}
	return true
}
