package zvf_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"

	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// TestBinRatioFromAbsurdScales: a level's bin_ratio is its multiscales
// scale rounded to an integer; a scale no ratio can be (1e300, a negative
// one, NaN written as a huge number) leaves it out. int(math.Round(1e300))
// is undefined in Go and was MinInt64 on amd64: the descriptor reported
// bin_ratio [-9223372036854775808, …].
func TestBinRatioFromAbsurdScales(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := zvftest.CopyTree(t, filepath.Join(fixtures, "points_pyramid.zarrvectors"))
	for _, tc := range []struct {
		scale []float64
		want  []int
	}{
		{[]float64{2, 2, 2}, []int{2, 2, 2}},
		{[]float64{1e300, 1e300, 1e300}, nil},
		{[]float64{-2, -2, -2}, nil},
		{[]float64{2, 1e19, 2}, nil},
	} {
		mutate(t, filepath.Join(dir, "zarr.json"), func(b []byte) []byte {
			var doc map[string]any
			if err := json.Unmarshal(b, &doc); err != nil {
				t.Fatal(err)
			}
			ds := doc["attributes"].(map[string]any)["multiscales"].([]any)[0].(map[string]any)["datasets"].([]any)[1].(map[string]any)
			ds["coordinateTransformations"].([]any)[0].(map[string]any)["scale"] = tc.scale
			out, _ := json.Marshal(doc)
			return out
		})
		st, err := zvf.Open(ctx, zvftest.Store(t, dir), zvf.Options{Name: "p"})
		if err != nil {
			t.Fatalf("scale %v: %v", tc.scale, err)
		}
		if got := st.Info().Levels[1].BinRatio; !slices.Equal(got, tc.want) {
			t.Errorf("scale %v: bin_ratio %v, want %v", tc.scale, got, tc.want)
		}
	}
}
