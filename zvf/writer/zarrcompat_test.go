package writer

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/zarr"
)

// TestZarrLayerReadsEverything opens every node the writer produced with
// the project's Zarr layer: each group parses, each blob array reads back
// the bytes the test decoder sees, and each manifests array decodes.
func TestZarrLayerReadsEverything(t *testing.T) {
	t.Parallel()
	for _, codec := range []Codec{CodecNone, CodecZstd, CodecBlosc} {
		ms := newMemStore()
		ctx := context.Background()
		o := Options{ChunkShape: []float64{20, 20, 20}, BinShape: []float64{10, 10, 10}, Codec: codec,
			Pyramid: []PyramidLevel{{Coarsen: 2}}}
		pos := fuzzPositions([]byte("a spread of points across several chunks, with objects and groups!"))
		ids := make([]int64, len(pos)/3)
		for i := range ids {
			ids[i] = int64(i % 3)
		}
		if _, err := WritePoints(ctx, ms, "p", &PointCloud{Positions: pos, ObjectIDs: ids, Groups: [][]int64{{0, 2}, {1}},
			Attributes: []Attribute{CategoricalAttribute("k", strings.Split(strings.Repeat("ab", len(ids))[:len(ids)], ""))}}, o); err != nil {
			t.Fatal(err)
		}
		if _, err := WriteMesh(ctx, ms, "m", &Mesh{Positions: pos[:9*3], Faces: []int64{0, 1, 2, 3, 4, 5, 6, 7, 8}, FaceWidth: 3}, o); err != nil {
			t.Fatal(err)
		}
		files := ms.files("")
		cs := zarr.NewCodecs()
		arrays, groups := 0, 0
		for k, b := range files {
			node, ok := strings.CutSuffix(k, "/zarr.json")
			if !ok {
				continue
			}
			n, err := zarr.ParseNode(b)
			if err != nil {
				t.Fatalf("%s: %v", k, err)
			}
			if n.Type != zarr.NodeArray {
				groups++
				continue
			}
			arrays++
			a, err := zarr.OpenArray(ctx, ms, node, cs)
			if err != nil {
				t.Fatalf("%s: %v", node, err)
			}
			if strings.HasSuffix(node, "/manifests") {
				c, err := a.Read(ctx)
				if err != nil || int64(len(c.Elems)) != a.Meta().Shape[0] {
					t.Fatalf("%s: %v (%d elements)", node, err, len(c.Elems))
				}
				continue
			}
			got, err := a.ReadBytes(ctx)
			if err != nil {
				t.Fatalf("%s: %v", node, err)
			}
			if want := readBlob(t, files, node); !bytes.Equal(got, want) {
				t.Fatalf("%s: zarr layer read %d bytes, test decoder %d", node, len(got), len(want))
			}
		}
		if arrays < 20 || groups < 10 {
			t.Fatalf("codec %v: only %d arrays and %d groups checked", codec, arrays, groups)
		}
	}
}
