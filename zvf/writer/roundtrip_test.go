package writer

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// Round trips: every geometry is written, opened with the project's reader
// (package zvf) and read back object by object (and by bounding box for
// binned points); what comes back must equal the input.

func openStore(t *testing.T, ms *memStore) *zvf.Store {
	t.Helper()
	st, err := zvf.Open(context.Background(), ms, zvf.Options{Name: "roundtrip"})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func readLevel(t *testing.T, st *zvf.Store, n int) *zvf.Level {
	t.Helper()
	l, err := st.Level(n)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// rowKey renders a vertex row plus its attribute bytes, so multisets of
// rows with their attributes compare as sorted string slices.
func rowKeys(vertices []byte, attrs [][]byte, rowSizes []int) []string {
	n := len(vertices) / 12
	out := make([]string, n)
	for i := range n {
		var b bytes.Buffer
		b.Write(vertices[12*i : 12*i+12])
		for a, col := range attrs {
			b.Write(col[rowSizes[a]*i : rowSizes[a]*(i+1)])
		}
		out[i] = b.String()
	}
	slices.Sort(out)
	return out
}

// sceneRand makes a small scattered input with negative coordinates and
// points exactly on chunk borders.
func scenePoints(r *rand.Rand, n int) []float32 {
	pos := make([]float32, 3*n)
	for i := range pos {
		if r.IntN(10) == 0 {
			pos[i] = float32(r.IntN(5)*20 - 40) // on a chunk border
		} else {
			pos[i] = float32(r.Float64()*140 - 40)
		}
	}
	return pos
}

func TestRoundTripPoints(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 6))
	ctx := context.Background()
	n := 1500
	pos := scenePoints(r, n)
	inten := make([]float32, n)
	rgb := make([]uint8, 3*n)
	names := make([]string, n)
	ids := make([]int64, n)
	for i := range n {
		inten[i] = float32(r.NormFloat64())
		rgb[3*i], rgb[3*i+1], rgb[3*i+2] = uint8(r.IntN(256)), uint8(r.IntN(256)), uint8(r.IntN(256))
		names[i] = []string{"neuron", "glia", "vessel"}[r.IntN(3)]
		ids[i] = int64(r.IntN(25))
	}
	attrs := []Attribute{Float32Attribute("intensity", 1, inten), Uint8Attribute("rgb", 3, rgb), CategoricalAttribute("kind", names)}
	box := zvf.BBoxQuery{Min: []float64{-1e9, -1e9, -1e9}, Max: []float64{1e9, 1e9, 1e9}, Attributes: []string{"*"}}

	for _, objects := range []bool{false, true} {
		for _, codec := range []Codec{CodecNone, CodecZstd, CodecBlosc} {
			t.Run(fmt.Sprintf("objects=%v/%v", objects, codec), func(t *testing.T) {
				t.Parallel()
				pc := &PointCloud{Positions: pos, Attributes: attrs}
				volume := make([]float32, 25)
				for i := range volume {
					volume[i] = float32(i) * 1.5
				}
				if objects {
					pc.ObjectIDs = ids
					pc.ObjectAttributes = []Attribute{Float32Attribute("volume", 1, volume)}
					pc.Groups = [][]int64{{0, 3, 5}, {}, {24}}
				}
				ms := newMemStore()
				sum, err := WritePoints(ctx, ms, "", pc, Options{ChunkShape: []float64{20, 20, 20}, BinShape: []float64{10, 10, 10},
					Codec: codec, Pyramid: []PyramidLevel{{Coarsen: 2}, {Coarsen: 8}}})
				if err != nil {
					t.Fatal(err)
				}
				st := openStore(t, ms)
				l0 := readLevel(t, st, 0)

				// Whole-store box: every row with its attributes.
				var gotV []byte
				gotA := make([][]byte, 3)
				res, err := l0.BBox(ctx, box, func(b *zvf.Batch) error {
					gotV = append(gotV, b.Vertices.Data...)
					for i, c := range b.Attributes {
						gotA[slices.IndexFunc(attrs, func(a Attribute) bool { return a.Name == c.Name })] =
							append(gotA[slices.IndexFunc(attrs, func(a Attribute) bool { return a.Name == c.Name })], b.Attributes[i].Data...)
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				sizes := []int{4, 3, 1}
				want := rowKeys(zvftest.Float32LE(pos), [][]byte{attrs[0].Data, attrs[1].Data, attrs[2].Data}, sizes)
				if got := rowKeys(gotV, gotA, sizes); res.Count != int64(n) || !slices.Equal(got, want) {
					t.Fatalf("bbox read %d rows, want %d (rows equal: %v)", res.Count, n, slices.Equal(got, want))
				}
				// A box strictly inside: the reader's answer equals the
				// brute-force closed-box filter of the input.
				sub := zvf.BBoxQuery{Min: []float64{-5, 0, 10}, Max: []float64{40, 60, 80}}
				res, err = l0.BBox(ctx, sub, func(*zvf.Batch) error { return nil })
				if err != nil {
					t.Fatal(err)
				}
				var brute int64
				for i := range n {
					in := true
					for a := range 3 {
						v := float64(pos[3*i+a])
						in = in && v >= sub.Min[a] && v <= sub.Max[a]
					}
					if in {
						brute++
					}
				}
				if res.Count != brute {
					t.Fatalf("sub-box: %d rows, brute force %d", res.Count, brute)
				}
				for lv, ls := range sum.Levels {
					if got := readLevel(t, st, lv).Info().VertexCount; got != int64(ls.VertexCount) {
						t.Errorf("level %d: reader says %d vertices, writer %d", lv, got, ls.VertexCount)
					}
				}
				if !objects {
					return
				}
				for oid := int64(0); oid < 25; oid += 3 {
					o := zvftest.Object(t, l0, oid, []string{"*"})
					var wv []float32
					var wa [3][]byte
					for i, id := range ids {
						if id == oid {
							wv = append(wv, pos[3*i:3*i+3]...)
							for a := range 3 {
								wa[a] = append(wa[a], attrs[a].Data[sizes[a]*i:sizes[a]*(i+1)]...)
							}
						}
					}
					ga := make([][]byte, 3)
					for _, c := range o.Attributes {
						ga[slices.IndexFunc(attrs, func(a Attribute) bool { return a.Name == c.Name })] = c.Data
						if c.Name == "kind" && !slices.Equal(c.Categories, attrs[2].Categories) {
							t.Fatalf("categories %v", c.Categories)
						}
					}
					if !slices.Equal(rowKeys(o.Vertices.Data, ga, sizes), rowKeys(zvftest.Float32LE(wv), wa[:], sizes)) {
						t.Fatalf("object %d: rows differ (%d vs %d)", oid, o.Count, len(wv)/3)
					}
					if len(o.ObjectAttributes) != 1 || !bytes.Equal(o.ObjectAttributes[0].Data, zvftest.Float32LE(volume[oid:oid+1])) {
						t.Fatalf("object %d attributes %+v", oid, o.ObjectAttributes)
					}
					// Coarse levels keep every object (sparsity 1).
					if has, err := readLevel(t, st, 2).HasObject(ctx, oid); err != nil || has != (len(wv) > 0) {
						t.Fatalf("object %d at level 2: %v %v", oid, has, err)
					}
				}
				for gid, members := range pc.Groups {
					got, err := l0.Group(ctx, int64(gid))
					if err != nil || !slices.Equal(got, members) && len(members) > 0 {
						t.Fatalf("group %d: %v %v, want %v", gid, got, err, members)
					}
				}
			})
		}
	}
}

// polylineInput is a bundle of random walks crossing bins and chunks.
func polylineInput(r *rand.Rand, np int) *Polylines {
	pl := &Polylines{Offsets: []int{0}}
	var fa []float32
	for range np {
		p := [3]float64{r.Float64() * 50, r.Float64() * 50, r.Float64() * 50}
		for range 1 + r.IntN(60) {
			for a := range 3 {
				p[a] += r.NormFloat64() * 4
			}
			pl.Positions = append(pl.Positions, float32(p[0]), float32(p[1]), float32(p[2]))
			fa = append(fa, float32(r.Float64()))
		}
		pl.Offsets = append(pl.Offsets, len(pl.Positions)/3)
	}
	pl.Attributes = []Attribute{Float32Attribute("fa", 1, fa)}
	return pl
}

func TestRoundTripPolylines(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 8))
	ctx := context.Background()
	pl := polylineInput(r, 40)
	ms := newMemStore()
	if _, err := WritePolylines(ctx, ms, "", pl, Options{ChunkShape: []float64{20, 20, 20}, BinShape: []float64{5, 5, 5},
		Pyramid: []PyramidLevel{{Coarsen: 4}}}); err != nil {
		t.Fatal(err)
	}
	st := openStore(t, ms)
	l0 := readLevel(t, st, 0)
	for p := range len(pl.Offsets) - 1 {
		o := zvftest.Object(t, l0, int64(p), []string{"fa"})
		a, b := pl.Offsets[p], pl.Offsets[p+1]
		if !bytes.Equal(o.Vertices.Data, zvftest.Float32LE(pl.Positions[3*a:3*b])) {
			t.Fatalf("polyline %d: vertices differ", p)
		}
		if !bytes.Equal(o.Attributes[0].Data, pl.Attributes[0].Data[4*a:4*b]) {
			t.Fatalf("polyline %d: fa differs", p)
		}
		if len(o.Edges) != 2*max(0, b-a-1) {
			t.Fatalf("polyline %d: %d edge values for %d vertices", p, len(o.Edges), b-a)
		}
	}
}

// treeInput builds trees (node-sorted object ids, parents before children,
// edges [child, parent]).
func treeInput(r *rand.Rand, trees int) *Graph {
	g := &Graph{}
	for oid := range int64(trees) {
		root := int64(len(g.Positions) / 3)
		g.Positions = append(g.Positions, float32(r.Float64()*60), float32(r.Float64()*60), float32(r.Float64()*60))
		g.ObjectIDs = append(g.ObjectIDs, oid)
		for range 20 + r.IntN(80) {
			idx := int64(len(g.Positions) / 3)
			parent := root + r.Int64N(idx-root)
			if r.IntN(3) > 0 {
				parent = idx - 1 // mostly chains, some branches
			}
			pp := g.Positions[3*parent : 3*parent+3]
			g.Positions = append(g.Positions, pp[0]+float32(r.NormFloat64()*3), pp[1]+float32(r.NormFloat64()*3), pp[2]+float32(r.NormFloat64()*3))
			g.ObjectIDs = append(g.ObjectIDs, oid)
			g.Edges = append(g.Edges, idx, parent)
		}
	}
	w := make([]float32, len(g.Edges)/2)
	for i := range w {
		w[i] = float32(i)
	}
	g.LinkAttributes = []Attribute{Float32Attribute("weight", 1, w)}
	return g
}

func TestRoundTripGraphs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, skeleton := range []bool{false, true} {
		t.Run(fmt.Sprintf("skeleton=%v", skeleton), func(t *testing.T) {
			g := treeInput(rand.New(rand.NewPCG(9, 10)), 6)
			g.Skeleton = skeleton
			if !skeleton {
				// A general graph: add cycles across chunks.
				n := int64(len(g.Positions) / 3)
				for i := int64(0); i+7 < n; i += 7 {
					if g.ObjectIDs[i] == g.ObjectIDs[i+7] {
						g.Edges = append(g.Edges, i, i+7)
					}
				}
				g.LinkAttributes = nil
			}
			ms := newMemStore()
			if _, err := WriteGraph(ctx, ms, "", g, Options{ChunkShape: []float64{15, 15, 15},
				Pyramid: []PyramidLevel{{Coarsen: 2}}}); err != nil {
				t.Fatal(err)
			}
			l0 := readLevel(t, openStore(t, ms), 0)
			pos := zvftest.Float32LE(g.Positions)
			for oid := range int64(6) {
				o := zvftest.Object(t, l0, oid, nil)
				var wantV []string
				var wantE []int64
				for i, id := range g.ObjectIDs {
					if id == oid {
						wantV = append(wantV, string(pos[12*i:12*i+12]))
					}
				}
				for e := 0; e < len(g.Edges); e += 2 {
					if g.ObjectIDs[g.Edges[e]] == oid {
						wantE = append(wantE, g.Edges[e], g.Edges[e+1])
					}
				}
				gotV := rowKeys(o.Vertices.Data, nil, nil)
				slices.Sort(wantV)
				if !slices.Equal(gotV, wantV) {
					t.Fatalf("object %d: vertices differ", oid)
				}
				if got, want := zvftest.EdgeSet(o.Vertices.Data, o.Edges), zvftest.EdgeSet(pos, wantE); !slices.Equal(got, want) {
					t.Fatalf("object %d: %d edges read, %d written", oid, len(got), len(want))
				}
			}
		})
	}
}

