package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/memstore"
)

// built is a demo written into a memory store (as the server builds it), keys read back, and
// what Build said of its stores.
type built struct {
	m     map[string][]byte
	infos []StoreInfo
}

func build(t testing.TB, o Options) (*built, []StoreInfo) {
	t.Helper()
	b, err := buildInMemory(o)
	if err != nil {
		t.Fatal(err)
	}
	return b, b.infos
}

// seed7 is the demo of seed 7 at scale 0.2, built once for the tests
// that only read it.
var seed7 = sync.OnceValues(func() (*built, error) { return buildInMemory(Options{Seed: 7, Scale: 0.2}) })

func sharedSeed7(t *testing.T) (*built, []StoreInfo) {
	t.Helper()
	b, err := seed7()
	if err != nil {
		t.Fatal(err)
	}
	return b, b.infos
}

func buildInMemory(o Options) (_ *built, err error) {
	ctx := context.Background()
	st := memstore.New()
	defer func() {
		if cerr := st.Close(); err == nil {
			err = cerr
		}
	}()
	infos, err := Build(ctx, st, o)
	if err != nil {
		return nil, err
	}
	out := &built{m: map[string][]byte{}, infos: infos}
	err = st.Walk(ctx, "", func(key string, a storage.Attrs) (err error) {
		out.m[key], err = storage.ReadAll(ctx, st, key, max(a.Size, 1))
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// TestBuildDeterministic: the same seed gives byte-identical stores (so
// benchmarks and screenshots are reproducible); another seed does not.
func TestBuildDeterministic(t *testing.T) {
	t.Parallel()
	a, _ := sharedSeed7(t)
	b, _ := build(t, Options{Seed: 7, Scale: 0.2, Concurrency: 1})
	c, _ := build(t, Options{Seed: 8, Scale: 0.2})
	if !maps.EqualFunc(a.m, b.m, bytes.Equal) {
		t.Error("two builds with seed 7 differ")
	}
	if maps.EqualFunc(a.m, c.m, bytes.Equal) {
		t.Error("seeds 7 and 8 give the same stores")
	}
}

// TestBuildStores checks the four stores: names, prefixes, geometry type in
// the root metadata, three levels and the advertised vertex counts.
func TestBuildStores(t *testing.T) {
	t.Parallel()
	ms, infos := sharedSeed7(t)
	names := []string{}
	for _, in := range infos {
		names = append(names, in.Name)
		var root struct {
			Attributes struct {
				ZV struct {
					Version  string   `json:"zv_version"`
					Geometry []string `json:"geometry_types"`
				} `json:"zarr_vectors"`
				MS []struct {
					Axes []struct {
						Unit string `json:"unit"`
					} `json:"axes"`
					Datasets []struct {
						Path string `json:"path"`
					} `json:"datasets"`
				} `json:"multiscales"`
			} `json:"attributes"`
		}
		if err := json.Unmarshal(ms.m[in.Prefix+"/zarr.json"], &root); err != nil {
			t.Fatalf("%s root: %v", in.Name, err)
		}
		zv := root.Attributes.ZV
		if zv.Version != "0.7.0" || !slices.Equal(zv.Geometry, []string{in.Geometry}) {
			t.Errorf("%s: version %q geometry %v, want 0.7.0 [%s]", in.Name, zv.Version, zv.Geometry, in.Geometry)
		}
		for _, a := range root.Attributes.MS[0].Axes {
			if a.Unit != "micrometer" {
				t.Errorf("%s: axis unit %q, want micrometer (the viewer's scale bar reads it)", in.Name, a.Unit)
			}
		}
		if in.Levels != 3 || len(root.Attributes.MS[0].Datasets) != 3 {
			t.Errorf("%s: %d levels, %d datasets; want 3", in.Name, in.Levels, len(root.Attributes.MS[0].Datasets))
		}
		var lvl struct {
			Attributes struct {
				L struct {
					VertexCount int `json:"vertex_count"`
				} `json:"zarr_vectors_level"`
			} `json:"attributes"`
		}
		if err := json.Unmarshal(ms.m[in.Prefix+"/0/zarr.json"], &lvl); err != nil {
			t.Fatal(err)
		}
		if lvl.Attributes.L.VertexCount != in.Vertices || in.Vertices == 0 {
			t.Errorf("%s: level 0 has %d vertices, info says %d", in.Name, lvl.Attributes.L.VertexCount, in.Vertices)
		}
	}
	if !slices.Equal(names, []string{"cells", "axons", "skeletons", "meshes"}) {
		t.Errorf("stores %v", names)
	}
}

func TestBuildRejectsScale(t *testing.T) {
	for _, s := range []float64{-1, 1e9} {
		if _, err := Build(context.Background(), memstore.New(), Options{Scale: s}); err == nil {
			t.Errorf("scale %v accepted", s)
		}
	}
}

// BenchmarkBuild measures the default-scale demo into memory (the server's
// start-up cost); it must stay well under 2 s.
func BenchmarkBuild(b *testing.B) {
	var verts int
	for b.Loop() {
		_, infos := build(b, Options{Seed: 1})
		verts = 0
		for _, in := range infos {
			verts += in.Vertices
		}
	}
	b.ReportMetric(float64(verts)*float64(b.N)/b.Elapsed().Seconds(), "vertices/s")
}

// TestTruthMatchesScene: the truth JSON carries exactly the generated
// geometry the stores are written from.
func TestTruthMatchesScene(t *testing.T) {
	sc, err := Generate(Options{Seed: 3, Scale: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := sc.WriteTruth(&buf); err != nil {
		t.Fatal(err)
	}
	var tr truth
	if err := json.Unmarshal(buf.Bytes(), &tr); err != nil {
		t.Fatal(err)
	}
	flat := func(r [][]float32) []float32 {
		var out []float32
		for _, x := range r {
			out = append(out, x...)
		}
		return out
	}
	if !slices.Equal(flat(tr.Cells.Positions), sc.Cells.Positions) || !slices.Equal(tr.Cells.ObjectIDs, sc.Cells.ObjectIDs) {
		t.Error("cells differ")
	}
	if !slices.Equal(flat(tr.Axons.Positions), sc.Axons.Positions) || !slices.Equal(tr.Axons.Offsets, sc.Axons.Offsets) {
		t.Error("axons differ")
	}
	if len(tr.Skeletons.Edges)*2 != len(sc.Skeletons.Edges) || !slices.Equal(flat(tr.Skeletons.Positions), sc.Skeletons.Positions) {
		t.Error("skeletons differ")
	}
	if len(tr.Meshes.Faces)*3 != len(sc.Meshes.Faces) || !slices.Equal(flat(tr.Meshes.Positions), sc.Meshes.Positions) {
		t.Error("meshes differ")
	}
	if len(sc.Cells.Positions) == 0 || len(sc.Axons.Offsets) < 2 || len(sc.Skeletons.Edges) == 0 || len(sc.Meshes.Faces) == 0 {
		t.Error("a part of the scene is empty")
	}
}

// BenchmarkBuildScale10 is the benchmark-sized demo (about 1.7 million
// vertices).
func BenchmarkBuildScale10(b *testing.B) {
	var verts int
	for b.Loop() {
		_, infos := build(b, Options{Seed: 1, Scale: 10})
		verts = 0
		for _, in := range infos {
			verts += in.Vertices
		}
	}
	b.ReportMetric(float64(verts), "vertices")
	b.ReportMetric(float64(verts)*float64(b.N)/b.Elapsed().Seconds(), "vertices/s")
}
