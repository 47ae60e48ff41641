package neuroglancer_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/writer"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// skewedPoints writes n points, nine in ten of them in a corner cube of a
// hundredth of the [0, 1000)³ box (side 215) and the rest uniform over
// the box, in chunks of 125 with a three-level pyramid.
func skewedPoints(t testing.TB, n int) storage.Store {
	t.Helper()
	r := rand.New(rand.NewPCG(3, 4))
	pos := make([]float32, 3*n)
	for i := range n {
		side := 1000.0
		if i%10 != 0 {
			side = 215
		}
		for k := range 3 {
			pos[3*i+k] = float32(r.Float64() * side)
		}
	}
	st := zvftest.Store(t, "mem://")
	o := writer.Options{ChunkShape: []float64{125, 125, 125}, BinShape: []float64{25, 25, 25},
		Pyramid: []writer.PyramidLevel{{Coarsen: 2}, {Coarsen: 8}}}
	if _, err := writer.WritePoints(context.Background(), st, "skewed", &writer.PointCloud{Positions: pos}, o); err != nil {
		t.Fatal(err)
	}
	return storage.Sub(st, "skewed")
}

// TestCoarseCellsHonourTheAimOfSkewedData: a coarse level is filled to
// what a view of its cells wants, at most an eighth of --max-vertices a
// cell, reckoned as if the annotations were spread evenly over the grid.
// Nine in ten of 200,000 points in a hundredth of the box put 36,000
// annotations (the aim: 1,000) in one cell of the coarsest level. The
// fill now caps each coarse level by its fullest cell, so every cell of
// every level but the finest (whose cells are the store's chunks and
// hold what the data put there) holds at most the aim: counted in the
// cells' bodies, and in the info's limits.
func TestCoarseCellsHonourTheAimOfSkewedData(t *testing.T) {
	t.Parallel()
	const maxVertices = 8000
	const aim = maxVertices / 8
	st, err := zvf.Open(context.Background(), skewedPoints(t, 200_000), zvf.Options{Name: "skewed"})
	if err != nil {
		t.Fatal(err)
	}
	_, ts := newServer(t, api.Options{Stores: []*zvf.Store{st}, MaxVertices: maxVertices})
	var inf struct {
		Spatial []struct {
			Key       string  `json:"key"`
			GridShape []int64 `json:"grid_shape"`
			Limit     int64   `json:"limit"`
		} `json:"spatial"`
	}
	if err := json.Unmarshal(apitest.MustGet(t, ts, "/ng/skewed/annotations/info"), &inf); err != nil {
		t.Fatal(err)
	}
	if len(inf.Spatial) < 3 {
		t.Fatalf("%d spatial levels, want the pyramid's three", len(inf.Spatial))
	}
	var total int64
	for s, l := range inf.Spatial[:len(inf.Spatial)-1] {
		var fullest, sum int64
		for i := range l.GridShape[0] {
			for j := range l.GridShape[1] {
				for k := range l.GridShape[2] {
					resp, body := apitest.Get(t, ts, fmt.Sprintf("/ng/skewed/annotations/%s/%d_%d_%d", l.Key, i, j, k))
					if resp.StatusCode == http.StatusNotFound {
						continue
					}
					if resp.StatusCode != http.StatusOK || len(body) < 8 {
						t.Errorf("spatial%d cell %d_%d_%d: %d %.200q", s, i, j, k, resp.StatusCode, body)
						continue
					}
					n := int64(binary.LittleEndian.Uint64(body))
					fullest, sum = max(fullest, n), sum+n
				}
			}
		}
		t.Logf("spatial%d: %v cells, %d annotations, the fullest cell %d, limit %d", s, l.GridShape, sum, fullest, l.Limit)
		if fullest > aim || l.Limit > aim {
			t.Errorf("spatial%d: the fullest cell holds %d annotations (limit %d), more than the aim of %d (--max-vertices %d over 8)",
				s, fullest, l.Limit, aim, maxVertices)
		}
		total += sum
	}
	if total == 0 {
		t.Error("the coarse levels hold nothing")
	}
}
