package writer

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

var refBounds = &[2][]float64{{0, 0, 0}, {1000, 1000, 1000}}

// levelRows returns, per chunk key of level 0, its decoded vertex rows,
// fragment counts and the named attributes.
type storedChunk struct {
	c     coords
	pos   []float32
	frags []int64
	attrs map[string][]byte
}

func storedChunks(t *testing.T, files map[string][]byte, attrs ...string) map[coords]*storedChunk {
	t.Helper()
	out := map[coords]*storedChunk{}
	for _, k := range chunkKeys(files, "0/vertices") {
		var c coords
		copy(c[:], parseKey(k))
		sc := &storedChunk{c: c, pos: f32s(readBlob(t, files, "0/vertices/"+k)),
			frags: decodeFragments(t, readBlob(t, files, "0/vertex_fragments/"+k)), attrs: map[string][]byte{}}
		for _, a := range attrs {
			sc.attrs[a] = readBlob(t, files, "0/vertex_attributes/"+a+"/"+k)
		}
		out[c] = sc
	}
	return out
}

func TestGoldenPolylines(t *testing.T) {
	t.Parallel()
	want := zvftest.ReadTree(t, refDir+"polylines.zarrvectors")
	chunks := storedChunks(t, want, "fa")
	pl := &Polylines{Offsets: []int{0}}
	var fa []byte
	for _, refs := range readManifests(t, want, "0", 3) {
		for _, r := range refs {
			sc := chunks[r.c]
			var start int64
			for _, n := range sc.frags[:r.frag] {
				start += n
			}
			n := sc.frags[r.frag]
			pl.Positions = append(pl.Positions, sc.pos[3*start:3*(start+n)]...)
			fa = append(fa, sc.attrs["fa"][4*start:4*(start+n)]...)
		}
		pl.Offsets = append(pl.Offsets, len(pl.Positions)/3)
	}
	pl.Attributes = []Attribute{{Name: "fa", DType: "float32", Channels: 1, Data: fa}}
	pl.ObjectAttributes = []Attribute{{Name: "length", DType: "float32", Channels: 1,
		Data: readBlob(t, want, "0/object_attributes/length/data")}}
	data := i64s(readBlob(t, want, "0/groups/data"))
	offs := i64s(readBlob(t, want, "0/groups/offsets"))
	for gi, off := range offs {
		end := int64(len(data))
		if gi+1 < len(offs) {
			end = offs[gi+1] / 8
		}
		pl.Groups = append(pl.Groups, data[off/8:end])
	}
	ms := newMemStore()
	if _, err := WritePolylines(context.Background(), ms, "", pl, Options{
		ChunkShape: []float64{200, 200, 200}, BinShape: []float64{50, 50, 50}, Bounds: refBounds,
	}); err != nil {
		t.Fatal(err)
	}
	compareStores(t, want, ms.files(""))
}

// expectedInput is the generator input recorded in graph/skeleton expected JSON.
type expectedInput struct {
	Input struct {
		Positions [][]float32 `json:"positions"`
		Edges     [][]int64   `json:"edges"`
		ObjectIDs []int64     `json:"object_ids"`
	} `json:"input"`
}

func loadInput(t *testing.T, name string) *Graph {
	t.Helper()
	b, err := os.ReadFile(refDir + name + ".expected.json")
	if err != nil {
		t.Fatal(err)
	}
	var e expectedInput
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatal(err)
	}
	g := &Graph{ObjectIDs: e.Input.ObjectIDs}
	for _, p := range e.Input.Positions {
		g.Positions = append(g.Positions, p...)
	}
	for _, p := range e.Input.Edges {
		g.Edges = append(g.Edges, p...)
	}
	return g
}

