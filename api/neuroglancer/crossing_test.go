package neuroglancer_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/api/neuroglancer"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/writer"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// TestSpatialCellsHoldCrossingSegments: Neuroglancer loads only the
// spatial cells a view intersects, so a line (or a polyline) must be in
// every cell of its level that one of its segments passes through, not
// only in the cells of its vertices: an edge from cell 0_0_0 to 2_0_0
// was missing from 1_0_0, and a view of that cell lost it. For every
// level of a graph's lines, a polyline store's polylines and its lines,
// every annotation is in exactly the cells of its level it intersects
// (half-open cells from the info's lower_bound and chunk_size), decoded
// from the cells' bytes, and each annotation is at one level.
func TestSpatialCellsHoldCrossingSegments(t *testing.T) {
	t.Parallel()
	mem := zvftest.Store(t, "mem://")
	r := rand.New(rand.NewPCG(20, 11))
	coord := func() float32 { return float32(r.Float64() * 60) }
	o := writer.Options{ChunkShape: []float64{10, 10, 10}, Pyramid: []writer.PyramidLevel{{Coarsen: 2, ChunkScale: 2}, {Coarsen: 4, ChunkScale: 4}}}
	// The graph's first object is the edge (5,5,5)–(25,5,5), which
	// crosses cell 1_0_0 with no vertex in it; the others join random
	// vertices, most of them far apart.
	g := &writer.Graph{Positions: []float32{5, 5, 5, 25, 5, 5}, Edges: []int64{0, 1}, ObjectIDs: []int64{0, 0}}
	for obj := int64(1); obj <= 3; obj++ {
		first := int64(len(g.ObjectIDs))
		for range 12 {
			g.Positions = append(g.Positions, coord(), coord(), coord())
			g.ObjectIDs = append(g.ObjectIDs, obj)
		}
		for k := range int64(16) {
			a, b := first+r.Int64N(12), first+(k%12)
			if a != b {
				g.Edges = append(g.Edges, a, b)
			}
		}
	}
	if _, err := writer.WriteGraph(t.Context(), mem, "g", g, o); err != nil {
		t.Fatal(err)
	}
	pl := &writer.Polylines{Positions: []float32{5, 5, 5, 25, 5, 5}, Offsets: []int{0}}
	for range 8 {
		pl.Offsets = append(pl.Offsets, len(pl.Positions)/3)
		for range 5 {
			pl.Positions = append(pl.Positions, coord(), coord(), coord())
		}
	}
	pl.Offsets = append(pl.Offsets, len(pl.Positions)/3)
	if _, err := writer.WritePolylines(t.Context(), mem, "s", pl, o); err != nil {
		t.Fatal(err)
	}
	ch := cache.New(16 << 20)
	_, ts := apitest.Serve(t, api.Options{Stores: []*zvf.Store{zvftest.OpenSub(t, mem, "g", ch), zvftest.OpenSub(t, mem, "s", ch)},
		Cache: ch, NGSharded: neuroglancer.ShardNever})
	for _, route := range []string{"/ng/g/lines", "/ng/s/annotations", "/ng/s/lines"} {
		inf, err := parseInfo(apitest.MustGet(t, ts, route+"/info"))
		if err != nil {
			t.Fatal(err)
		}
		levelOf := map[uint64]int{}
		middle := false // the first object's edge or polyline is in cell 1_0_0 of its level
		for s, sp := range inf.Spatial {
			held := map[uint64][]string{} // annotation → the cells of level s holding it
			geometry := map[uint64][][]float32{}
			for _, c := range gridCells(sp.GridShape) {
				as, err := inf.decodeList(apitest.MustGet(t, ts, route+"/"+sp.Key+"/"+c))
				if err != nil {
					t.Fatalf("%s %s/%s: %v", route, sp.Key, c, err)
				}
				for _, a := range as {
					held[a.ID] = append(held[a.ID], c)
					geometry[a.ID] = a.Points
					if at, ok := levelOf[a.ID]; ok && at != s {
						t.Fatalf("%s: annotation %d at levels %d and %d", route, a.ID, at, s)
					}
					levelOf[a.ID] = s
					if c == "1_0_0" && len(a.Points) >= 2 && fmt.Sprint(a.Points[:2]) == "[[5 5 5] [25 5 5]]" {
						middle = true
					}
				}
			}
			for id, pts := range geometry {
				var want, maybe []string
				for _, c := range gridCells(sp.GridShape) {
					switch crosses(pts, inf.LowerBound, sp.ChunkSize, c) {
					case 1:
						want = append(want, c)
					case 0:
						maybe = append(maybe, c)
					}
				}
				got := held[id]
				for _, c := range got {
					if !slices.Contains(want, c) && !slices.Contains(maybe, c) {
						t.Errorf("%s %s: annotation %d %v is in cell %s, which it does not cross", route, sp.Key, id, pts, c)
					}
				}
				for _, c := range want {
					if !slices.Contains(got, c) {
						t.Errorf("%s %s: annotation %d %v crosses cell %s but is not in it (it is in %v)", route, sp.Key, id, pts, c, got)
					}
				}
			}
		}
		if !middle {
			t.Errorf("%s: the segment (5,5,5)–(25,5,5) is not in cell 1_0_0", route)
		}
	}
}

// gridCells names every cell of a grid ("i_j_k").
func gridCells(shape []int) []string {
	out := []string{""}
	for _, n := range shape {
		var next []string
		for _, p := range out {
			for i := range n {
				if p == "" {
					next = append(next, fmt.Sprint(i))
				} else {
					next = append(next, fmt.Sprintf("%s_%d", p, i))
				}
			}
		}
		out = next
	}
	return out
}

// crosses reports whether the path through pts passes through the
// half-open cell c of a grid from lower in cells of size: 1 yes, -1 no,
// 0 too near a face, edge or corner to tell at float32 precision (a
// clip of the segment's parameter interval shorter than 1e-4).
func crosses(pts [][]float32, lower, size []float64, c string) int {
	var idx []float64
	for _, s := range strings.Split(c, "_") {
		var v float64
		fmt.Sscan(s, &v)
		idx = append(idx, v)
	}
	verdict := -1
	for k := range len(pts) {
		a, b := pts[k], pts[k]
		if k+1 < len(pts) {
			b = pts[k+1]
		} else if len(pts) > 1 {
			break
		}
		lo, hi := 0.0, 1.0
		for i := range idx {
			cl, ch := lower[i]+idx[i]*size[i], lower[i]+(idx[i]+1)*size[i]
			pa, d := float64(a[i]), float64(b[i])-float64(a[i])
			if d == 0 {
				if pa < cl || pa >= ch {
					lo, hi = 1, 0
				}
				continue
			}
			t0, t1 := (cl-pa)/d, (ch-pa)/d
			lo, hi = max(lo, math.Min(t0, t1)), min(hi, math.Max(t0, t1))
		}
		switch {
		case hi-lo > 1e-4:
			return 1
		case hi-lo > -1e-4:
			verdict = 0
		}
	}
	return verdict
}
