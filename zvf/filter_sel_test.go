package zvf_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/cql2"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/synth"
	"github.com/zvfserve/zvfserve/zvf/writer"
)

// selAnswer is a bbox answer in order, paged by limit (0: one page):
// per batch its vertices then its attributes, and the rows each page
// says match.
func selAnswer(t *testing.T, l *zvf.Level, q zvf.BBoxQuery, limit int64) []byte {
	t.Helper()
	var out bytes.Buffer
	q.Limit = limit
	for {
		res, err := l.BBox(context.Background(), q, func(b *zvf.Batch) error {
			fmt.Fprintf(&out, "[%s %d %d]", b.Chunk, b.First, b.Rows)
			out.Write(b.Vertices.Data)
			for _, a := range b.Attributes {
				out.Write(a.Data)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&out, "<%d %v %d>", res.Count, res.MatchedKnown, res.Matched)
		if !res.More {
			return out.Bytes()
		}
		q.Resume = res.Next
	}
}

// TestSelectionCacheMatchesUncached: a store whose chunks' selections are
// cached answers every box, page, count and density exactly as the same
// store without a cache (which evaluates each box's rows afresh), the
// first time (selections built) and again (served from the cache): for
// filters keeping none, few (their vertices copied, bins kept), most (rows
// only) and all of a chunk, with and without a sample, on boxes that
// cover chunks, cut them on one axis or several, and fall on bin edges.
func TestSelectionCacheMatchesUncached(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := synth.PointsChunked(ctx, 20_000, 3, writer.CodecNone, 250) // bins of 50
	if err != nil {
		t.Fatal(err)
	}
	cached, err := zvf.Open(ctx, storage.Sub(st, "points"), zvf.Options{Name: "sel-cached", Cache: cache.New(256 << 20)})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := zvf.Open(ctx, storage.Sub(st, "points"), zvf.Options{Name: "sel-plain"})
	if err != nil {
		t.Fatal(err)
	}
	side := synth.Side
	boxes := [][2][]float64{
		{{0, 0, 0}, {side, side, side}},             // every chunk covered
		{{50, 0, 0}, {680, side, side}},             // cut on x only
		{{0, 0, 130}, {side, side, 610}},            // cut on z only (within lines)
		{{50, 60, 70}, {680, 690, 700}},             // cut on every axis
		{{125, 250, 375}, {500, 625, 750}},          // on chunk edges
		{{25, 50, 75}, {475, 525, 575}},             // on bin edges
		{{300, 300, 300}, {301, 301, 301}},          // inside one bin
		{{-10, -10, -10}, {side + 1, 90, side + 1}}, // beyond the store
	}
	r := rand.New(rand.NewPCG(5, 9))
	for range 3 {
		var lo, hi [3]float64
		for a := range 3 {
			x, y := r.Float64()*side, r.Float64()*side
			lo[a], hi[a] = min(x, y), max(x, y)
		}
		boxes = append(boxes, [2][]float64{lo[:], hi[:]})
	}
	filters := []string{
		"snr < 0",                              // none
		"snr < 3",                              // a tenth: vertices copied
		"snr >= 3 AND intensity > 90",          // most: rows only
		"snr >= 0",                             // all
		"depth BETWEEN 200 AND 400 OR snr < 1", // whole chunks in and out
	}
	for _, text := range filters {
		e, err := cql2.ParseText(text)
		if err != nil {
			t.Fatal(err)
		}
		for _, sample := range []float64{0, 0.5} {
			sel := zvf.Selection{Filter: e, Sample: sample}
			{ // the coarser levels have no attributes
				lc, _ := cached.Level(0)
				lp, _ := plain.Level(0)
				for bi, box := range boxes {
					what := fmt.Sprintf("%q sample %v box %d", text, sample, bi)
					q := zvf.BBoxQuery{Min: box[0], Max: box[1], Attributes: []string{"*"}, Selection: sel}
					want := selAnswer(t, lp, q, 0)
					for pass := range 2 { // selections built, then cached
						if got := selAnswer(t, lc, q, 0); !bytes.Equal(got, want) {
							t.Fatalf("%s pass %d: the cached store's answer differs", what, pass)
						}
					}
					if got, want := selAnswer(t, lc, q, 2999), selAnswer(t, lp, q, 2999); !bytes.Equal(got, want) {
						t.Fatalf("%s: the cached store's pages differ", what)
					}
					cq := zvf.CountQuery{Min: box[0], Max: box[1], Selection: sel}
					nc, err1 := lc.Count(ctx, cq)
					np, err2 := lp.Count(ctx, cq)
					if err1 != nil || err2 != nil || nc != np {
						t.Fatalf("%s: count %d (%v), uncached %d (%v)", what, nc, err1, np, err2)
					}
					dq := zvf.DensityQuery{Min: box[0], Max: box[1], Shape: []int{7, 5, 3}, Selection: sel}
					dc, err1 := lc.Density(ctx, dq)
					dp, err2 := lp.Density(ctx, dq)
					if err1 != nil || err2 != nil || !slices.Equal(dc, dp) {
						t.Fatalf("%s: density differs (%v, %v)", what, err1, err2)
					}
				}
			}
		}
	}
}
