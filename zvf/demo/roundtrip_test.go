package demo

import (
	"bytes"
	"context"
	"slices"
	"testing"

	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// TestDemoRoundTrip builds the demo into a memory store (the way the
// server does at start-up), opens every store at its prefix (storage.Sub)
// with the zvf reader and checks objects against the generated scene.
func TestDemoRoundTrip(t *testing.T) {
	ctx := context.Background()
	bucket := zvftest.Store(t, "mem://")
	o := Options{Seed: 11, Scale: 0.08}
	infos, err := Build(ctx, bucket, o)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	open := func(name string) *zvf.Level {
		t.Helper()
		st, err := zvf.Open(ctx, storage.Sub(bucket, name), zvf.Options{Name: name})
		if err != nil {
			t.Fatalf("open %s: %v", name, err)
		}
		if got := len(st.Levels()); got != 3 {
			t.Fatalf("%s: %d levels", name, got)
		}
		for _, in := range infos {
			if in.Name == name && st.Info().Levels[0].VertexCount != int64(in.Vertices) {
				t.Fatalf("%s: reader counts %d vertices, writer %d", name, st.Info().Levels[0].VertexCount, in.Vertices)
			}
		}
		l, err := st.Level(0)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}

	t.Run("cells", func(t *testing.T) {
		l := open("cells")
		c := sc.Cells
		for oid := int64(0); oid < int64(len(c.ObjectAttributes[0].Data)/4); oid += 7 {
			ob := zvftest.Object(t, l, oid, []string{"cell_type"})
			var want []float32
			var types []byte
			for i, id := range c.ObjectIDs {
				if id == oid {
					want = append(want, c.Positions[3*i:3*i+3]...)
					types = append(types, c.Attributes[0].Data[i])
				}
			}
			if !slices.Equal(sortedRows(ob.Vertices.Data), sortedRows(zvftest.Float32LE(want))) {
				t.Fatalf("cell %d: %d rows read, %d generated", oid, ob.Count, len(want)/3)
			}
			got := ob.Attributes[0]
			if got.Categories[got.Data[0]] != c.Attributes[0].Categories[types[0]] {
				t.Fatalf("cell %d: type %q, want %q", oid, got.Categories[got.Data[0]], c.Attributes[0].Categories[types[0]])
			}
		}
	})
	t.Run("axons", func(t *testing.T) {
		l := open("axons")
		a := sc.Axons
		for p := range len(a.Offsets) - 1 {
			ob := zvftest.Object(t, l, int64(p), nil)
			if !bytes.Equal(ob.Vertices.Data, zvftest.Float32LE(a.Positions[3*a.Offsets[p]:3*a.Offsets[p+1]])) {
				t.Fatalf("axon %d differs", p)
			}
		}
	})
	t.Run("skeletons", func(t *testing.T) {
		l := open("skeletons")
		g := sc.Skeletons
		pos := zvftest.Float32LE(g.Positions)
		for oid := int64(0); oid <= g.ObjectIDs[len(g.ObjectIDs)-1]; oid++ {
			ob := zvftest.Object(t, l, oid, nil)
			want := linksOf(g.Edges, 2, g.ObjectIDs, oid)
			if got, w := zvftest.EdgeSet(ob.Vertices.Data, ob.Edges), zvftest.EdgeSet(pos, want); !slices.Equal(got, w) {
				t.Fatalf("skeleton %d: %d edges read, %d generated", oid, len(got), len(w))
			}
		}
	})
	t.Run("meshes", func(t *testing.T) {
		l := open("meshes")
		m := sc.Meshes
		pos := zvftest.Float32LE(m.Positions)
		for oid := int64(0); oid <= m.ObjectIDs[len(m.ObjectIDs)-1]; oid++ {
			ob := zvftest.Object(t, l, oid, nil)
			want := linksOf(m.Faces, 3, m.ObjectIDs, oid)
			if got, w := zvftest.FaceSet(ob.Vertices.Data, ob.Faces, 3), zvftest.FaceSet(pos, want, 3); !slices.Equal(got, w) {
				t.Fatalf("mesh %d: %d faces read, %d generated", oid, len(got), len(w))
			}
		}
	})
}

// linksOf is the links (edges: width 2, faces: 3) whose first vertex
// belongs to object oid, as the generator wrote them.
func linksOf(links []int64, width int, objectIDs []int64, oid int64) []int64 {
	var out []int64
	for i := 0; i < len(links); i += width {
		if objectIDs[links[i]] == oid {
			out = append(out, links[i:i+width]...)
		}
	}
	return out
}

func sortedRows(b []byte) []string {
	out := make([]string, len(b)/12)
	for i := range out {
		out[i] = string(b[12*i : 12*i+12])
	}
	slices.Sort(out)
	return out
}
