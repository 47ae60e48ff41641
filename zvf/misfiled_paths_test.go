package zvf_test

import (
	"context"
	"encoding/binary"
	"math"
	"path/filepath"
	"testing"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/cql2"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// TestMisfiledRowEveryPath: a box that covers a chunk's cell takes the
// chunk's rows untested only when every row was found in the cell; a
// store that files a row outside it (here 40 below the cell on x, out of
// the box) must not answer that row on any path that shortcuts a covered
// cell: paged and unpaged answers, the wire form with connectivity (on a
// line level, answered from the level's table), counts,
// densities and a filtered answer (its cached per-chunk selection), cold
// and warm. Each is checked against brute force over the candidate
// chunks' rows.
func TestMisfiledRowEveryPath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		fixture, chunk, attr string
		cs                   float64
	}{
		{"points_bins", "1.1.1", "intensity", 250}, // bin-prefiltered level
		{"graph", "3.4.2", "radius", 100},
		{"polylines", "0.1.1", "fa", 200}, // lines: the level table
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			ctx := context.Background()
			dir := copyFixture(t, tc.fixture)
			key, err := zvf.ParseKey(tc.chunk)
			if err != nil {
				t.Fatal(err)
			}
			var lo, hi [3]float64
			for k := range lo {
				lo[k] = float64(key[k]) * tc.cs
				hi[k] = lo[k] + tc.cs
			}
			mutate(t, filepath.Join(dir, "0/vertices", tc.chunk, "c/0"), func(b []byte) []byte {
				for k, v := range []float64{lo[0] - 40, lo[1] + 1, lo[2] + 1} {
					binary.LittleEndian.PutUint32(b[4*k:], math.Float32bits(float32(v)))
				}
				return b
			})
			// The filter keeps the moved row and drops the next, so the
			// chunk's cached selection is neither all nor none of it.
			mutate(t, filepath.Join(dir, "0/vertex_attributes", tc.attr, tc.chunk, "c/0"), func(b []byte) []byte {
				binary.LittleEndian.PutUint32(b[0:], math.Float32bits(1e6))
				binary.LittleEndian.PutUint32(b[4:], math.Float32bits(-1e6))
				return b
			})
			f, err := cql2.ParseText(tc.attr + " > -1e5")
			if err != nil {
				t.Fatal(err)
			}
			s, err := zvf.Open(ctx, zvftest.Store(t, dir), zvf.Options{Name: tc.fixture, Cache: cache.New(64 << 20)})
			if err != nil {
				t.Fatal(err)
			}
			zvf.WithLevelTablesOfAnyChunk(s)
			l, err := s.Level(0)
			if err != nil {
				t.Fatal(err)
			}
			// Brute force: every row (the store's box reads every chunk)
			// that is in the box and in a chunk whose cell the box touches;
			// wantF, those the filter keeps.
			want, wantF := int64(0), int64(0)
			if _, err := l.BBox(ctx, zvf.BBoxQuery{Min: []float64{-1e9, -1e9, -1e9}, Max: []float64{1e9, 1e9, 1e9}, Attributes: []string{tc.attr}}, func(b *zvf.Batch) error {
				for i := 0; i < b.Rows; i++ {
					cand, in := true, true
					for k := 0; k < 3; k++ {
						v := float64(math.Float32frombits(binary.LittleEndian.Uint32(b.Vertices.Data[12*i+4*k:])))
						c := float64(b.Chunk[k])
						cand = cand && c >= math.Floor(lo[k]/tc.cs) && c <= math.Floor(hi[k]/tc.cs)
						in = in && v >= lo[k] && v <= hi[k]
					}
					if cand && in {
						want++
						if math.Float32frombits(binary.LittleEndian.Uint32(b.Attributes[0].Data[4*i:])) > -1e5 {
							wantF++
						}
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			box := func(q zvf.BBoxQuery) zvf.BBoxQuery { q.Min, q.Max = lo[:], hi[:]; return q }
			rows := func(q zvf.BBoxQuery) int64 {
				n := int64(0)
				for {
					res, err := l.BBox(ctx, q, func(b *zvf.Batch) error { n += int64(b.Rows); return nil })
					if err != nil {
						t.Fatal(err)
					}
					if !res.More {
						return n
					}
					q.Resume = res.Next
				}
			}
			paths := []struct {
				name     string
				filtered bool
				n        func() int64
			}{
				{"bbox", false, func() int64 { return rows(box(zvf.BBoxQuery{})) }},
				{"bbox pages of 7", false, func() int64 { return rows(box(zvf.BBoxQuery{Limit: 7})) }},
				{"bbox wire with connectivity", false, func() int64 { return rows(box(zvf.BBoxQuery{Connectivity: true, Wire: true})) }},
				{"bbox filtered", true, func() int64 { return rows(box(zvf.BBoxQuery{Selection: zvf.Selection{Filter: f}})) }},
				{"count", false, func() int64 {
					n, err := l.Count(ctx, zvf.CountQuery{Min: lo[:], Max: hi[:]})
					if err != nil {
						t.Fatal(err)
					}
					return n
				}},
				{"count filtered", true, func() int64 {
					n, err := l.Count(ctx, zvf.CountQuery{Min: lo[:], Max: hi[:], Selection: zvf.Selection{Filter: f}})
					if err != nil {
						t.Fatal(err)
					}
					return n
				}},
				{"density", false, func() int64 {
					cells, err := l.Density(ctx, zvf.DensityQuery{Min: lo[:], Max: hi[:], Shape: []int{5, 5, 5}})
					if err != nil {
						t.Fatal(err)
					}
					n := int64(0)
					for _, c := range cells {
						n += int64(c)
					}
					return n
				}},
			}
			for pass := 0; pass < 3; pass++ { // cold, then warm (the level table is built once asked for, off the request path)
				for _, p := range paths {
					w := want
					if p.filtered {
						w = wantF
					}
					if got := p.n(); got != w {
						t.Errorf("pass %d, %s: %d rows, brute force says %d", pass, p.name, got, w)
					}
				}
				// The table a pass asked for is built in the background:
				// the next pass answers from it once the build has ended.
				zvf.WaitTableBuilds(s)
			}
			if tc.fixture == "polylines" && zvf.TableAnswers(l) == 0 {
				t.Error("no answer came from the level table")
			}
		})
	}
}
