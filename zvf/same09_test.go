package zvf_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// unpacked07 are the 0.7 reference stores To09 rewrites (not the
// __shard_-packed ones).
var unpacked07 = []string{"points_bins", "points_bins_zstd", "points_bins_blosc", "points_pyramid", "quirk_points_objects_bins", "polylines", "graph", "skeleton", "mesh"}

// to09 rewrites reference store name as ZVF 0.9 into a fresh mem:// bucket.
func to09(t testing.TB, name string, o zvftest.To09Options) storage.Store {
	t.Helper()
	ctx := context.Background()
	src := zvftest.Store(t, filepath.Join(fixtures, name+".zarrvectors"))
	dst := zvftest.Store(t, "mem://")
	if err := zvftest.To09(ctx, src, dst, o); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestSameAnswersIn09: every 0.7 reference store, rewritten as ZVF 0.9 —
// plainly, and with duplicate link copies, a grid origin away from zero,
// no nonempty_chunks (cells found by listing) and zstd cells — answers
// exactly as the original: chunk keys, every level's vertices, attributes,
// object ids, edges and faces (with winding), boxes, every object,
// manifest, group and tile, and validates clean.
func TestSameAnswersIn09(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	variants := map[string]zvftest.To09Options{
		"plain":  {},
		"varied": {Duplicate: true, Pad: 2, OmitNonempty: true, Codecs: []string{`{"name":"zstd","configuration":{"level":0,"checksum":false}}`}},
	}
	for _, name := range unpacked07 {
		for vn, o := range variants {
			t.Run(name+"/"+vn, func(t *testing.T) {
				t.Parallel()
				old, _ := ref07.open(t, name)
				st := to09(t, name, o)
				s, err := zvf.Open(ctx, st, zvf.Options{Name: name, Cache: cache.New(256 << 20)})
				if err != nil {
					t.Fatal(err)
				}
				if s.Info().Layout != zvf.LayoutChunkGrid || old.Info().Layout != zvf.LayoutChunkArrays {
					t.Fatalf("layouts %q and %q", old.Info().Layout, s.Info().Layout)
				}
				for _, n := range old.Levels() {
					a, _ := old.Level(n)
					b, err := s.Level(n)
					if err != nil {
						t.Fatal(err)
					}
					sameLevel(t, a, b)
				}
				if rep := zvf.Validate(ctx, st, name, 5, nil); !rep.OK() {
					t.Fatalf("validate: %+v", rep.Problems)
				}
			})
		}
	}
}

// sameRowBits reports whether a and b hold the same rows, bit for bit
// (what comparing their printed forms told, at a fraction of the cost).
func sameRowBits(a, b [][3]float32) bool {
	return slices.EqualFunc(a, b, func(x, y [3]float32) bool {
		for i := range x {
			if math.Float32bits(x[i]) != math.Float32bits(y[i]) {
				return false
			}
		}
		return true
	})
}

// sameAttrs reports whether a and b hold the same columns of decoded
// values: floats bit for bit, anything else by its printed form.
func sameAttrs(a, b map[string][]any) bool {
	if len(a) != len(b) {
		return false
	}
	for k, x := range a {
		y, ok := b[k]
		if !ok || !slices.EqualFunc(x, y, func(v, w any) bool {
			if fv, ok := v.(float64); ok {
				fw, ok := w.(float64)
				return ok && math.Float64bits(fv) == math.Float64bits(fw)
			}
			return fmt.Sprint(v) == fmt.Sprint(w)
		}) {
			return false
		}
	}
	return true
}

func sameLevel(t *testing.T, a, b *zvf.Level) {
	t.Helper()
	ctx := context.Background()
	ia, ib := *a.Info(), *b.Info()
	ia.LinkDeltas, ib.LinkDeltas = nil, nil // 0.7 lists cross-chunk deltas, 0.9 every links family
	if fmt.Sprint(ia) != fmt.Sprint(ib) {
		t.Fatalf("level %d info\n0.7 %+v\n0.9 %+v", a.N(), ia, ib)
	}
	if fmt.Sprint(a.Keys()) != fmt.Sprint(b.Keys()) {
		t.Fatalf("level %d keys differ", a.N())
	}
	boxes := [][2][]float64{{everywhere.min, everywhere.max}}
	if bb := a.Info(); len(a.Keys()) > 0 {
		k := a.Keys()[len(a.Keys())/2]
		lo := make([]float64, 3)
		hi := make([]float64, 3)
		for i := range lo {
			lo[i] = float64(k[i])*bb.ChunkShape[i] - bb.ChunkShape[i]/3
			hi[i] = lo[i] + 1.5*bb.ChunkShape[i]
		}
		boxes = append(boxes, [2][]float64{lo, hi})
	}
	for _, box := range boxes {
		x := bbox(t, a, box[0], box[1], []string{"*"}, true)
		y := bbox(t, b, box[0], box[1], []string{"*"}, true)
		if !sameRowBits(x.rows, y.rows) || !slices.Equal(x.ids, y.ids) || !sameAttrs(x.attrs, y.attrs) {
			t.Fatalf("level %d box %v: %d rows, 0.9 %d", a.N(), box, len(x.rows), len(y.rows))
		}
		if !slices.Equal(canonEdges(x.rows, x.edges, true), canonEdges(y.rows, y.edges, true)) || x.fw != y.fw ||
			!slices.Equal(canonFaces(x.rows, x.faces, x.fw), canonFaces(y.rows, y.faces, y.fw)) {
			t.Fatalf("level %d box %v: %d edges, %d faces; 0.9 %d, %d", a.N(), box, len(x.edges)/2, len(x.faces), len(y.edges)/2, len(y.faces))
		}
	}
	for id := int64(0); id < min(a.Info().ObjectCount, 40); id++ {
		oa, ea := a.Object(ctx, id, []string{"*"})
		ob, eb := b.Object(ctx, id, []string{"*"})
		if (ea == nil) != (eb == nil) || (ea != nil && !errors.Is(eb, zvf.ErrNotFound) && !errors.Is(ea, eb)) {
			t.Fatalf("object %d: %v / %v", id, ea, eb)
		}
		if ea != nil {
			continue
		}
		ra, rb := f32rows(oa.Vertices.Data), f32rows(ob.Vertices.Data)
		if !sameRowBits(ra, rb) || fmt.Sprint(oa.FragmentCounts) != fmt.Sprint(ob.FragmentCounts) ||
			!slices.Equal(canonEdges(ra, oa.Edges, true), canonEdges(rb, ob.Edges, true)) ||
			!slices.Equal(canonFaces(ra, oa.Faces, max(oa.FaceWidth, 1)), canonFaces(rb, ob.Faces, max(ob.FaceWidth, 1))) {
			t.Fatalf("object %d differs: %d vertices, %d edges, %d faces; 0.9 %d, %d, %d", id, len(ra), len(oa.Edges), len(oa.Faces), len(rb), len(ob.Edges), len(ob.Faces))
		}
		if len(oa.Attributes) != len(ob.Attributes) || len(oa.ObjectAttributes) != len(ob.ObjectAttributes) {
			t.Fatalf("object %d: %d/%d attributes, 0.9 %d/%d", id, len(oa.Attributes), len(oa.ObjectAttributes), len(ob.Attributes), len(ob.ObjectAttributes))
		}
		for i := range oa.Attributes {
			if !bytes.Equal(oa.Attributes[i].Data, ob.Attributes[i].Data) {
				t.Fatalf("object %d attribute %s differs", id, oa.Attributes[i].Name)
			}
		}
		for i := range oa.ObjectAttributes {
			if oa.ObjectAttributes[i].Name != ob.ObjectAttributes[i].Name || !bytes.Equal(oa.ObjectAttributes[i].Data, ob.ObjectAttributes[i].Data) {
				t.Fatalf("object %d object attribute %s differs", id, oa.ObjectAttributes[i].Name)
			}
		}
		ma, _ := a.Manifest(ctx, id)
		mb, _ := b.Manifest(ctx, id)
		if fmt.Sprint(ma) != fmt.Sprint(mb) {
			t.Fatalf("object %d manifest differs", id)
		}
	}
	for g := int64(0); g < a.Info().GroupCount; g++ {
		ga, _ := a.Group(ctx, g)
		gb, err := b.Group(ctx, g)
		if err != nil || fmt.Sprint(ga) != fmt.Sprint(gb) {
			t.Fatalf("group %d: %v, 0.9 %v (%v)", g, ga, gb, err)
		}
	}
	for _, k := range a.Keys() {
		ta, _ := a.Chunk(ctx, k, []string{"*"})
		tb, err := b.Chunk(ctx, k, []string{"*"})
		if err != nil {
			t.Fatalf("tile %s: %v", k, err)
		}
		if fmt.Sprint(ta.Fragments, ta.Links, ta.LinkWidth, ta.Rows) != fmt.Sprint(tb.Fragments, tb.Links, tb.LinkWidth, tb.Rows) || !bytes.Equal(ta.Vertices.Data, tb.Vertices.Data) || len(ta.Attributes) != len(tb.Attributes) {
			t.Fatalf("tile %s differs", k)
		}
	}
}
