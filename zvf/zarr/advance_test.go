package zarr_test

import (
	"fmt"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/zarr"
)

// TestAdvance: Advance visits every position of a grid once, in C order
// (the last axis fastest), and says so when it has passed the last one,
// leaving the index at zero; a grid of no axes has one position.
func TestAdvance(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		shape []int64
		want  string
	}{
		{nil, "[]"},
		{[]int64{3}, "[0] [1] [2]"},
		{[]int64{2, 3}, "[0 0] [0 1] [0 2] [1 0] [1 1] [1 2]"},
		{[]int64{2, 1, 2}, "[0 0 0] [0 0 1] [1 0 0] [1 0 1]"},
	} {
		idx := make([]int64, len(tc.shape))
		got := fmt.Sprint(idx)
		for zarr.Advance(idx, tc.shape) {
			got += " " + fmt.Sprint(idx)
		}
		if got != tc.want {
			t.Errorf("shape %v: %s, want %s", tc.shape, got, tc.want)
		}
		if fmt.Sprint(idx) != fmt.Sprint(make([]int64, len(tc.shape))) {
			t.Errorf("shape %v: ends at %v, not at zero", tc.shape, idx)
		}
	}
}