func TestRoundTripMesh(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Two grids (objects) folded across chunk borders.
	m := &Mesh{FaceWidth: 3, FragmentPerObject: true}
	for oid := range int64(2) {
		base := int64(len(m.Positions) / 3)
		for i := range 12 {
			for j := range 12 {
				m.Positions = append(m.Positions, float32(i)*3+float32(oid)*5, float32(j)*3, float32((i*j)%7)+float32(oid)*20)
				m.ObjectIDs = append(m.ObjectIDs, oid)
			}
		}
		for i := range int64(11) {
			for j := range int64(11) {
				a := base + i*12 + j
				m.Faces = append(m.Faces, a, a+12, a+1, a+1, a+12, a+13)
			}
		}
	}
	ms := newMemStore()
	if _, err := WriteMesh(ctx, ms, "", m, Options{ChunkShape: []float64{10, 10, 10}}); err != nil {
		t.Fatal(err)
	}
	l0 := readLevel(t, openStore(t, ms), 0)
	pos := zvftest.Float32LE(m.Positions)
	for oid := range int64(2) {
		o := zvftest.Object(t, l0, oid, nil)
		if o.Count != 144 {
			t.Fatalf("object %d: %d vertices, want 144", oid, o.Count)
		}
		want := m.Faces[oid*6*121 : (oid+1)*6*121]
		if got := zvftest.FaceSet(o.Vertices.Data, o.Faces, o.FaceWidth); !slices.Equal(got, zvftest.FaceSet(pos, want, 3)) {
			t.Fatalf("object %d: %d faces read, %d written", oid, len(got), len(want)/3)
		}
	}
}
