package neuroglancer

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/zvfserve/zvfserve/zvf"
)

// TestNearestIndexMatchesBruteForce: the k-d tree finds the nearest point,
// the lowest index among equally near ones, as a scan of every point does.
func TestNearestIndexMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, tc := range []struct {
		name string
		n    int
		grid bool // integer coordinates: many ties
	}{
		{"one", 1, false}, {"two", 2, true}, {"random", 300, false}, {"ties", 200, true}, {"many", 3000, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			coord := func() float64 {
				if tc.grid {
					return float64(r.IntN(6))
				}
				return r.Float64()*100 - 50
			}
			pts := make([]float64, 3*tc.n)
			for i := range pts {
				pts[i] = coord()
			}
			idx := newNearestIndex(pts)
			for range 500 {
				p := [3]float64{coord() + 0.5*r.Float64(), coord(), coord() - 0.25*r.Float64()}
				best, dist := int32(-1), math.Inf(1)
				for i := range tc.n {
					dx, dy, dz := p[0]-pts[3*i], p[1]-pts[3*i+1], p[2]-pts[3*i+2]
					if d := dx*dx + dy*dy + dz*dz; d < dist {
						best, dist = int32(i), d
					}
				}
				if got := idx.nearest(p); got != best {
					t.Fatalf("nearest to %v: %d, a scan finds %d", p, got, best)
				}
			}
		})
	}
}

// canonical is a triangle's key: its rotation that starts at the lowest
// corner (a triangle and its reverse differ).
func canonical(a, b, c uint32) [3]uint32 {
	switch min(a, b, c) {
	case b:
		return [3]uint32{b, c, a}
	case c:
		return [3]uint32{c, a, b}
	}
	return [3]uint32{a, b, c}
}

// TestCluster: clustering a mesh onto fewer points keeps each surviving
// triangle once, with its corners' order, drops collapsed ones, never adds
// any, and uses only the given points.
func TestCluster(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	// A strip of quads, two triangles each, along x, and its mirror image
	// (reverse winding) on top of it: two faces a side of a sheet.
	var m lodMesh
	for i := range 20 {
		m.pos = append(m.pos, float64(i), 0, 0, float64(i), 1, 0)
	}
	for i := range 19 {
		a, b, c, d := uint32(2*i), uint32(2*i+1), uint32(2*i+2), uint32(2*i+3)
		m.tris = append(m.tris, a, c, b, b, c, d)
	}
	for i := range 19 {
		a, b, c, d := uint32(2*i), uint32(2*i+1), uint32(2*i+2), uint32(2*i+3)
		m.tris = append(m.tris, a, b, c, b, d, c)
	}
	for _, tc := range []struct {
		name string
		pts  []float64
		tris int // -1: any number up to the input's
	}{
		{"every vertex", slices.Clone(m.pos), m.triangles()},
		{"every other column", func() []float64 {
			var p []float64
			for i := 0; i < 20; i += 2 {
				p = append(p, float64(i), 0, 0, float64(i), 1, 0)
			}
			return p
		}(), -1},
		{"two points", []float64{0, 0, 0, 19, 1, 0}, 0},
		{"one point", []float64{5, 5, 5}, 0},
		{"none", nil, 0},
		{"random", func() []float64 {
			p := make([]float64, 3*12)
			for i := range p {
				p[i] = r.Float64() * 19
			}
			return p
		}(), -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := cluster(&m, tc.pts)
			if tc.tris >= 0 && out.triangles() != tc.tris || out.triangles() > m.triangles() {
				t.Fatalf("%d triangles from %d, want %d", out.triangles(), m.triangles(), tc.tris)
			}
			seen := map[[3]uint32]bool{}
			for i := 0; i < len(out.tris); i += 3 {
				a, b, c := out.tris[i], out.tris[i+1], out.tris[i+2]
				if a == b || b == c || a == c {
					t.Fatalf("degenerate triangle %v", out.tris[i:i+3])
				}
				k := canonical(a, b, c)
				if seen[k] {
					t.Fatalf("triangle %v twice", k)
				}
				seen[k] = true
			}
			// Each output vertex is one of the points, each used.
			used := make([]bool, len(out.pos)/3)
			for _, v := range out.tris {
				used[v] = true
			}
			for i := range used {
				p := out.pos[3*i : 3*i+3]
				found := false
				for j := 0; j+3 <= len(tc.pts); j += 3 {
					found = found || slices.Equal(p, tc.pts[j:j+3])
				}
				if !found || !used[i] {
					t.Fatalf("vertex %v: one of the points %v, used %v", p, found, used[i])
				}
			}
		})
	}
	// Two triangles that land on one are one; its reverse is another.
	dup := lodMesh{pos: []float64{0, 0, 0, 1, 0, 0, 0, 1, 0, 0.01, 0, 0}, tris: []uint32{0, 1, 2, 3, 1, 2, 2, 0, 3, 0, 2, 1}}
	if got := cluster(&dup, []float64{0, 0, 0, 1, 0, 0, 0, 1, 0}); !slices.Equal(got.tris, []uint32{0, 1, 2, 0, 2, 1}) {
		t.Fatalf("triangles %v, want [0 1 2 0 2 1]", got.tris)
	}
	// Every point kept: the same mesh, the mirror included.
	same := cluster(&m, slices.Clone(m.pos))
	if !slices.Equal(same.tris, m.tris) || !slices.Equal(same.pos, m.pos) {
		t.Fatal("clustering onto the mesh's own vertices changed it")
	}
}

