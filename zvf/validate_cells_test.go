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

// TestValidateRowsOutsideTheirCell: a store that files rows outside the
// cell their chunk's key names answers wrongly where no check can see
// it: a box is answered from the chunks whose cells it touches, so a box
// around such a row, away from its chunk's cell, does not find it, though
// the box of the whole store does. validate reads every row, so it names
// the chunk, how many of its rows lie outside and the farthest.
func TestValidateRowsOutsideTheirCell(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := copyFixture(t, "graph")
	// chunk 3.4.2 spans [300,400)×[400,500)×[200,300): its first row
	// moved 40 below the cell on x, its second 2.5 above it on z.
	mutate(t, filepath.Join(dir, "0/vertices/3.4.2/c/0"), func(b []byte) []byte {
		for i, v := range []float32{260, 450, 250, 350, 450, 302.5} {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
		return b
	})
	st := zvftest.Store(t, dir)
	l := zvftest.OpenLevel(t, st, zvf.Options{Name: "graph"}, 0)
	count := func(lo, hi []float64) int64 {
		n, err := l.Count(ctx, zvf.CountQuery{Min: lo, Max: hi})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// The wrong answer the check exists for: the whole store's box holds
	// the moved row; a box around it that stays out of its chunk's cell
	// (wholly in chunk 2.4.2's) does not.
	near, all := count([]float64{259, 449, 249}, []float64{261, 451, 251}), count([]float64{-1e9, -1e9, -1e9}, []float64{1e9, 1e9, 1e9})
	if near != 0 || all != l.Info().VertexCount {
		t.Fatalf("near the moved row %d rows, whole store %d of %d: the store no longer shows the misfiled row's loss", near, all, l.Info().VertexCount)
	}

	rep := zvf.Validate(ctx, st, "graph", 5, nil)
	var got *zvf.Problem
	for i, p := range rep.Problems {
		if p.Path == "0/vertices/3.4.2" {
			got = &rep.Problems[i]
		}
	}
	if got == nil || got.Severity != "error" || rep.OK() {
		t.Fatalf("validate did not report chunk 3.4.2 as an error: %+v", rep.Problems)
	}
	for _, want := range []string{"2 of ", "rows lie outside the chunk's cell [300, 400) × [400, 500) × [200, 300)", "farthest 40 from it", "(260, 450, 250)"} {
		if !strings.Contains(got.Message, want) {
			t.Errorf("message %q does not say %q", got.Message, want)
		}
	}
	// The untouched store has no such problem.
	clean := zvf.Validate(ctx, zvftest.Store(t, filepath.Join(fixtures, "graph.zarrvectors")), "graph", 5, nil)
	for _, p := range clean.Problems {
		if strings.Contains(p.Message, "outside the chunk's cell") {
			t.Errorf("the reference store: %+v", p)
		}
	}
}
