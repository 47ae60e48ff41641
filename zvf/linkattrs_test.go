package zvf_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/writer"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// rawWeights decodes a graph fixture's link weights straight from its
// files, apart from the reader: for each stored link, the unordered pair
// of its endpoints' coordinates (as text) and its weight. ZVF 0.7 keeps
// them per chunk (links/0/<key>/c/0 int64 pairs, link_attributes/weight/0/
// <key>/c/0 float32, zvf-format §6.3); 0.9 per offsets array, each cell a
// VLenBytes frame whose payload is flat pairs (0.0.0) or a ragged blob of
// [perm, src, other] rows, and the weight cell dense float32 rows
// (zvf-0.9-format §3.4).
func rawWeights(t *testing.T, dir string, level int, v09 bool) map[string]float32 {
	t.Helper()
	read := func(p string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, strconv.Itoa(level), p))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	i64 := func(b []byte) []int64 {
		out := make([]int64, len(b)/8)
		for i := range out {
			out[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
		}
		return out
	}
	f32 := func(b []byte) []float32 {
		out := make([]float32, len(b)/4)
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		return out
	}
	frame := func(b []byte) []byte { // VLenBytes frame of one element
		if binary.LittleEndian.Uint32(b) != 1 || int(binary.LittleEndian.Uint32(b[4:]))+8 != len(b) {
			t.Fatalf("not a one-element vlen frame: % x", b[:min(16, len(b))])
		}
		return b[8:]
	}
	cellPath := func(ks string) string { return strings.ReplaceAll(ks, ".", "/") }
	vertex := func(ks string, row int64) string {
		var b []byte
		if v09 {
			b = frame(read("vertices/c/" + cellPath(ks)))
		} else {
			b = read("vertices/" + ks + "/c/0")
		}
		p := f32(b)
		return fmt.Sprint(p[3*row : 3*row+3])
	}
	pair := func(a, b string) string {
		if b < a {
			a, b = b, a
		}
		return a + "|" + b
	}
	out := map[string]float32{}
	put := func(a, b string, w float32) {
		k := pair(a, b)
		if _, dup := out[k]; dup {
			t.Fatalf("two links join %s: the oracle cannot tell them apart", k)
		}
		out[k] = w
	}
	if !v09 {
		ents, err := os.ReadDir(filepath.Join(dir, strconv.Itoa(level), "link_attributes/weight/0"))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if !e.IsDir() {
				continue
			}
			ks := e.Name()
			links := i64(read("links/0/" + ks + "/c/0"))
			w := f32(read("link_attributes/weight/0/" + ks + "/c/0"))
			if len(w) != len(links)/2 {
				t.Fatalf("chunk %s: %d weights for %d links", ks, len(w), len(links)/2)
			}
			for r := range w {
				put(vertex(ks, links[2*r]), vertex(ks, links[2*r+1]), w[r])
			}
		}
		return out
	}
	segs, err := os.ReadDir(filepath.Join(dir, strconv.Itoa(level), "link_attributes/weight/0"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range segs {
		if !s.IsDir() {
			continue
		}
		seg := s.Name()
		off := []int64{0, 0, 0}
		for i, c := range strings.Split(seg, ".") {
			off[i], _ = strconv.ParseInt(strings.TrimPrefix(c, "+"), 10, 64)
		}
		err := filepath.WalkDir(filepath.Join(dir, strconv.Itoa(level), "link_attributes/weight/0", seg, "c"), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(filepath.Join(dir, strconv.Itoa(level), "link_attributes/weight/0", seg, "c"), p)
			ks := strings.ReplaceAll(rel, "/", ".")
			var key [3]int64
			for i, c := range strings.Split(ks, ".") {
				key[i], _ = strconv.ParseInt(c, 10, 64)
			}
			w := f32(frame(read("link_attributes/weight/0/" + seg + "/c/" + rel)))
			payload := frame(read("links/0/" + seg + "/c/" + rel))
			if seg == "0.0.0" {
				links := i64(payload)
				for r := range w {
					put(vertex(ks, links[2*r]), vertex(ks, links[2*r+1]), w[r])
				}
				return nil
			}
			k := int64(binary.LittleEndian.Uint64(payload))
			rows := i64(payload[8+8*k:])
			if len(rows) != 3*len(w) {
				t.Fatalf("%s cell %s: %d weights for %d link rows", seg, ks, len(w), len(rows)/3)
			}
			other := fmt.Sprintf("%d.%d.%d", key[0]+off[0], key[1]+off[1], key[2]+off[2])
			for r := range w {
				put(vertex(ks, rows[3*r+1]), vertex(other, rows[3*r+2]), w[r])
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestLinkAttributesReferenceGraphs checks every edge's weight in whole
// and paged box answers of both reference graphs (0.7 per-chunk arrays,
// its packed copy, 0.9 offsets arrays) against the weights decoded from
// the files: each edge gets the value of the link row it came from, and
// an edge no link attribute row follows (0.7's cross-chunk links) none.
// Pages bounded by their edges' stored values hold at most that many
// bytes of them: on 0.9, whose cross-chunk links carry values, a bound
// counting only a chunk's own links let the first page hold 92 bytes
// of 64.
func TestLinkAttributesReferenceGraphs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		store, raw string
		level      int
		v09        bool
		weighted   int // edges of the whole answer with a weight
		edges      int
	}{
		{"../testdata/zvf-reference/graph.zarrvectors", "../testdata/zvf-reference/graph.zarrvectors", 0, false, 456, 656},
		{"../testdata/zvf-reference/graph_sharded.zarrvectors", "../testdata/zvf-reference/graph.zarrvectors", 0, false, 456, 656},
		{"../testdata/zvf-0.9/graph_v09.zarrvectors", "../testdata/zvf-0.9/graph_v09.zarrvectors", 0, true, 516, 516},
		{"../testdata/zvf-0.9/graph_v09.zarrvectors", "../testdata/zvf-0.9/graph_v09.zarrvectors", 1, true, 159, 159},
	} {
		t.Run(fmt.Sprintf("%s level %d", filepath.Base(tc.store), tc.level), func(t *testing.T) {
			t.Parallel()
			want := rawWeights(t, tc.raw, tc.level, tc.v09)
			if len(want) != tc.weighted {
				t.Fatalf("the files hold %d weighted links, want %d", len(want), tc.weighted)
			}
			l := zvftest.OpenLevel(t, zvftest.Store(t, tc.store), zvf.Options{Name: "g", Cache: cache.New(64 << 20)}, tc.level)
			if got := fmt.Sprint(l.Info().LinkAttributes); got != "[{weight float32 1 []}]" {
				t.Fatalf("link attributes %s", got)
			}
			// Pages cut by a row limit, and by a bound on their edges'
			// stored values (64 bytes: 16 weights), which on 0.9 counts
			// the cross-chunk links' values too.
			for _, pg := range []struct{ limit, bound int64 }{{0, 0}, {97, 0}, {0, 64}} {
				limit := pg.limit
				var verts []string
				weighted, edges, pages := 0, 0, 0
				q := zvf.BBoxQuery{Min: []float64{-1e9, -1e9, -1e9}, Max: []float64{1e9, 1e9, 1e9}, Connectivity: true, LinkAttributes: []string{"*"}, Limit: limit, EdgeValueBytes: pg.bound}
				for page := 0; ; page++ {
					pages++
					res, err := l.BBox(context.Background(), q, func(b *zvf.Batch) error {
						for i := 0; i < b.Rows; i++ {
							p := make([]float32, 3)
							for c := range p {
								p[c] = float32(b.Vertices.At(3*i + c).F)
							}
							verts = append(verts, fmt.Sprint(p))
						}
						return nil
					})
					if err != nil {
						t.Fatal(err)
					}
					if len(res.EdgeAttributes) != 1 {
						t.Fatalf("page %d: %d edge attribute columns", page, len(res.EdgeAttributes))
					}
					col := res.EdgeAttributes[0]
					ne := len(res.Edges) / 2
					if col.Name != "weight" || col.DType != "float32" || col.Channels != 1 || col.Edges() != ne || (col.Valid != nil && len(col.Valid) != ne) {
						t.Fatalf("page %d: column %s %s×%d of %d bytes, valid %d, for %d edges", page, col.Name, col.DType, col.Channels, len(col.Data), len(col.Valid), ne)
					}
					for i := 0; i < ne; i++ {
						a, b := verts[res.Edges[2*i]], verts[res.Edges[2*i+1]]
						if b < a {
							a, b = b, a
						}
						w, ok := want[a+"|"+b]
						valid := col.Valid == nil || col.Valid[i]
						if valid != ok {
							t.Fatalf("page %d edge %d (%s, %s): has a value %v, the files %v", page, i, a, b, valid, ok)
						}
						if got := float32(col.At(i).F); ok && got != w {
							t.Fatalf("page %d edge %d (%s, %s): weight %v, the files say %v", page, i, a, b, got, w)
						}
						if ok {
							weighted++
						}
					}
					if stored := 4 * (col.Edges() - invalid(col.Valid)); pg.bound > 0 && int64(stored) > pg.bound {
						t.Fatalf("page %d: %d bytes of edge values; a page holds at most %d", page, stored, pg.bound)
					}
					edges += ne
					if !res.More {
						break
					}
					q.Resume = res.Next
				}
				if weighted != tc.weighted || edges != tc.edges {
					t.Fatalf("limit %d, bound %d: %d edges, %d weighted; want %d, %d", limit, pg.bound, edges, weighted, tc.edges, tc.weighted)
				}
				if pg.bound > 0 && int64(pages) < int64(4*tc.weighted)/pg.bound {
					t.Fatalf("bound %d: %d pages for %d weights", pg.bound, pages, tc.weighted)
				}
			}
			// Every object's edges carry the same values.
			weighted := 0
			for id := int64(0); id < l.Info().ObjectCount; id++ {
				o, err := l.ObjectWith(context.Background(), id, zvf.ObjectQuery{LinkAttributes: []string{"weight"}})
				if err != nil {
					t.Fatal(err)
				}
				col := o.EdgeAttributes[0]
				if len(o.EdgeAttributes) != 1 || col.Edges() != len(o.Edges)/2 {
					t.Fatalf("object %d: %d columns, %d bytes for %d edges", id, len(o.EdgeAttributes), len(col.Data), len(o.Edges)/2)
				}
				at := func(r int64) string {
					p := make([]float32, 3)
					for c := range p {
						p[c] = float32(o.Vertices.At(3*int(r) + c).F)
					}
					return fmt.Sprint(p)
				}
				for i := 0; i < len(o.Edges)/2; i++ {
					a, b := at(o.Edges[2*i]), at(o.Edges[2*i+1])
					if b < a {
						a, b = b, a
					}
					w, ok := want[a+"|"+b]
					if valid := col.Valid == nil || col.Valid[i]; valid != ok || (ok && float32(col.At(i).F) != w) {
						t.Fatalf("object %d edge %d (%s, %s): %v (valid %v), the files %v (%v)", id, i, a, b, col.At(i).F, valid, w, ok)
					}
					if ok {
						weighted++
					}
				}
			}
			if weighted != tc.weighted {
				t.Fatalf("the objects' edges have %d weights, want %d", weighted, tc.weighted)
			}
			// A store's answers without link attributes asked for carry none.
			res, err := l.BBox(context.Background(), zvf.BBoxQuery{Min: []float64{-1e9, -1e9, -1e9}, Max: []float64{1e9, 1e9, 1e9}, Connectivity: true}, func(*zvf.Batch) error { return nil })
			if err != nil || res.EdgeAttributes != nil {
				t.Fatalf("no link attributes asked: %v, %v", res.EdgeAttributes, err)
			}
			_, err = l.BBox(context.Background(), zvf.BBoxQuery{Min: []float64{0, 0, 0}, Max: []float64{1, 1, 1}, Connectivity: true, LinkAttributes: []string{"nope"}}, func(*zvf.Batch) error { return nil })
			if err == nil || !strings.Contains(err.Error(), `no link attribute "nope"`) {
				t.Fatalf("unknown link attribute: %v", err)
			}
		})
	}
}

// TestLinkAttributesWriterRoundTrip writes a graph whose edges carry a
// two-channel int32 attribute naming the edge (i, 1000+i) and a float32
// one (i/2) with the project's writer, converts it to ZVF 0.9 (canonical
// and duplicate link stores), and checks that every answer edge carries
// the values of the input edge joining the same two positions, each input
// edge once, and that only cross-chunk edges (for which the 0.7 writer
// keeps no attributes) go without.
func TestLinkAttributesWriterRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var g writer.Graph
	const n = 60
	for i := range n {
		// A helix through a few 10-unit chunks.
		a := float64(i) * 0.4
		g.Positions = append(g.Positions, float32(15+12*math.Cos(a)), float32(15+12*math.Sin(a)), float32(i)*0.7)
		if i > 0 {
			g.Edges = append(g.Edges, int64(i), int64(i-1))
		}
		if i >= 5 && i%5 == 0 {
			g.Edges = append(g.Edges, int64(i), int64(i-5))
		}
	}
	ne := len(g.Edges) / 2
	ids := make([]byte, 0, 8*ne)
	half := make([]float32, ne)
	for i := range ne {
		ids = binary.LittleEndian.AppendUint32(ids, uint32(i))
		ids = binary.LittleEndian.AppendUint32(ids, uint32(1000+i))
		half[i] = float32(i) / 2
	}
	g.LinkAttributes = []writer.Attribute{{Name: "ids", DType: "int32", Channels: 2, Data: ids}, writer.Float32Attribute("w", 1, half)}
	chunkOf := func(v int64) string {
		p := g.Positions[3*v : 3*v+3]
		return fmt.Sprint(math.Floor(float64(p[0])/10), math.Floor(float64(p[1])/10), math.Floor(float64(p[2])/10))
	}
	pos := func(v int64) string { return fmt.Sprint(g.Positions[3*v : 3*v+3]) }
	cross := 0
	for i := range ne {
		if chunkOf(g.Edges[2*i]) != chunkOf(g.Edges[2*i+1]) {
			cross++
		}
	}
	if cross == 0 || cross == ne {
		t.Fatalf("%d of %d edges cross chunks: the input tests nothing", cross, ne)
	}
	st07, err := blobstore.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := writer.WriteGraph(ctx, st07, "", &g, writer.Options{ChunkShape: []float64{10, 10, 10}}); err != nil {
		t.Fatal(err)
	}
	stores := map[string]storage.Store{"0.7": st07}
	for name, o := range map[string]zvftest.To09Options{"0.9": {}, "0.9 duplicate": {Duplicate: true}} {
		dst, err := blobstore.Open(ctx, "mem://")
		if err != nil {
			t.Fatal(err)
		}
		if err := zvftest.To09(ctx, st07, dst, o); err != nil {
			t.Fatal(err)
		}
		stores[name] = dst
	}
	for name, st := range stores {
		l := zvftest.OpenLevel(t, st, zvf.Options{Name: "rt"}, 0)
		if got := fmt.Sprint(l.Info().LinkAttributes); got != "[{ids int32 2 []} {w float32 1 []}]" {
			t.Fatalf("%s: link attributes %s", name, got)
		}
		var verts []string
		res, err := l.BBox(ctx, zvf.BBoxQuery{Min: []float64{-1e9, -1e9, -1e9}, Max: []float64{1e9, 1e9, 1e9}, Connectivity: true, LinkAttributes: []string{"*"}}, func(b *zvf.Batch) error {
			for i := 0; i < b.Rows; i++ {
				p := make([]float32, 3)
				for c := range p {
					p[c] = float32(b.Vertices.At(3*i + c).F)
				}
				verts = append(verts, fmt.Sprint(p))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		idc, wc := res.EdgeAttributes[0], res.EdgeAttributes[1]
		seen := map[int64]bool{}
		without := 0
		for i := 0; i < len(res.Edges)/2; i++ {
			if idc.Valid != nil && !idc.Valid[i] {
				if wc.Valid == nil || wc.Valid[i] {
					t.Fatalf("%s edge %d: a value in one link attribute, not the other", name, i)
				}
				without++
				continue
			}
			e := idc.At(2 * i).I
			if e < 0 || e >= int64(ne) || seen[e] || idc.At(2*i+1).I != 1000+e || wc.At(i).F != float64(e)/2 {
				t.Fatalf("%s edge %d: values %v %v %v (seen %v)", name, i, e, idc.At(2*i+1).I, wc.At(i).F, seen[e])
			}
			seen[e] = true
			a, b := verts[res.Edges[2*i]], verts[res.Edges[2*i+1]]
			pa, pb := pos(g.Edges[2*e]), pos(g.Edges[2*e+1])
			if !(a == pa && b == pb) && !(a == pb && b == pa) {
				t.Fatalf("%s edge %d joins %s and %s, and carries the values of input edge %d, which joins %s and %s", name, i, a, b, e, pa, pb)
			}
		}
		if len(seen) != ne-cross || without != cross {
			t.Fatalf("%s: %d edges with values, %d without; want %d, %d", name, len(seen), without, ne-cross, cross)
		}
	}
}

// invalid is how many of an edge column's edges have no value.
func invalid(valid []bool) int {
	n := 0
	for _, v := range valid {
		if !v {
			n++
		}
	}
	return n
}

// TestLinkAttributesCorruptCell: a link attribute cell that is not one
// row per row of its links cell is ErrCorrupt naming the array and the
// cell, in both layouts, not values shifted onto other edges; validate
// reports it at that cell.
func TestLinkAttributesCorruptCell(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		store, array, cell string
		cut                func(t *testing.T, dir string)
	}{
		{"../testdata/zvf-reference/graph.zarrvectors", "link_attributes/weight/0", "3.3.6", func(t *testing.T, dir string) {
			// One float32 where the chunk's two links want two: a
			// well-formed Zarr array of the wrong length.
			p := filepath.Join(dir, "0/link_attributes/weight/0/3.3.6")
			meta := `{"shape":[4],"data_type":"uint8","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[4]}},"chunk_key_encoding":{"name":"default","configuration":{"separator":"/"}},"fill_value":0,"codecs":[{"name":"bytes"}],"attributes":{},"zarr_format":3,"node_type":"array"}`
			if err := os.WriteFile(filepath.Join(p, "zarr.json"), []byte(meta), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(p, "c/0"), []byte{0, 0, 0x80, 0x3f}, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"../testdata/zvf-0.9/graph_v09.zarrvectors", "link_attributes/weight/0/0.0.0", "1.4.6", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "0/link_attributes/weight/0/0.0.0/c/1/4/6")
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			payload := b[8 : len(b)-4] // a row short
			frame := binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, 1), uint32(len(payload)))
			if err := os.WriteFile(p, append(frame, payload...), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(filepath.Base(tc.store), func(t *testing.T) {
			t.Parallel()
			dir := zvftest.CopyTree(t, tc.store)
			tc.cut(t, dir)
			l := zvftest.OpenLevel(t, zvftest.Store(t, dir), zvf.Options{Name: "g"}, 0)
			q := zvf.BBoxQuery{Min: []float64{-1e9, -1e9, -1e9}, Max: []float64{1e9, 1e9, 1e9}, Connectivity: true, LinkAttributes: []string{"weight"}}
			_, err := l.BBox(context.Background(), q, func(*zvf.Batch) error { return nil })
			var ze *zvf.Error
			if !errors.As(err, &ze) || !errors.Is(err, zvf.ErrCorrupt) || ze.Array != tc.array || ze.Chunk != tc.cell || !strings.Contains(err.Error(), "one per row of its links cell") {
				t.Fatalf("got %v, want ErrCorrupt for %s cell %s", err, tc.array, tc.cell)
			}
			// Without the link attribute the answer stands.
			q.LinkAttributes = nil
			if _, err := l.BBox(context.Background(), q, func(*zvf.Batch) error { return nil }); err != nil {
				t.Fatal(err)
			}
			// validate says so, where.
			rep := zvf.Validate(context.Background(), zvftest.Store(t, dir), "g", 5, nil)
			found := false
			for _, p := range rep.Problems {
				found = found || (p.Severity == "error" && p.Path == "0/"+tc.array+"/"+tc.cell && strings.Contains(p.Message, "one per row of its links cell"))
			}
			if !found || rep.OK() {
				t.Fatalf("validate: %+v", rep.Problems)
			}
		})
	}
}

// TestLinkAttributesWithoutCells: a link attribute whose cells are all
// gone gives every edge no value; a row_shape claiming wide rows then
// sizes no buffer of zeros (135 MB once; then an error), since an edge
// without a value takes no row: the column holds no bytes.
func TestLinkAttributesWithoutCells(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		rowShape string
	}{{"[]"}, {"[65536]"}} {
		t.Run(tc.rowShape, func(t *testing.T) {
			t.Parallel()
			dir := zvftest.CopyTree(t, "../testdata/zvf-0.9/graph_v09.zarrvectors")
			base := filepath.Join(dir, "0/link_attributes/weight/0")
			segs, err := os.ReadDir(base)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range segs {
				if !s.IsDir() {
					continue
				}
				p := filepath.Join(base, s.Name())
				b, err := os.ReadFile(filepath.Join(p, "zarr.json"))
				if err != nil {
					t.Fatal(err)
				}
				var meta map[string]any
				if err := json.Unmarshal(b, &meta); err != nil {
					t.Fatal(err)
				}
				attrs := meta["attributes"].(map[string]any)
				attrs["nonempty_chunks"] = []string{}
				var rs any
				_ = json.Unmarshal([]byte(tc.rowShape), &rs)
				attrs["row_shape"] = rs
				if b, err = json.Marshal(meta); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(p, "zarr.json"), b, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.RemoveAll(filepath.Join(p, "c")); err != nil {
					t.Fatal(err)
				}
			}
			l := zvftest.OpenLevel(t, zvftest.Store(t, dir), zvf.Options{Name: "g"}, 0)
			res, err := l.BBox(context.Background(), zvf.BBoxQuery{Min: []float64{-1e9, -1e9, -1e9}, Max: []float64{1e9, 1e9, 1e9}, Connectivity: true, LinkAttributes: []string{"*"}}, func(*zvf.Batch) error { return nil })
			if err != nil {
				t.Fatal(err)
			}
			col := res.EdgeAttributes[0]
			if len(res.Edges) != 2*516 || len(col.Valid) != 516 || slices.Contains(col.Valid, true) || cap(col.Data) != 0 {
				t.Fatalf("%d edges, valid %v, %d bytes", len(res.Edges)/2, col.Valid, cap(col.Data))
			}
			// validate warns of each links cell without values.
			rep := zvf.Validate(context.Background(), zvftest.Store(t, dir), "g", 5, nil)
			warned := 0
			for _, p := range rep.Problems {
				if p.Severity == "warning" && strings.HasPrefix(p.Path, "0/link_attributes/weight/0/") && strings.Contains(p.Message, "have no weight values") {
					warned += max(p.Count, 1)
				}
			}
			if warned == 0 || !rep.OK() {
				t.Fatalf("validate: %+v", rep.Problems)
			}
		})
	}
}

// TestLinkAttributesEveryCopy0_9 writes the round-trip graph as ZVF 0.9
// with canonical and with duplicate link families, then gives every
// stored link row — each copy of a duplicated record, intra rows too — a
// value of its own in a new attribute "h": a hash of its endpoints'
// positions in input order (perm_idx undone) and of the cell it is stored
// in. An answer's edge must carry the value of the copy the reader answers
// from (with duplicates the one in its first endpoint's chunk, else the
// only one), so a value from another copy, row or orientation shows.
func TestLinkAttributesEveryCopy0_9(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var g writer.Graph
	for i := range 80 {
		a := float64(i) * 0.37
		g.Positions = append(g.Positions, float32(15+12*math.Cos(a)), float32(15+12*math.Sin(a)), float32(i)*0.5)
		if i > 0 {
			g.Edges = append(g.Edges, int64(i), int64(i-1))
		}
		if i >= 7 && i%3 == 0 {
			g.Edges = append(g.Edges, int64(i-7), int64(i)) // against the chain's direction too
		}
	}
	st07, err := blobstore.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := writer.WriteGraph(ctx, st07, "", &g, writer.Options{ChunkShape: []float64{10, 10, 10}}); err != nil {
		t.Fatal(err)
	}
	hash := func(a, b, ks string) float32 {
		var h uint32 = 2166136261
		for _, c := range []byte(a + "|" + b + "|" + ks) {
			h = (h ^ uint32(c)) * 16777619
		}
		return float32(h % 1000003)
	}
	crossRows := map[bool]int{}
	for _, dup := range []bool{false, true} {
		t.Run(fmt.Sprint("duplicate=", dup), func(t *testing.T) {
			dir := t.TempDir()
			if err := zvftest.To09(ctx, st07, zvftest.Store(t, dir), zvftest.To09Options{Duplicate: dup}); err != nil {
				t.Fatal(err)
			}
			read := func(p string) []byte {
				b, err := os.ReadFile(filepath.Join(dir, "0", p))
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
			frame := func(b []byte) []byte { return b[8 : 8+binary.LittleEndian.Uint32(b[4:])] }
			vertex := func(ks string, row int64) string {
				b := frame(read("vertices/c/" + strings.ReplaceAll(ks, ".", "/")))
				p := make([]float32, 3)
				for c := range p {
					p[c] = math.Float32frombits(binary.LittleEndian.Uint32(b[12*row+4*int64(c):]))
				}
				return fmt.Sprint(p)
			}
			segs, err := os.ReadDir(filepath.Join(dir, "0/links/0"))
			if err != nil {
				t.Fatal(err)
			}
			copies := 0
			for _, s := range segs {
				if !s.IsDir() {
					continue
				}
				seg := s.Name()
				meta := map[string]any{}
				if err := json.Unmarshal(read("links/0/"+seg+"/zarr.json"), &meta); err != nil {
					t.Fatal(err)
				}
				attrs := meta["attributes"].(map[string]any)
				if _, ok := attrs["chunk_grid_origin"]; ok {
					t.Fatal("a grid origin: the test reads cell files by chunk key")
				}
				off := []int64{0, 0, 0}
				for i, c := range strings.Split(seg, ".") {
					off[i], _ = strconv.ParseInt(strings.TrimPrefix(c, "+"), 10, 64)
				}
				out := filepath.Join(dir, "0/link_attributes/h/0", seg)
				err := filepath.WalkDir(filepath.Join(dir, "0/links/0", seg, "c"), func(p string, d os.DirEntry, err error) error {
					if err != nil || d.IsDir() {
						return err
					}
					rel, _ := filepath.Rel(filepath.Join(dir, "0/links/0", seg, "c"), p)
					ks := strings.ReplaceAll(rel, "/", ".")
					var key [3]int64
					for i, c := range strings.Split(ks, ".") {
						key[i], _ = strconv.ParseInt(c, 10, 64)
					}
					other := fmt.Sprintf("%d.%d.%d", key[0]+off[0], key[1]+off[1], key[2]+off[2])
					payload := frame(read("links/0/" + seg + "/c/" + rel))
					var w []float32
					if seg == "0.0.0" {
						for r := 0; r+16 <= len(payload); r += 16 {
							a, b := int64(binary.LittleEndian.Uint64(payload[r:])), int64(binary.LittleEndian.Uint64(payload[r+8:]))
							w = append(w, hash(vertex(ks, a), vertex(ks, b), ks))
						}
					} else {
						k := int64(binary.LittleEndian.Uint64(payload))
						rows := payload[8+8*k:]
						for r := 0; r+24 <= len(rows); r += 24 {
							perm := binary.LittleEndian.Uint64(rows[r:])
							a, b := vertex(ks, int64(binary.LittleEndian.Uint64(rows[r+8:]))), vertex(other, int64(binary.LittleEndian.Uint64(rows[r+16:])))
							if perm == 1 {
								a, b = b, a // stored swapped: input order is (other, source)
							}
							w = append(w, hash(a, b, ks))
							copies++
						}
					}
					cell := binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, 1), uint32(4*len(w)))
					for _, v := range w {
						cell = binary.LittleEndian.AppendUint32(cell, math.Float32bits(v))
					}
					if err := os.MkdirAll(filepath.Dir(filepath.Join(out, "c", rel)), 0o755); err != nil {
						return err
					}
					return os.WriteFile(filepath.Join(out, "c", rel), cell, 0o644)
				})
				if err != nil {
					t.Fatal(err)
				}
				attrs["zv_array"], attrs["name"], attrs["dtype"], attrs["row_shape"] = "link_attribute", "h", "float32", []int{}
				delete(attrs, "has_perm")
				delete(attrs, "link_width")
				b, err := json.Marshal(meta)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(out, "zarr.json"), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if copies == 0 {
				t.Fatal("no cross-chunk link rows: the test tests nothing")
			}
			crossRows[dup] = copies
			l := zvftest.OpenLevel(t, zvftest.Store(t, dir), zvf.Options{Name: "h"}, 0)
			chunkOf := func(p string) string {
				var x, y, z float64
				fmt.Sscan(strings.Trim(p, "[]"), &x, &y, &z)
				return fmt.Sprintf("%d.%d.%d", int(math.Floor(x/10)), int(math.Floor(y/10)), int(math.Floor(z/10)))
			}
			// The copy an edge's value comes from: with duplicates the one
			// in its first endpoint's chunk; canonically the only one, in
			// the chunk that sorts first.
			stored := func(a, b string) string {
				ca, cb := chunkOf(a), chunkOf(b)
				if dup {
					return ca
				}
				var ka, kb [3]int
				fmt.Sscanf(ca, "%d.%d.%d", &ka[0], &ka[1], &ka[2])
				fmt.Sscanf(cb, "%d.%d.%d", &kb[0], &kb[1], &kb[2])
				if slices.Compare(kb[:], ka[:]) < 0 {
					return cb
				}
				return ca
			}
			var verts []string
			res, err := l.BBox(ctx, zvf.BBoxQuery{Min: []float64{-1e9, -1e9, -1e9}, Max: []float64{1e9, 1e9, 1e9}, Connectivity: true, LinkAttributes: []string{"h"}, Limit: 37}, func(b *zvf.Batch) error {
				for i := 0; i < b.Rows; i++ {
					verts = append(verts, fmt.Sprint([]float32{float32(b.Vertices.At(3 * i).F), float32(b.Vertices.At(3*i + 1).F), float32(b.Vertices.At(3*i + 2).F)}))
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			edges, checked := res.Edges, 0
			cols := res.EdgeAttributes
			for res.More {
				q := zvf.BBoxQuery{Min: []float64{-1e9, -1e9, -1e9}, Max: []float64{1e9, 1e9, 1e9}, Connectivity: true, LinkAttributes: []string{"h"}, Limit: 37, Resume: res.Next}
				if res, err = l.BBox(ctx, q, func(b *zvf.Batch) error {
					for i := 0; i < b.Rows; i++ {
						verts = append(verts, fmt.Sprint([]float32{float32(b.Vertices.At(3 * i).F), float32(b.Vertices.At(3*i + 1).F), float32(b.Vertices.At(3*i + 2).F)}))
					}
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				for i := 0; i < len(res.Edges)/2; i++ {
					a, b := verts[res.Edges[2*i]], verts[res.Edges[2*i+1]]
					if got, want := float32(res.EdgeAttributes[0].At(i).F), hash(a, b, stored(a, b)); got != want {
						t.Fatalf("edge %s → %s: h %v, want %v (its copy in %s)", a, b, got, want, stored(a, b))
					}
					checked++
				}
			}
			for i := 0; i < len(edges)/2; i++ {
				a, b := verts[edges[2*i]], verts[edges[2*i+1]]
				if got, want := float32(cols[0].At(i).F), hash(a, b, stored(a, b)); got != want {
					t.Fatalf("edge %s → %s: h %v, want %v (its copy in %s)", a, b, got, want, stored(a, b))
				}
				checked++
			}
			if checked != len(g.Edges)/2 {
				t.Fatalf("%d edges checked, the graph has %d", checked, len(g.Edges)/2)
			}
		})
	}
	if crossRows[true] != 2*crossRows[false] {
		t.Fatalf("%d cross-chunk rows stored with duplicates, %d without: not a copy per endpoint chunk", crossRows[true], crossRows[false])
	}
}

// TestLinkAttributesAbsentValuesAreBounded: one stored wide value (a row
// of 4,096 float64) and 600 edges without one (a ZVF 0.7 writer keeps no
// values for cross-chunk edges) made the answer allocate 600 rows of
// zeros, 19 MB here and gigabytes for a large box; then it was refused.
// An edge without a value now takes no row: the box is answered, its
// column holding the one stored row (32 KiB) and a byte an edge.
func TestLinkAttributesAbsentValuesAreBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var g writer.Graph
	const n, width = 601, 4096
	for i := range n + 1 {
		// Even vertices in one chunk, odd ones in the next: every edge
		// (i, i+1) crosses chunks; (0, 2) alone does not.
		g.Positions = append(g.Positions, float32(5+10*(i%2)), 5, float32(i)*0.01)
	}
	g.Edges = append(g.Edges, 0, 2)
	for i := range n - 1 {
		g.Edges = append(g.Edges, int64(i), int64(i+1))
	}
	data := make([]byte, 8*width*(len(g.Edges)/2))
	for e := range len(g.Edges) / 2 {
		binary.LittleEndian.PutUint64(data[8*width*e:], math.Float64bits(float64(e+1)))
	}
	g.LinkAttributes = []writer.Attribute{{Name: "wide", DType: "float64", Channels: width, Data: data}}
	st, err := blobstore.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := writer.WriteGraph(ctx, st, "", &g, writer.Options{ChunkShape: []float64{10, 10, 10}}); err != nil {
		t.Fatal(err)
	}
	l := zvftest.OpenLevel(t, st, zvf.Options{Name: "wide"}, 0)
	q := zvf.BBoxQuery{Min: []float64{0, 0, 0}, Max: []float64{20, 10, 10}, Connectivity: true, LinkAttributes: []string{"*"}}
	res, err := l.BBox(ctx, q, func(*zvf.Batch) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	col := res.EdgeAttributes[0]
	ne := len(res.Edges) / 2
	if ne != len(g.Edges)/2 || col.Channels != width || col.Edges() != ne || len(col.Valid) != ne {
		t.Fatalf("%d edges, column %d channels for %d edges, valid %d", ne, col.Channels, col.Edges(), len(col.Valid))
	}
	// Every edge but (0, 2) has no value, and takes no row.
	if cap(col.Data) != 8*width || strings.Count(fmt.Sprint(col.Valid), "true") != 1 {
		t.Fatalf("%d bytes for %d edges (%d × %d bytes without values)", cap(col.Data), ne, ne-1, col.RowBytes())
	}
	for i := range ne {
		// The one value is the edge (0, 2)'s: 1 in its first channel.
		if col.Has(i) && (col.At(i*width).F != 1 || len(col.Row(i)) != 8*width) {
			t.Fatalf("edge %d: %v, want edge 0's 1", i, col.At(i*width).F)
		}
		if !col.Has(i) && (col.At(i*width+7).F != 0 || col.Row(i) != nil) {
			t.Fatalf("edge %d without a value: %v", i, col.At(i*width+7).F)
		}
	}
}