// TestCoarseFrom: a level's own faces are the LOD unless they are more
// than the finer LOD's triangles; then, as without faces, the finer LOD
// clustered onto the level's vertices.
func TestCoarseFrom(t *testing.T) {
	finer := lodMesh{pos: []float64{0, 0, 0, 1, 0, 0, 0, 1, 0, 1, 1, 0}, tris: []uint32{0, 1, 2, 1, 3, 2}}
	pts := []float64{0, 0, 0, 1, 0, 0, 0, 1, 0}
	one := lodMesh{pos: pts, tris: []uint32{0, 2, 1}}
	three := lodMesh{pos: pts, tris: []uint32{0, 1, 2, 0, 2, 1, 1, 2, 0}}
	for _, tc := range []struct {
		name string
		own  lodMesh
		want []uint32
	}{
		{"own, fewer", one, []uint32{0, 2, 1}},
		{"own, more", three, []uint32{0, 1, 2}}, // (1,1,0) goes to (1,0,0): one triangle survives
		{"none", lodMesh{pos: pts}, []uint32{0, 1, 2}},
	} {
		if got := coarseFrom(&tc.own, pts, &finer); !slices.Equal(got.tris, tc.want) {
			t.Errorf("%s: triangles %v, want %v", tc.name, got.tris, tc.want)
		}
	}
}

// TestLodScales: lod_scales are positive and strictly increasing whatever
// the levels' bins.
func TestLodScales(t *testing.T) {
	up := func(v float32) float32 { return math.Nextafter32(v, float32(math.Inf(1))) }
	for _, tc := range []struct {
		sizes []float64
		want  []float32
	}{
		{[]float64{25, 50, 200}, []float32{25, 50, 200}},
		{[]float64{100, 100, 50}, []float32{100, up(100), up(up(100))}},
		{[]float64{0, math.NaN(), math.Inf(1), -3, 7}, []float32{1, up(1), up(up(1)), up(up(up(1))), 7}},
		{[]float64{1e300}, []float32{1}},
	} {
		if got := lodScales(tc.sizes); !slices.Equal(got, tc.want) {
			t.Errorf("lodScales(%v) = %v, want %v", tc.sizes, got, tc.want)
		}
	}
}

