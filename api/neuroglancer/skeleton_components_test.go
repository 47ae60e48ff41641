package neuroglancer_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/api/neuroglancer"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/writer"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// TestSkeletonAttributesFitNeuroglancer: Neuroglancer uploads each
// skeleton vertex attribute as a texture of 1 to 4 components
// (webgl/texture_access computeTextureFormat, in the 2.41.2 the browser
// test runs, throws "No supported texture format for FLOAT32[6]"), so an
// info declaring an attribute of more components fails the whole
// skeleton layer. Since a graph's attributes declare the channels their
// chunks hold, a six-channel attribute was declared num_components 6. An
// attribute of more than four channels is left out, with a note; those
// of one to four are served as they are, and the file holds exactly what
// the info declares.
func TestSkeletonAttributesFitNeuroglancer(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	mem, err := blobstore.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	g := &writer.Graph{Positions: []float32{1, 1, 1, 2, 2, 2, 3, 3, 3}, Edges: []int64{1, 0, 2, 1}, ObjectIDs: []int64{0, 0, 0}}
	tensor := make([]float32, 3*6)
	for i := range tensor {
		tensor[i] = float32(i) / 4
	}
	g.Attributes = []writer.Attribute{writer.Float32Attribute("tensor", 6, tensor), writer.Uint8Attribute("rgb", 3, []uint8{1, 2, 3, 4, 5, 6, 7, 8, 9}),
		writer.Float32Attribute("radius", 1, []float32{0.5, 1, 1.5})}
	if _, err := writer.WriteGraph(ctx, mem, "g", g, writer.Options{ChunkShape: []float64{50, 50, 50}}); err != nil {
		t.Fatal(err)
	}
	st := zvftest.OpenSub(t, mem, "g", cache.New(16<<20))
	for _, mode := range []neuroglancer.ShardMode{neuroglancer.ShardNever, neuroglancer.ShardAlways} {
		_, ts := apitest.Serve(t, api.Options{Stores: []*zvf.Store{st}, Cache: cache.New(16 << 20), NGSharded: mode})
		resp, body := apitest.Get(t, ts, "/ng/g/skeletons/info")
		if resp.StatusCode != 200 {
			t.Fatalf("%s: info: %d %s", mode, resp.StatusCode, body)
		}
		var inf ngSkeletonInfo
		if err := json.Unmarshal(body, &inf); err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		for _, a := range inf.VertexAttributes {
			if a.NumComponents < 1 || a.NumComponents > 4 {
				t.Errorf("%s: vertex attribute %s has %d components; Neuroglancer's skeleton textures hold 1 to 4", mode, a.ID, a.NumComponents)
			}
			got[a.ID] = a.NumComponents
		}
		if got["rgb"] != 3 || got["radius"] != 1 {
			t.Errorf("%s: vertex attributes %v, want rgb × 3 and radius × 1 kept", mode, got)
		}
		if !strings.Contains(string(body), `"attribute":"tensor"`) {
			t.Errorf("%s: the info's notes do not say what became of tensor: %s", mode, body)
		}
		if mode == neuroglancer.ShardNever {
			resp, b := apitest.Get(t, ts, "/ng/g/skeletons/0")
			if resp.StatusCode != 200 {
				t.Fatalf("skeleton 0: %d %s", resp.StatusCode, b)
			}
			sk, err := decodeSkeleton(&inf, b)
			if err != nil {
				t.Fatalf("skeleton 0 against its info: %v", err)
			}
			if r := sk.Attrs["radius"]; len(r) != 3 || r[0] != 0.5 || r[2] != 1.5 {
				t.Errorf("radius %v, want [0.5 1 1.5]", r)
			}
		}
	}
}
