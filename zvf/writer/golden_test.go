package writer

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
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
	for _, tc := range []struct {
		store string
		codec Codec
	}{
		{"points_bins", CodecNone},
		{"points_bins_zstd", CodecZstd},
	} {
		t.Run(tc.store, func(t *testing.T) {
			want := loadDir(t, refDir+tc.store+".zarrvectors")
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