// TestSegmentGrid: the LOD-0 node holds every vertex of every LOD (with
// the manifest's float32 values), and a vertex quantizes to within one
// step of where it is.
func TestSegmentGrid(t *testing.T) {
	for _, tc := range []struct {
		name string
		pos  []float64
	}{
		{"box", []float64{0, 0, 0, 10, 20, 30, 5, 5, 5}},
		{"negative", []float64{-7.25, -1e-3, -100, -1, 3, -99}},
		{"flat", []float64{0, 5, 1, 10, 5, 2, 3, 5, 1.5}},
		{"one point", []float64{1.5, 2.5, 3.5}},
		{"far from the origin", []float64{1e6 + 0.1, 3e5, -2e6, 1e6 + 0.1003, 3e5 + 1e-3, -2e6 + 2e-3}},
		{"float32 values", []float64{float64(float32(0.1)), float64(float32(1.7)), float64(float32(2.3)), float64(float32(9.9)), 4, 0.3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The same vertices at LOD 1, as a coarse LOD with them.
			lods := []lodMesh{{pos: tc.pos}, {pos: tc.pos}}
			g, err := newSegmentGrid("s", 1, lods)
			if err != nil {
				t.Fatal(err)
			}
			steps := float64(uint32(1)<<multilodBits - 1)
			for z := range lods {
				q := g.quantize(nil, tc.pos, z)
				for i, v := range tc.pos {
					a := i % 3
					o, c := float64(g.origin[a]), float64(g.chunk[a])
					if !(c > 0) || v < o || v > o+c {
						t.Fatalf("axis %d: %v outside [%v, %v + %v]", a, v, o, o, c)
					}
					scale := c * float64(uint64(1)<<z)
					if back := o + scale*float64(q[i])/steps; math.Abs(back-v) > scale/steps {
						t.Fatalf("LOD %d: %v comes back as %v (step %v)", z, v, back, scale/steps)
					}
					if z > 0 && q[i] > 1<<(multilodBits-1) {
						t.Fatalf("LOD %d: %v quantizes to %d, past the split", z, v, q[i])
					}
				}
			}
		})
	}
	for _, bad := range []float64{math.NaN(), math.Inf(-1), 1e39} {
		if _, err := newSegmentGrid("s", 1, []lodMesh{{pos: []float64{0, 0, bad}}}); err == nil {
			t.Errorf("vertex coordinate %v: no error", bad)
		}
	}
}

// TestMeshViewUnits: a mesh store's state looks at the store's box in the
// mesh source's dimensions, whatever the store's units: an axis without a
// length unit is a nanometre (as the mesh transform takes it), and the
// projection scale counts the smallest unit; a box it cannot place leaves
// the state without a view.
func TestMeshViewUnits(t *testing.T) {
	box := func(lo, hi float64) [2][]float64 { return [2][]float64{{lo, lo, lo}, {hi, hi, hi}} }
	for _, tc := range []struct {
		name   string
		units  []string
		bounds [2][]float64
		scales []any   // x, y, z dimension scales
		ps     float64 // projectionScale
	}{
		{"micrometres", []string{"micrometer", "micrometer", "micrometer"}, box(0, 1000), []any{1e-6, 1e-6, 1e-6}, 1024},
		{"no unit", []string{"", "", ""}, box(-10, 10), []any{1e-9, 1e-9, 1e-9}, 32},
		{"mixed", []string{"micrometer", "micrometer", "nanometer"}, [2][]float64{{0, 0, 0}, {3, 2, 500}}, []any{1e-6, 1e-6, 1e-9}, 4096},
		{"a point", []string{"nanometer", "nanometer", "nanometer"}, box(5, 5), []any{1e-9, 1e-9, 1e-9}, 1},
		{"unbounded", []string{"nanometer", "nanometer", "nanometer"}, [2][]float64{{0, 0, 0}, {math.Inf(1), 1, 1}}, nil, 0},
		{"no bounds", []string{"nanometer", "nanometer", "nanometer"}, [2][]float64{}, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			info := &zvf.Info{Bounds: tc.bounds}
			for i, u := range tc.units {
				info.Axes = append(info.Axes, zvf.Axis{Name: string(rune('a' + i)), Unit: u})
			}
			var s State
			meshView(&s, info)
			if tc.scales == nil {
				if s.Dimensions != nil || s.Position != nil || s.ProjectionScale != 0 {
					t.Fatalf("state %+v for a box it cannot place", s)
				}
				return
			}
			for i, name := range []string{"x", "y", "z"} {
				if s.Dimensions[name] != [2]any{tc.scales[i], "m"} {
					t.Errorf("dimension %s %v, want [%v m]", name, s.Dimensions[name], tc.scales[i])
				}
				if want := (tc.bounds[0][i] + tc.bounds[1][i]) / 2; s.Position[i] != want {
					t.Errorf("position %v, want %v on axis %d", s.Position, want, i)
				}
			}
			if s.ProjectionScale != tc.ps {
				t.Errorf("projectionScale %v, want %v", s.ProjectionScale, tc.ps)
			}
		})
	}
}