// TestGoldenGraphs writes the reference's graph and skeleton generator input
// and expects the reference stores back. Attribute values are only stored
// per chunk, so they are mapped back to nodes (and edges) through the
// writer's own layout, which the vertex and link blobs check.
func TestGoldenGraphs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		skeleton bool
	}{{"graph", false}, {"skeleton", true}} {
		t.Run(tc.name, func(t *testing.T) {
			want := zvftest.ReadTree(t, refDir+tc.name+".zarrvectors")
			gr := loadInput(t, tc.name)
			gr.Skeleton = tc.skeleton
			o := Options{ChunkShape: []float64{100, 100, 100}, Bounds: refBounds}
			g, err := prepare(&o, gr.Positions, "graph", "explicit")
			if err != nil {
				t.Fatal(err)
			}
			n := len(gr.Positions) / 3
			pos, edges, ids := gr.Positions, gr.Edges, gr.ObjectIDs
			var order []int64
			if tc.skeleton {
				idx := make([]int64, n)
				for i := range idx {
					idx[i] = int64(i)
				}
				var tmp []Attribute
				pos, edges, tmp, ids = reorderTree(3, pos, edges, []Attribute{Int64Attribute("i", 1, idx)}, ids)
				order = i64s(tmp[0].Data)
			}
			l := &level{d: 3, pos: pos}
			l.chunks, l.manifests = chunkByObject(g, pos, ids, 4)
			l.addEdges(edges, tc.skeleton)
			radius := make([]byte, 4*n)
			weight := make([]byte, 4*len(gr.Edges)/2)
			for _, c := range l.chunks {
				key := c.c.key(3)
				stored := readBlob(t, want, "0/vertex_attributes/radius/"+key)
				for j, r := range c.rows {
					orig := int64(r)
					if order != nil {
						orig = order[r]
					}
					copy(radius[4*orig:], stored[4*j:4*j+4])
				}
				if !tc.skeleton && c.links != nil {
					ws := readBlob(t, want, "0/link_attributes/weight/0/"+key)
					for j, e := range c.linkSrc {
						copy(weight[4*e:], ws[4*j:4*j+4])
					}
				}
			}
			gr.Attributes = []Attribute{{Name: "radius", DType: "float32", Channels: 1, Data: radius}}
			if !tc.skeleton {
				gr.LinkAttributes = []Attribute{{Name: "weight", DType: "float32", Channels: 1, Data: weight}}
			}
			ms := newMemStore()
			if _, err := WriteGraph(context.Background(), ms, "", gr, o); err != nil {
				t.Fatal(err)
			}
			compareStores(t, want, ms.files(""))
		})
	}
}

// TestGoldenMesh rebuilds the reference mesh's input from the store (rows in
// chunk order, intra faces then cross faces) and expects the same store.
func TestGoldenMesh(t *testing.T) {
	t.Parallel()
	want := zvftest.ReadTree(t, refDir+"mesh.zarrvectors")
	chunks := storedChunks(t, want, "height")
	m := &Mesh{FaceWidth: 3}
	var height []byte
	base := map[coords]int64{}
	owners := map[coords][]int64{}
	for oid, refs := range readManifests(t, want, "0", 3) {
		for _, r := range refs {
			owners[r.c] = append(owners[r.c], int64(oid))
		}
	}
	for _, k := range chunkKeys(want, "0/vertices") {
		var c coords
		copy(c[:], parseKey(k))
		sc := chunks[c]
		base[c] = int64(len(m.Positions) / 3)
		m.Positions = append(m.Positions, sc.pos...)
		height = append(height, sc.attrs["height"]...)
		// Any assignment giving each chunk the same set of objects
		// reproduces the manifests.
		own := owners[c]
		for j := range len(sc.pos) / 3 {
			m.ObjectIDs = append(m.ObjectIDs, own[min(j, len(own)-1)])
		}
	}
	for _, k := range chunkKeys(want, "0/vertices") {
		var c coords
		copy(c[:], parseKey(k))
		if _, ok := want["0/links/0/"+k+"/zarr.json"]; !ok {
			continue
		}
		for _, v := range i64s(readBlob(t, want, "0/links/0/"+k)) {
			m.Faces = append(m.Faces, base[c]+v)
		}
	}
	rec := i64s(readBlob(t, want, "0/cross_chunk_links/0/data"))
	for j := 0; j+4 <= len(rec); j += 4 {
		m.Faces = append(m.Faces, base[coords{rec[j], rec[j+1], rec[j+2]}]+rec[j+3])
	}
	m.Attributes = []Attribute{{Name: "height", DType: "float32", Channels: 1, Data: height}}
	ms := newMemStore()
	if _, err := WriteMesh(context.Background(), ms, "", m, Options{ChunkShape: []float64{100, 100, 100}, Bounds: refBounds}); err != nil {
		t.Fatal(err)
	}
	compareStores(t, want, ms.files(""))
}
