package writer

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

const refDir = "../../testdata/zvf-reference/"

// compareStores checks that got holds exactly the reference's keys, with
// byte-identical zarr.json files and equal decoded blob payloads (encoded
// bytes may differ when a compressor is involved).
func compareStores(t *testing.T, want, got map[string][]byte) {
	t.Helper()
	var missing, extra, diff []string
	for k, wb := range want {
		gb, ok := got[k]
		switch {
		case !ok:
			missing = append(missing, k)
		case strings.HasSuffix(k, "/c/0") || strings.Contains(k, "/manifests/c/"):
			arr := strings.TrimSuffix(k, "/c/0")
			if strings.Contains(k, "/manifests/c/") {
				if !bytes.Equal(decodeZstd(t, wb), decodeZstd(t, gb)) {
					diff = append(diff, k)
				}
				continue
			}
			if !bytes.Equal(readBlob(t, want, arr), readBlob(t, got, arr)) {
				diff = append(diff, k)
			}
		case !bytes.Equal(wb, gb):
			diff = append(diff, k)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			extra = append(extra, k)
		}
	}
	slices.Sort(missing)
	slices.Sort(extra)
	slices.Sort(diff)
	show := func(name string, l []string) {
		if len(l) > 0 {
			t.Errorf("%d %s keys, e.g. %v", len(l), name, l[:min(len(l), 8)])
		}
	}
	show("missing", missing)
	show("extra", extra)
	show("differing", diff)
	for _, k := range diff[:min(len(diff), 3)] {
		if strings.HasSuffix(k, "zarr.json") {
			t.Logf("%s\nwant %s\ngot  %s", k, want[k], got[k])
		}
	}
}

func decodeZstd(t *testing.T, b []byte) []byte {
	t.Helper()
	out, err := testZstd.DecodeAll(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// level0Points reads a reference level-0 point store back into writer
// input, rows in stored order.
func level0Points(t *testing.T, files map[string][]byte, attrs []Attribute) *PointCloud {
	t.Helper()
	pc := &PointCloud{}
	for i := range attrs {
		attrs[i].Data = nil
	}
	for _, k := range chunkKeys(files, "0/vertices") {
		pc.Positions = append(pc.Positions, f32s(readBlob(t, files, "0/vertices/"+k))...)
		for i := range attrs {
			attrs[i].Data = append(attrs[i].Data, readBlob(t, files, "0/vertex_attributes/"+attrs[i].Name+"/"+k)...)
		}
	}
	pc.Attributes = attrs
	return pc
}

// TestGoldenPointsBins rewrites the reference's binned point stores from
// their own level-0 rows and expects the same store back, pyramid level and
// cross-level links included.
func TestGoldenPointsBins(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		store string
		codec Codec
	}{
		{"points_bins", CodecNone},
		{"points_bins_zstd", CodecZstd},
		{"points_bins_blosc", CodecBlosc},
	} {
		t.Run(tc.store, func(t *testing.T) {
			want := zvftest.ReadTree(t, refDir+tc.store+".zarrvectors")
			pc := level0Points(t, want, []Attribute{
				{Name: "intensity", DType: "float32", Channels: 1},
				{Name: "label", DType: "int32", Channels: 1},
				{Name: "color", DType: "uint8", Channels: 3},
			})
			ms := newMemStore()
			_, err := WritePoints(context.Background(), ms, "out", pc, Options{
				ChunkShape: []float64{250, 250, 250}, BinShape: []float64{50, 50, 50},
				Bounds: &[2][]float64{{0, 0, 0}, {1000, 1000, 1000}}, Codec: tc.codec,
				Pyramid: []PyramidLevel{{Coarsen: 2}},
			})
			if err != nil {
				t.Fatal(err)
			}
			got := ms.files("out/")
			if len(got) != len(want) || len(want) < 100 {
				t.Errorf("%d keys, reference has %d", len(got), len(want))
			}
			compareStores(t, want, got)
		})
	}
}

// objectIDsOf assigns each stored level-0 row (chunk order, fragment order)
// the object whose manifest names its fragment.
func objectIDsOf(t *testing.T, files map[string][]byte, d int) []int64 {
	t.Helper()
	owner := map[blockRef]int64{}
	for oid, refs := range readManifests(t, files, "0", d) {
		for _, r := range refs {
			owner[r] = int64(oid)
		}
	}
	var ids []int64
	for _, k := range chunkKeys(files, "0/vertices") {
		var c coords
		copy(c[:], parseKey(k))
		for f, n := range decodeFragments(t, readBlob(t, files, "0/vertex_fragments/"+k)) {
			oid, ok := owner[blockRef{c, int64(f)}]
			if !ok {
				t.Fatalf("chunk %s fragment %d has no owner", k, f)
			}
			for range n {
				ids = append(ids, oid)
			}
		}
	}
	return ids
}

// TestGoldenPointsObjects covers object ids, categorical strings, object
// attributes, groups and an ID-preserving pyramid level.
func TestGoldenPointsObjects(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		store   string
		bin     []float64
		pyramid []PyramidLevel
	}{
		{"points_pyramid", nil, []PyramidLevel{{Coarsen: 2}}},
		{"quirk_points_objects_bins", []float64{50, 50, 50}, nil},
	} {
		t.Run(tc.store, func(t *testing.T) {
			want := zvftest.ReadTree(t, refDir+tc.store+".zarrvectors")
			pc := level0Points(t, want, []Attribute{
				{Name: "intensity", DType: "float32", Channels: 1},
				{Name: "label", DType: "int32", Channels: 1},
				{Name: "cell_type", DType: "uint8", Channels: 1},
			})
			var cats []string
			if err := json.Unmarshal(groupAttr(t, want, "0/vertex_attributes/cell_type", "categories"), &cats); err != nil {
				t.Fatal(err)
			}
			names := make([]string, len(pc.Attributes[2].Data))
			for i, c := range pc.Attributes[2].Data {
				names[i] = cats[c]
			}
			pc.Attributes[2] = CategoricalAttribute("cell_type", names)
			pc.ObjectIDs = objectIDsOf(t, want, 3)
			pc.ObjectAttributes = []Attribute{{Name: "volume", DType: "float32", Channels: 1,
				Data: readBlob(t, want, "0/object_attributes/volume/data")}}
			pc.Groups = [][]int64{{0, 1, 2, 3, 4, 5}, {6, 7, 8, 9, 10, 11}}
			ms := newMemStore()
			_, err := WritePoints(context.Background(), ms, "", pc, Options{
				ChunkShape: []float64{250, 250, 250}, BinShape: tc.bin,
				Bounds:  &[2][]float64{{0, 0, 0}, {1000, 1000, 1000}},
				Pyramid: tc.pyramid,
			})
			if err != nil {
				t.Fatal(err)
			}
			compareStores(t, want, ms.files(""))
		})
	}
}

// groupAttr returns one attribute of a group zarr.json as raw JSON.
func groupAttr(t *testing.T, files map[string][]byte, path, key string) json.RawMessage {
	t.Helper()
	var g struct {
		Attributes map[string]json.RawMessage `json:"attributes"`
	}
	if err := json.Unmarshal(files[path+"/zarr.json"], &g); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return g.Attributes[key]
}
