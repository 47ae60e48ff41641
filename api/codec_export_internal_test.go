package api

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/api/problem"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
)

// edgesFrom turns fuzz bytes into edges among n rows.
func edgesFrom(n int, b []byte) []int64 {
	var e []int64
	for i := 0; i+1 < len(b) && n > 0; i += 2 {
		e = append(e, int64(int(b[i])%n), int64(int(b[i+1])%n))
	}
	return e
}

// checkRuns holds streamlineRuns to its contract: every row is in some
// run, every edge is exactly one pair of consecutive points, runs are
// ordered by first row, and a run of one point is a row without edges.
func checkRuns(t *testing.T, n int, edges []int64) {
	t.Helper()
	order, offs := streamlineRuns(n, edges)
	if offs[0] != 0 || int(offs[len(offs)-1]) != len(order) {
		t.Fatalf("offsets %v for %d points", offs, len(order))
	}
	want := map[[2]int32]int{}
	touched := make([]bool, n)
	for i := 0; i+1 < len(edges); i += 2 {
		want[[2]int32{int32(edges[i]), int32(edges[i+1])}]++
		touched[edges[i]], touched[edges[i+1]] = true, true
	}
	seen := make([]bool, n)
	got := map[[2]int32]int{}
	for s := 0; s+1 < len(offs); s++ {
		run := order[offs[s]:offs[s+1]]
		if len(run) == 0 {
			t.Fatalf("run %d is empty", s)
		}
		if s > 0 && order[offs[s-1]] > run[0] {
			t.Fatalf("run %d starts at %d, before run %d's %d", s, run[0], s-1, order[offs[s-1]])
		}
		if len(run) == 1 && touched[run[0]] {
			t.Fatalf("row %d has edges but is a run of its own", run[0])
		}
		for i, v := range run {
			seen[v] = true
			if i > 0 {
				got[[2]int32{run[i-1], v}]++
			}
		}
	}
	for v := range n {
		if !seen[v] {
			t.Fatalf("row %d is in no run", v)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("runs hold %d distinct steps, the edges %d", len(got), len(want))
	}
	for e, c := range want {
		if got[e] != c {
			t.Fatalf("edge %v is %d steps of the runs, %d edges", e, got[e], c)
		}
	}
}

func TestStreamlineRuns(t *testing.T) {
	for _, c := range []struct {
		name  string
		n     int
		edges []int64
		want  [][]int32
	}{
		{"one line", 4, []int64{0, 1, 1, 2, 2, 3}, [][]int32{{0, 1, 2, 3}}},
		{"lone rows", 3, nil, [][]int32{{0}, {1}, {2}}},
		{"a line leaving the box and coming back", 6, []int64{0, 1, 1, 2, 4, 5}, [][]int32{{0, 1, 2}, {3}, {4, 5}}},
		{"rows out of line order", 4, []int64{3, 1, 1, 0, 0, 2}, [][]int32{{3, 1, 0, 2}}},
		{"a shared metavertex", 5, []int64{0, 2, 1, 2, 2, 3, 3, 4}, [][]int32{{0, 2, 3, 4}, {1, 2}}},
		{"a line revisiting a row", 4, []int64{0, 1, 1, 2, 2, 1, 1, 3}, [][]int32{{0, 1, 2, 1, 3}}},
		{"a closed loop", 3, []int64{1, 2, 2, 0, 0, 1}, [][]int32{{0, 1, 2, 0}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			checkRuns(t, c.n, c.edges)
			order, offs := streamlineRuns(c.n, c.edges)
			var got [][]int32
			for s := 0; s+1 < len(offs); s++ {
				got = append(got, order[offs[s]:offs[s+1]])
			}
			if !slices.EqualFunc(got, c.want, slices.Equal) {
				t.Fatalf("runs %v, want %v", got, c.want)
			}
		})
	}
}

func FuzzStreamlineRuns(f *testing.F) {
	f.Add(uint8(5), []byte{0, 1, 1, 2, 3, 4})
	f.Add(uint8(3), []byte{0, 1, 1, 2, 2, 0})
	f.Add(uint8(4), []byte{0, 0, 1, 1, 2, 3, 2, 3})
	f.Fuzz(func(t *testing.T, n uint8, b []byte) {
		checkRuns(t, int(n), edgesFrom(int(n), b))
	})
}

// checkParents holds swcParents to its contract: either a forest whose
// parent links are exactly the distinct edges (stored (child, parent)
// when those make a forest), or a 422 when the edges have a cycle.
func checkParents(t *testing.T, n int, edges []int64) {
	t.Helper()
	parent, err := swcParents(n, edges)
	distinct := map[[2]int64]bool{}
	cyclic := false
	uf := make([]int, n)
	for i := range uf {
		uf[i] = i
	}
	var find func(int) int
	find = func(x int) int {
		if uf[x] != x {
			uf[x] = find(uf[x])
		}
		return uf[x]
	}
	for i := 0; i+1 < len(edges); i += 2 {
		a, b := edges[i], edges[i+1]
		k := [2]int64{min(a, b), max(a, b)}
		if distinct[k] {
			continue
		}
		distinct[k] = true
		if a == b || find(int(a)) == find(int(b)) {
			cyclic = true
			continue
		}
		uf[find(int(a))] = find(int(b))
	}
	if cyclic {
		var p *Problem
		if !errors.As(err, &p) || p.Type != problem.Unrepresentable.URI() {
			t.Fatalf("edges %v have a cycle: got parents %v, error %v", edges, parent, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("edges %v: %v", edges, err)
	}
	links := 0
	for v, p := range parent {
		if p < 0 {
			continue
		}
		links++
		if !distinct[[2]int64{int64(min(int32(v), p)), int64(max(int32(v), p))}] {
			t.Fatalf("parent link %d–%d is no edge", v, p)
		}
	}
	if links != len(distinct) {
		t.Fatalf("%d parent links for %d distinct edges", links, len(distinct))
	}
	order := swcOrder(parent)
	if len(order) != n {
		t.Fatalf("order lists %d of %d nodes", len(order), n)
	}
	placed := make([]bool, n)
	for _, v := range order {
		if p := parent[v]; p >= 0 && !placed[p] {
			t.Fatalf("node %d before its parent %d", v, p)
		}
		placed[v] = true
	}
}

func TestSWCParents(t *testing.T) {
	for _, c := range []struct {
		name   string
		n      int
		edges  []int64
		parent []int32 // nil: a cycle
	}{
		{"skeleton (child, parent)", 4, []int64{1, 0, 2, 1, 3, 1}, []int32{-1, 0, 1, 1}},
		{"a chain stored parent first is a forest either way", 3, []int64{0, 1, 1, 2}, []int32{1, 2, -1}},
		{"a star stored (child, parent)", 4, []int64{0, 1, 2, 1, 3, 1}, []int32{1, -1, 1, 1}},
		{"a branch stored parent first: undirected, rooted at 0", 4, []int64{0, 1, 1, 2, 1, 3}, []int32{-1, 0, 1, 1}},
		{"duplicate and reversed edges", 3, []int64{1, 0, 1, 0, 0, 1, 2, 1}, []int32{-1, 0, 1}},
		{"forest with a lone node", 5, []int64{1, 0, 4, 3}, []int32{-1, 0, -1, -1, 3}},
		{"triangle", 3, []int64{0, 1, 1, 2, 2, 0}, nil},
		{"self-loop", 2, []int64{0, 1, 1, 1}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			checkParents(t, c.n, c.edges)
			got, err := swcParents(c.n, c.edges)
			if c.parent == nil {
				if err == nil {
					t.Fatalf("parents %v for a cycle", got)
				}
				return
			}
			if err != nil || !slices.Equal(got, c.parent) {
				t.Fatalf("parents %v (%v), want %v", got, err, c.parent)
			}
		})
	}
}

func FuzzSWCParents(f *testing.F) {
	f.Add(uint8(6), []byte{1, 0, 2, 1, 3, 1, 5, 4})
	f.Add(uint8(3), []byte{0, 1, 1, 2, 2, 0})
	f.Add(uint8(4), []byte{0, 1, 2, 1, 3, 1})
	f.Fuzz(func(t *testing.T, n uint8, b []byte) {
		checkParents(t, int(n), edgesFrom(int(n), b))
	})
}

// TestHolderBound: an answer held whole holds at most its limit; a batch
// past it is an error, not a larger buffer.
func TestHolderBound(t *testing.T) {
	v, err := zvf.NewColumn("vertices", "float32", 3, make([]byte, 12*6))
	if err != nil {
		t.Fatal(err)
	}
	h := &holder{write: func(*bufio.Writer, *held) error { return nil }}
	mem := &answerMem{c: cache.New(1 << 20)}
	if err := h.begin(nil, &payloadMeta{Dims: 3, Export: &exportMeta{maxRows: 10}}, mem); err != nil {
		t.Fatal(err)
	}
	if err := h.batch(&zvf.Batch{Rows: 6, Vertices: v}); err != nil {
		t.Fatal(err)
	}
	// What it holds counts against the answers' budget, and is given back.
	if r := mem.c.Stats().Reserved; r < 72 {
		t.Errorf("holder keeps 72 bytes of vertices, reserves %d", r)
	}
	defer func() {
		mem.release()
		if r := mem.c.Stats().Reserved; r != 0 {
			t.Errorf("after release %d bytes stay reserved", r)
		}
	}()
	if err := h.batch(&zvf.Batch{Rows: 6, Vertices: v}); err == nil || h.a.rows != 6 || len(h.a.verts.Data) != 72 {
		t.Fatalf("a batch past the limit: %v, holding %d rows", err, h.a.rows)
	}
}

// TestAxisCodes: the voxel order written for an affine is what nibabel's
// aff2axcodes gives (values from nibabel 5.0).
func TestAxisCodes(t *testing.T) {
	for _, c := range []struct {
		aff  [4][4]float64
		want string
	}{
		{[4][4]float64{{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}, {0, 0, 0, 1}}, "RAS"},
		{[4][4]float64{{-2, 0, 0, 90}, {0, 2, 0, -126}, {0, 0, 2, -72}, {0, 0, 0, 1}}, "LAS"},
		{[4][4]float64{{0, 0, -1, 0}, {-1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 0, 1}}, "PSL"},
		// Oblique: each voxel axis goes to the world axis it is closest to.
		{[4][4]float64{{0.9, 0.5, 0, 0}, {-0.4, 0.8, 0.1, 0}, {0, -0.2, 1.1, 0}, {0, 0, 0, 1}}, "RAS"},
		{[4][4]float64{{0.6, 0.8, 0, 0}, {0.8, -0.6, 0, 0}, {0, 0, 1, 0}, {0, 0, 0, 1}}, "ARS"},
		{[4][4]float64{{0.7, 0.71, 0, 0}, {0.71, -0.7, 0, 0}, {0, 0, 1, 0}, {0, 0, 0, 1}}, "ARS"},
	} {
		if got := axisCodes(c.aff); string(got[:]) != c.want {
			t.Errorf("%v: %s, want %s", c.aff, got, c.want)
		}
	}
}

// randomMesh is a mesh of n vertices and f faces of width w (w ≥ 3),
// some vertices used by no face.
func randomMesh(r *rand.Rand, n, f, w int) *held {
	a := &held{rows: n, faceWidth: w, m: &payloadMeta{Dims: 3, VertexDType: "float32",
		Export: &exportMeta{geom: "mesh", source: "test", maxRows: int64(n), axes: []zvf.Axis{{Name: "x"}, {Name: "y"}, {Name: "z"}}}}}
	var data []byte
	for range 3 * n {
		v := float32(r.NormFloat64() * math.Pow(10, float64(r.IntN(8)-3)))
		data = binary.LittleEndian.AppendUint32(data, math.Float32bits(v))
	}
	a.verts, _ = zvf.NewColumn("vertices", "float32", 3, data)
	for range f * w {
		a.faces = append(a.faces, int64(r.IntN(n)))
	}
	return a
}

// TestMeshEncodersRoundTrip: random meshes (any face width, unused
// vertices, values of every magnitude) read back from OBJ, PLY, STL and
// GLB as they were: every vertex, exact float32 values, the faces (STL
// and GLB as fans).
func TestMeshEncodersRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 200 {
		n := 1 + r.IntN(40)
		a := randomMesh(r, n, r.IntN(30), 3+r.IntN(3))
		vert := func(v int) [3]float32 {
			p := point3(&a.verts, v)
			return [3]float32{float32(p[0]), float32(p[1]), float32(p[2])}
		}
		tri := triangles(a.faces, a.faceWidth)
		encode := func(write func(*bufio.Writer, *held) error) []byte {
			var b bytes.Buffer
			w := bufio.NewWriter(&b)
			if err := write(w, a); err != nil {
				t.Fatal(err)
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			return b.Bytes()
		}
		// OBJ
		var vs [][3]float32
		var fs [][]int64
		for _, line := range strings.Split(string(encode(writeOBJ)), "\n") {
			f := strings.Fields(line)
			if len(f) == 0 || f[0] == "#" {
				continue
			}
			switch f[0] {
			case "v":
				var p [3]float32
				for k := range 3 {
					x, err := strconv.ParseFloat(f[1+k], 32)
					if err != nil {
						t.Fatal(err)
					}
					p[k] = float32(x)
				}
				vs = append(vs, p)
			case "f":
				var face []int64
				for _, s := range f[1:] {
					x, _ := strconv.ParseInt(s, 10, 64)
					face = append(face, x-1)
				}
				fs = append(fs, face)
			}
		}
		if len(vs) != n || len(fs) != len(a.faces)/a.faceWidth {
			t.Fatalf("case %d: OBJ %d v %d f, mesh %d %d", i, len(vs), len(fs), n, len(a.faces)/a.faceWidth)
		}
		for v := range n {
			if vs[v] != vert(v) {
				t.Fatalf("case %d: OBJ v %d %v, mesh %v", i, v, vs[v], vert(v))
			}
		}
		if !slices.Equal(slices.Concat(fs...), a.faces) {
			t.Fatalf("case %d: OBJ faces", i)
		}
		// PLY
		ply := encode(writePLY)
		_, body, _ := bytes.Cut(ply, []byte("end_header\n"))
		if len(body) != 12*n+(1+4*a.faceWidth)*(len(a.faces)/a.faceWidth) || !bytes.Equal(body[:12*n], a.verts.Data) {
			t.Fatalf("case %d: PLY body", i)
		}
		// STL
		stl := encode(writeSTL)
		if len(stl) != 84+50*len(tri)/3 {
			t.Fatalf("case %d: STL of %d bytes for %d triangles", i, len(stl), len(tri)/3)
		}
		for k := range len(tri) / 3 {
			for c := range 3 {
				rec := stl[84+50*k+12+12*c:]
				p := [3]float32{math.Float32frombits(binary.LittleEndian.Uint32(rec)), math.Float32frombits(binary.LittleEndian.Uint32(rec[4:])), math.Float32frombits(binary.LittleEndian.Uint32(rec[8:]))}
				if p != vert(int(tri[3*k+c])) {
					t.Fatalf("case %d: STL triangle %d corner %d", i, k, c)
				}
			}
		}
		// GLB
		glb := encode(writeGLB)
		jl := binary.LittleEndian.Uint32(glb[12:])
		var doc struct {
			Accessors []struct {
				Count    int
				Min, Max []float64
			}
		}
		if err := json.Unmarshal(glb[20:20+jl], &doc); err != nil {
			t.Fatal(err)
		}
		bin := glb[20+jl+8:]
		if doc.Accessors[0].Count != n || !bytes.Equal(bin[:12*n], a.verts.Data) {
			t.Fatalf("case %d: GLB positions", i)
		}
		for k := range 3 {
			lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
			for v := range n {
				lo, hi = min(lo, vert(v)[k]), max(hi, vert(v)[k])
			}
			if doc.Accessors[0].Min[k] != float64(lo) || doc.Accessors[0].Max[k] != float64(hi) {
				t.Fatalf("case %d: GLB bounds %v %v", i, doc.Accessors[0].Min, doc.Accessors[0].Max)
			}
		}
		for k, v := range tri {
			if int64(binary.LittleEndian.Uint32(bin[12*n+4*k:])) != v {
				t.Fatalf("case %d: GLB index %d", i, k)
			}
		}
	}
}

// TestTRKPointsMapBack: random affines (rotation, anisotropic voxels,
// flips, shifts) and points: a written point, mapped back as nibabel maps
// it (affine · (voxmm / voxel size − 0.5)), is the point to float32
// precision.
func TestTRKPointsMapBack(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 500 {
		var aff []float64
		for row := range 3 {
			for col := range 4 {
				v := r.NormFloat64()
				if col == 3 {
					v *= 100
				} else if row == col {
					v += 2 * float64(1-2*r.IntN(2))
				}
				aff = append(aff, v)
			}
		}
		aff = append(aff, 0, 0, 0, 1)
		vs := []float64{0.1 + 3*r.Float64(), 0.1 + 3*r.Float64(), 0.1 + 3*r.Float64()}
		sp, err := newTrkSpace("headers/trk", aff, vs, nil)
		if err != nil {
			continue // singular
		}
		p := [3]float64{float64(float32(r.NormFloat64() * 500)), float64(float32(r.NormFloat64() * 500)), float64(float32(r.NormFloat64() * 500))}
		q := sp.voxmm(p)
		var vox [3]float64
		for k := range 3 {
			vox[k] = float64(q[k])/sp.voxelSize[k] - 0.5
		}
		for k := range 3 {
			back := sp.vox2ras[k][0]*vox[0] + sp.vox2ras[k][1]*vox[1] + sp.vox2ras[k][2]*vox[2] + sp.vox2ras[k][3]
			if math.Abs(back-p[k]) > 1e-3*(1+math.Abs(p[k])) {
				t.Fatalf("case %d: %v maps back to %v (affine %v)", i, p, back, aff)
			}
		}
	}
}
