package zvf_test

import (
	"context"
	"encoding/binary"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// TestBBoxMisfiledRow: a corrupt store files a row outside its chunk's
// (and bin's) cell. A box that covers the cell must still test that row —
// the shortcut that takes a covered cell's rows untested applies only to
// cells whose rows were all found inside at decode time. Every answer is
// checked against brute force over the candidate chunks' rows.
func TestBBoxMisfiledRow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		fixture string
		chunk   string
		cs, bin float64
	}{
		{"points_bins", "0.0.0", 250, 50}, // bin-prefiltered level
		{"graph", "3.4.2", 100, 100},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			ctx := context.Background()
			dir := copyFixture(t, tc.fixture)
			key, err := zvf.ParseKey(tc.chunk)
			if err != nil {
				t.Fatal(err)
			}
			ck := [3]float64{float64(key[0]), float64(key[1]), float64(key[2])}
			lo := [3]float64{ck[0] * tc.cs, ck[1] * tc.cs, ck[2] * tc.cs}
			mutate(t, filepath.Join(dir, "0/vertices", tc.chunk, "c/0"), func(b []byte) []byte {
				// The chunk's first row (in its first bin): moved just
				// below the cell on x, inside it on y and z.
				binary.LittleEndian.PutUint32(b[0:], math.Float32bits(float32(lo[0]-3)))
				binary.LittleEndian.PutUint32(b[4:], math.Float32bits(float32(lo[1]+1)))
				binary.LittleEndian.PutUint32(b[8:], math.Float32bits(float32(lo[2]+1)))
				return b
			})
			st := zvftest.Store(t, dir)
			l := zvftest.OpenLevel(t, st, zvf.Options{Name: tc.fixture, Cache: cache.New(64 << 20)}, 0)
			// Every row with its chunk, through a box that covers all.
			type row struct {
				chunk zvf.Key
				p     [3]float64
			}
			var all []row
			if _, err := l.BBox(ctx, zvf.BBoxQuery{Min: []float64{-1e9, -1e9, -1e9}, Max: []float64{1e9, 1e9, 1e9}}, func(b *zvf.Batch) error {
				for i := 0; i < b.Rows; i++ {
					var p [3]float64
					for k := range p {
						p[k] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b.Vertices.Data[12*i+4*k:])))
					}
					all = append(all, row{append(zvf.Key(nil), b.Chunk...), p})
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			boxes := [][2][3]float64{
				{lo, {lo[0] + tc.cs, lo[1] + tc.cs, lo[2] + tc.cs}},                           // the chunk's cell
				{lo, {lo[0] + tc.bin, lo[1] + tc.bin, lo[2] + tc.bin}},                        // its first bin's cell
				{{lo[0] - 5, lo[1], lo[2]}, {lo[0] + tc.bin, lo[1] + tc.bin, lo[2] + tc.bin}}, // reaching the row
			}
			for bi, bx := range boxes {
				want := 0
				for _, r := range all {
					cand, in := true, true
					for k := 0; k < 3; k++ {
						c := float64(r.chunk[k])
						cand = cand && c >= math.Floor(bx[0][k]/tc.cs) && c <= math.Floor(bx[1][k]/tc.cs)
						in = in && r.p[k] >= bx[0][k] && r.p[k] <= bx[1][k]
					}
					if cand && in {
						want++
					}
				}
				for pass := 0; pass < 2; pass++ { // cold, then from the cache
					res, err := l.BBox(ctx, zvf.BBoxQuery{Min: bx[0][:], Max: bx[1][:]}, func(*zvf.Batch) error { return nil })
					if err != nil {
						t.Fatal(err)
					}
					if res.Count != int64(want) {
						t.Errorf("box %d pass %d: %d rows, brute force says %d", bi, pass, res.Count, want)
					}
				}
			}
		})
	}
}

// TestBBoxEdgesDeterministic: the same query gives the same edges in the
// same order, cold or warm (strong ETags promise equal bytes).
func TestBBoxEdgesDeterministic(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"polylines", "polylines_sharded", "graph", "skeleton", "mesh"} {
		s, _ := ref07.open(t, name)
		l, _ := s.Level(0)
		var first []int64
		for pass := 0; pass < 4; pass++ {
			res, err := l.BBox(context.Background(), zvf.BBoxQuery{Min: []float64{-1e9, -1e9, -1e9}, Max: []float64{1e9, 1e9, 1e9}, Connectivity: true},
				func(*zvf.Batch) error { return nil })
			if err != nil {
				t.Fatal(err)
			}
			got := append(res.Edges, res.Faces...)
			if pass == 0 {
				first = got
				if len(first) == 0 {
					t.Fatalf("%s: no connectivity", name)
				}
				continue
			}
			if !slices.Equal(got, first) {
				t.Fatalf("%s: pass %d gives other edges or another order", name, pass)
			}
		}
	}
}
