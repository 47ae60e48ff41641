package zvf_test

import (
	"context"
	"encoding/binary"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// TestValidateRowsOutsideTheirBin: on a bin-prefiltered level a chunk's
// fragments are its bins, and a box reads only the bins whose cells it
// overlaps; a row filed in one bin but lying in another of the same
// chunk (its chunk's cell holds it) is missed by a box around it that
// does not reach the bin it is filed in. validate names the chunk's
// fragment index, how many rows and fragments, and the farthest row with
// its fragment, its bin's cell and its position.
func TestValidateRowsOutsideTheirBin(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := copyFixture(t, "points_bins")
	// chunk 1.1.1 spans [250,500)³ in bins of 50: its first row, in bin
	// 0 ([250,300]³), moved into bin 124 ([450,500]³).
	mutate(t, filepath.Join(dir, "0/vertices/1.1.1/c/0"), func(b []byte) []byte {
		for i := range 3 {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(475))
		}
		return b
	})
	st := zvftest.Store(t, dir)
	l := zvftest.OpenLevel(t, st, zvf.Options{Name: "points_bins"}, 0)
	n, err := l.Count(ctx, zvf.CountQuery{Min: []float64{474, 474, 474}, Max: []float64{476, 476, 476}})
	if err != nil {
		t.Fatal(err)
	}
	// The wrong answer the check exists for: the box around the row,
	// inside its chunk's cell, does not find it.
	if n != 0 {
		t.Fatalf("the box around the moved row counts %d rows: the store no longer shows the misfiled row's loss", n)
	}
	rep := zvf.Validate(ctx, st, "points_bins", 5, nil)
	var got *zvf.Problem
	for i, p := range rep.Problems {
		if strings.Contains(p.Message, "outside") {
			got = &rep.Problems[i]
		}
	}
	if got == nil || got.Severity != "error" || got.Path != "0/vertex_fragments/1.1.1" {
		t.Fatalf("validate did not report bin 0 of chunk 1.1.1 as an error: %+v", rep.Problems)
	}
	for _, want := range []string{"1 of ", "rows lie outside the cell of the bin their fragment names (1 of 125 fragments", "farthest 175 from it: row 0 of fragment 0, whose bin's cell is [250, 300] × [250, 300] × [250, 300], at (475, 475, 475)"} {
		if !strings.Contains(got.Message, want) {
			t.Errorf("message %q does not say %q", got.Message, want)
		}
	}
}
