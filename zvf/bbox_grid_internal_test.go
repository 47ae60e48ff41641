package zvf

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// gridLevel is a 3-D level of chunks of 10 with keys (arity 3 + off).
func gridLevel(keys []Key, off int) *Level {
	l := &Level{s: &Store{dims: 3}, keyArity: 3 + off, chunkShape: []float64{10, 10, 10}, keys: keys}
	l.grid = newKeyGrid(keys, l.keyArity, 3)
	return l
}

// scanCandidates is candidates without the grid: the definition.
func scanCandidates(l *Level, min, max []float64) []int32 {
	g := l.grid
	l.grid = nil
	defer func() { l.grid = g }()
	return l.candidates(nil, min, max)
}

// TestKeyGrid: where a level has a key grid, candidates from it are the
// scan's, in the same order, for boxes inside, across, around and far
// outside the chunks; where a grid cannot stand for the scan there is
// none.
func TestKeyGrid(t *testing.T) {
	cube := func(n int64, keep func(x, y, z int64) bool) []Key {
		var keys []Key
		for x := range n {
			for y := range n {
				for z := range n {
					if keep(x, y, z) {
						keys = append(keys, Key{x - 2, y, z + 5})
					}
				}
			}
		}
		return keys
	}
	shuffled := cube(6, func(x, y, z int64) bool { return (x+y+z)%3 != 0 })
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	inf := math.Inf(1)
	boxes := [][2][]float64{
		{{0, 0, 0}, {0, 0, 0}},
		{{-15, 3, 52}, {21, 44, 71}},
		{{-inf, -inf, -inf}, {inf, inf, inf}},
		{{-1e300, 5, 50}, {1e300, 5, 50}},
		{{1e6, 1e6, 1e6}, {1e7, 1e7, 1e7}},
		{{-1e7, -1e7, -1e7}, {-1e6, -1e6, -1e6}},
		{{-20, -1, 49.999}, {-19.5, 0, 50}},
		{{9.999, 10, 60}, {10, 19.999, 60}},
	}
	for _, tc := range []struct {
		name string
		keys []Key
		off  int
		grid bool
	}{
		{"dense", cube(6, func(_, _, _ int64) bool { return true }), 0, true},
		{"holes", cube(6, func(x, y, z int64) bool { return (x*y+z)%4 != 1 }), 0, true},
		{"not in axis order", shuffled, 0, true},
		{"one chunk", []Key{{3, -4, 7}}, 0, true},
		{"sparse", []Key{{0, 0, 0}, {1000, 1000, 1000}}, 0, false},
		{"beyond float64", []Key{{0, 0, 0}, {1 << 60, 0, 0}}, 0, false},
		{"two keys in a cell", []Key{{0, 1, 1, 1}, {1, 1, 1, 1}, {0, 2, 1, 1}}, 1, false},
		{"one key a cell with a leading component", []Key{{7, 1, 1, 1}, {7, 2, 1, 1}, {7, 1, 3, 0}}, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := gridLevel(tc.keys, tc.off)
			if (l.grid != nil) != tc.grid {
				t.Fatalf("grid %v, want %v", l.grid != nil, tc.grid)
			}
			for _, b := range boxes {
				got, want := l.candidates(nil, b[0], b[1]), scanCandidates(l, b[0], b[1])
				if !slices.Equal(got, want) {
					t.Errorf("box %v–%v: candidates %v, the scan's %v", b[0], b[1], got, want)
				}
			}
		})
	}
}

// FuzzKeyGrid: for any set of keys and any box, candidates are the
// scan's.
func FuzzKeyGrid(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 2, 3, 9, 9, 9}, -5.0, 0.0, 3.0, 25.0, 30.0, 40.0)
	f.Add([]byte{200, 1, 1, 1, 200, 1, 3, 3, 3}, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
	f.Fuzz(func(t *testing.T, b []byte, x0, y0, z0, x1, y1, z1 float64) {
		min, max := []float64{x0, y0, z0}, []float64{x1, y1, z1}
		for i := range min {
			if math.IsNaN(min[i]) || math.IsNaN(max[i]) || min[i] > max[i] {
				return // checkBox refuses it before candidates
			}
		}
		seen := map[[3]int64]bool{}
		var keys []Key
		for len(b) >= 3 && len(keys) < 512 {
			k := [3]int64{int64(int8(b[0])), int64(int8(b[1])), int64(int8(b[2]))}
			b = b[3:]
			if !seen[k] {
				seen[k] = true
				keys = append(keys, Key(k[:]))
			}
		}
		l := gridLevel(keys, 0)
		got, want := l.candidates(nil, min, max), scanCandidates(l, min, max)
		if !slices.Equal(got, want) {
			t.Fatalf("keys %v box %v–%v: candidates %v, the scan's %v", keys, min, max, got, want)
		}
	})
}
