package draco

import (
	"bytes"
	"errors"
	"flag"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/zvfserve/zvfserve/api/neuroglancer/draco/dracotest"
	"github.com/zvfserve/zvfserve/zvf/zvftest/golden"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// testCase is one mesh of the table every decoder check runs over.
type testCase struct {
	name string
	mesh Mesh
	// The paths the encoder must take, so the table keeps covering them:
	// padding after the attribute (1 yes, 0 no, -1 either) and the scheme
	// of each coded stream, indices then positions: 't' tagged, 'r' raw,
	// '?' either ("" for no check).
	padded  int
	schemes string
}

// cases is the table: empty, tiny, degenerate, extreme values, both
// quantizations Neuroglancer uses, large, random, and meshes built to take
// every path of the format (plain indices of each width, raw and tagged
// symbols).
func cases(tb testing.TB) []testCase {
	tb.Helper()
	rng := rand.New(rand.NewPCG(28, 1))
	cs := []testCase{
		{name: "empty", mesh: Mesh{Bits: 10}, padded: -1, schemes: ""},
		{name: "one triangle", mesh: Mesh{Bits: 10, Positions: []uint32{0, 0, 0, 1023, 0, 0, 0, 1023, 0}, Faces: []uint32{0, 1, 2}}, padded: -1, schemes: ""},
		{name: "one triangle reversed", mesh: Mesh{Bits: 10, Positions: []uint32{0, 0, 0, 1023, 0, 0, 0, 1023, 0}, Faces: []uint32{2, 1, 0}}, padded: -1, schemes: ""},
		{name: "max values 10 bit", mesh: Mesh{Bits: 10, Positions: []uint32{1023, 1023, 1023, 1023, 0, 1023, 0, 1023, 1023, 1023, 1023, 1023}, Faces: []uint32{0, 1, 2, 1, 2, 3}}, padded: -1, schemes: ""},
		{name: "max values 16 bit", mesh: Mesh{Bits: 16, Positions: []uint32{65535, 65535, 65535, 0, 0, 0, 65535, 0, 65535}, Faces: []uint32{0, 1, 2, 2, 1, 0}}, padded: -1, schemes: ""},
		{name: "all at max", mesh: Mesh{Bits: 16, Positions: slices.Repeat([]uint32{65535}, 9), Faces: []uint32{0, 1, 2}}, padded: -1, schemes: ""},
		{name: "degenerate", mesh: Mesh{
			Bits:      10,
			Positions: []uint32{0, 0, 0, 10, 10, 10, 20, 20, 20, 5, 900, 3},
			// repeated corners, a point triangle, collinear corners
			Faces: []uint32{0, 0, 1, 2, 2, 2, 0, 1, 2, 3, 3, 0, 1, 1, 1},
		}, padded: -1, schemes: ""},
		{name: "unreferenced vertices", mesh: Mesh{Bits: 10, Positions: []uint32{9, 9, 9, 1, 2, 3, 500, 4, 4, 7, 7, 7, 8, 8, 8, 1, 1, 1}, Faces: []uint32{1, 2, 3, 3, 2, 1}}, padded: -1, schemes: ""},
		{name: "1 bit", mesh: Mesh{Bits: 1, Positions: []uint32{0, 0, 0, 1, 0, 0, 1, 1, 1}, Faces: []uint32{0, 1, 2}}, padded: -1, schemes: ""},
		{name: "grid 10 bit", mesh: gridMesh(40, 10), padded: -1, schemes: "rr"},
		{name: "grid 16 bit", mesh: gridMesh(40, 16), padded: -1, schemes: ""},
		{name: "sphere 10 bit", mesh: sphereMesh(30, 40, 10), padded: -1, schemes: ""},
		{name: "large sphere 16 bit", mesh: sphereMesh(300, 400, 16), padded: -1, schemes: ""},
		{name: "random 16 bit", mesh: randomMesh(rng, 5000, 8000, 16), padded: -1, schemes: ""},
		{name: "random 30 bit", mesh: randomMesh(rng, 2000, 3000, 30), padded: -1, schemes: "?t"},
		// Indices jumping across 300k vertices need more than 18 bits.
		{name: "random faces over 300k vertices", mesh: randomMesh(rng, 300_000, 100_000, 10), padded: -1, schemes: "t?"},
		// Identical vertices and faces code into almost nothing, far less
		// than the 3 bytes per face the decoder insists on.
		{name: "identical faces", mesh: sameMesh(300, 5000), padded: 1, schemes: "rr"},
	}
	return cs
}

// gridMesh is an n×n height field: (n+1)² vertices spread over the whole
// range, 2n² triangles.
func gridMesh(n, bits int) Mesh {
	top := float64(uint32(1)<<bits - 1)
	m := Mesh{Bits: bits}
	for y := 0; y <= n; y++ {
		for x := 0; x <= n; x++ {
			h := (math.Sin(float64(x)/5)*math.Cos(float64(y)/7) + 1) / 2
			m.Positions = append(m.Positions,
				uint32(math.Round(top*float64(x)/float64(n))),
				uint32(math.Round(top*float64(y)/float64(n))),
				uint32(math.Round(top*h)))
		}
	}
	for y := range n {
		for x := range n {
			a := uint32(y*(n+1) + x)
			b, c, d := a+1, a+uint32(n+1), a+uint32(n+2)
			m.Faces = append(m.Faces, a, b, d, a, d, c)
		}
	}
	return m
}

// sphereMesh is a UV sphere filling the range.
func sphereMesh(rings, segs, bits int) Mesh {
	half := float64(uint32(1)<<bits-1) / 2
	m := Mesh{Bits: bits}
	for r := 0; r <= rings; r++ {
		th := math.Pi * float64(r) / float64(rings)
		for s := range segs {
			ph := 2 * math.Pi * float64(s) / float64(segs)
			m.Positions = append(m.Positions,
				uint32(math.Round(half+half*math.Sin(th)*math.Cos(ph))),
				uint32(math.Round(half+half*math.Sin(th)*math.Sin(ph))),
				uint32(math.Round(half+half*math.Cos(th))))
		}
	}
	for r := range rings {
		for s := range segs {
			a := uint32(r*segs + s)
			b := uint32(r*segs + (s+1)%segs)
			c, d := a+uint32(segs), b+uint32(segs)
			m.Faces = append(m.Faces, a, c, b, b, c, d)
		}
	}
	return m
}

func randomMesh(rng *rand.Rand, nv, nf, bits int) Mesh {
	m := Mesh{Bits: bits, Positions: make([]uint32, 3*nv), Faces: make([]uint32, 3*nf)}
	for i := range m.Positions {
		m.Positions[i] = rng.Uint32N(uint32(1) << bits)
	}
	for i := range m.Faces {
		m.Faces[i] = rng.Uint32N(uint32(nv))
	}
	return m
}

// sameMesh has nv identical vertices and nf copies of one degenerate face.
func sameMesh(nv, nf int) Mesh {
	return Mesh{Bits: 16, Positions: slices.Repeat([]uint32{7, 7, 7}, nv), Faces: make([]uint32, 3*nf)}
}

// checkDecoded compares a decoded mesh with the one encoded: the same
// vertices in the same order, the same faces with the same corner order.
func checkDecoded(t *testing.T, m Mesh, numPoints int, positions, faces []uint32) {
	t.Helper()
	if numPoints != len(m.Positions)/3 {
		t.Fatalf("decoded %d vertices, encoded %d", numPoints, len(m.Positions)/3)
	}
	if i := firstDiff(positions, m.Positions); i >= 0 {
		t.Fatalf("position value %d (vertex %d): decoded %v, encoded %v", i, i/3, at(positions, i), at(m.Positions, i))
	}
	if i := firstDiff(faces, m.Faces); i >= 0 {
		t.Fatalf("face index %d (face %d): decoded %v, encoded %v", i, i/3, at(faces, i), at(m.Faces, i))
	}
}

// firstDiff is the first index where a and b differ (a shorter slice
// differs at its end), or -1.
func firstDiff(a, b []uint32) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

func at(s []uint32, i int) any {
	if i < len(s) {
		return s[i]
	}
	return "nothing"
}

func TestEncodeDecodes(t *testing.T) {
	var e Encoder // one encoder for every case: scratch reuse must not leak
	for _, tc := range cases(t) {
		t.Run(tc.name, func(t *testing.T) {
			b, err := e.Append(nil, tc.mesh)
			if err != nil {
				t.Fatal(err)
			}
			d, err := dracotest.Decode(b)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			checkDecoded(t, tc.mesh, d.NumPoints, d.Positions, d.Faces)
			if tc.padded >= 0 && (d.Padding > 0) != (tc.padded == 1) {
				t.Errorf("%d bytes of padding, want padded=%d", d.Padding, tc.padded)
			}
			if tc.schemes != "" {
				got := ""
				for _, s := range d.Schemes {
					got += map[byte]string{0: "t", 1: "r"}[s]
				}
				ok := len(got) == len(tc.schemes)
				for i := 0; ok && i < len(got); i++ {
					ok = tc.schemes[i] == '?' || tc.schemes[i] == got[i]
				}
				if !ok {
					t.Errorf("symbol schemes %q, want %q", got, tc.schemes)
				}
			}
		})
	}
}

// TestCasesCoverEveryPath keeps the table honest: between them the cases
// take each symbol scheme and attribute coder, with and without padding.
func TestCasesCoverEveryPath(t *testing.T) {
	seen := map[string]bool{}
	var e Encoder
	for _, tc := range cases(t) {
		b, err := e.Append(nil, tc.mesh)
		if err != nil {
			t.Fatal(err)
		}
		d, err := dracotest.Decode(b)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		seen[map[bool]string{false: "unpadded", true: "padded"}[d.Padding > 0]] = true
		for _, s := range d.Schemes {
			seen[map[byte]string{0: "tagged symbols", 1: "raw symbols"}[s]] = true
		}
		seen[map[byte]string{0: "generic attribute", 1: "integer attribute"}[d.AttrCoder]] = true
	}
	for _, p := range []string{"unpadded", "padded", "tagged symbols", "raw symbols", "generic attribute", "integer attribute"} {
		if !seen[p] {
			t.Errorf("no case takes the path %q", p)
		}
	}
}

func TestEncodeRejects(t *testing.T) {
	tri := []uint32{0, 1, 2}
	pos := []uint32{0, 0, 0, 1, 1, 1, 2, 2, 2}
	for _, tc := range []struct {
		name  string
		mesh  Mesh
		field string
		index int
	}{
		{"bits 0", Mesh{Bits: 0, Positions: pos, Faces: tri}, "Bits", -1},
		{"bits 31", Mesh{Bits: 31, Positions: pos, Faces: tri}, "Bits", -1},
		{"negative bits", Mesh{Bits: -3}, "Bits", -1},
		{"ragged positions", Mesh{Bits: 10, Positions: pos[:8], Faces: tri}, "Positions", -1},
		{"ragged faces", Mesh{Bits: 10, Positions: pos, Faces: []uint32{0, 1}}, "Faces", -1},
		{"value above 2^bits-1", Mesh{Bits: 10, Positions: []uint32{0, 0, 0, 1024, 0, 0, 0, 0, 1}, Faces: tri}, "Positions", 3},
		{"value above 2^16-1", Mesh{Bits: 16, Positions: []uint32{0, 0, 0, 0, 0, 0, 0, 0, 65536}, Faces: tri}, "Positions", 8},
		{"index past the vertices", Mesh{Bits: 10, Positions: pos, Faces: []uint32{0, 1, 3}}, "Faces", 2},
		{"faces without vertices", Mesh{Bits: 10, Faces: tri}, "Faces", 0},
		{"vertices without faces", Mesh{Bits: 10, Positions: pos}, "Positions", -1},
		{"more than 3 vertices per face", Mesh{Bits: 10, Positions: slices.Repeat(pos, 2), Faces: []uint32{0, 1, 2}}, "Positions", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e Encoder
			dst := []byte("keep")
			out, err := e.Append(dst, tc.mesh)
			if !errors.Is(err, ErrInvalidMesh) {
				t.Fatalf("error %v, want ErrInvalidMesh", err)
			}
			var ie *InputError
			if !errors.As(err, &ie) || ie.Field != tc.field || ie.Index != tc.index {
				t.Fatalf("error %#v, want field %s index %d", err, tc.field, tc.index)
			}
			if string(out) != "keep" {
				t.Fatalf("dst changed to %q", out)
			}
		})
	}
}

// TestAppendReusesMemory: Append extends the caller's buffer in place and,
// once its scratch has grown, allocates nothing.
func TestAppendReusesMemory(t *testing.T) {
	m := sphereMesh(20, 30, 16)
	var e Encoder
	first, err := e.Append([]byte("prefix"), m)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(first, []byte("prefix")) {
		t.Fatalf("prefix lost: %q", first[:10])
	}
	want := first[len("prefix"):]
	buf := make([]byte, 0, 2*len(first))
	allocs := testing.AllocsPerRun(20, func() {
		out, err := e.Append(buf[:0], m)
		if err != nil || !bytes.Equal(out, want) || &out[0] != &buf[:1][0] {
			t.Fatal("append did not reproduce the encoding in place")
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per Append, want 0", allocs)
	}
}

// TestGolden pins the bytes of a small mesh (a tetrahedron with a
// degenerate face), so a change of the format is deliberate:
// go test -run TestGolden -update rewrites it, and the external decoder
// tests check the file too.
func TestGolden(t *testing.T) {
	b, err := Encode(tetra)
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "tetra.drc"), b, *update)
}

var tetra = Mesh{
	Bits:      10,
	Positions: []uint32{0, 0, 0, 1023, 0, 0, 0, 1023, 0, 0, 0, 1023, 5, 6, 7},
	Faces:     []uint32{0, 1, 2, 0, 2, 3, 0, 3, 1, 1, 3, 2, 4, 4, 4},
}

// FuzzEncode builds a mesh from the input (bits, vertices, faces; values
// sometimes left above the bound, indices sometimes past the vertices) and
// checks the encoder either refuses it with ErrInvalidMesh or writes a
// stream the test decoder gives back exactly.
func FuzzEncode(f *testing.F) {
	f.Add([]byte{9, 3, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0, 1, 2})
	f.Add([]byte{29, 40, 1, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0x3f, 7, 3, 9, 200, 100, 4})
	f.Add([]byte{15, 200, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 3 {
			return
		}
		bits := 1 + int(data[0])%MaxBits
		nv := int(data[1])
		strict := data[2]&1 == 0 // mask values and indices into range
		data = data[3:]
		m := Mesh{Bits: bits, Positions: make([]uint32, 3*nv)}
		for i := range m.Positions {
			var v uint32
			if len(data) >= 4 {
				v = uint32(data[0]) | uint32(data[1])<<8 | uint32(data[2])<<16 | uint32(data[3])<<24
				data = data[4:]
			}
			if strict {
				v &= uint32(1)<<bits - 1
			}
			m.Positions[i] = v
		}
		for len(data) >= 3 {
			for _, c := range data[:3] {
				v := uint32(c)
				if strict && nv > 0 {
					v %= uint32(nv)
				}
				m.Faces = append(m.Faces, v)
			}
			data = data[3:]
		}
		if strict && nv == 0 {
			m.Faces = nil
		}
		if strict && len(m.Positions) > 3*len(m.Faces) {
			m.Positions = m.Positions[:3*len(m.Faces)] // Draco < 1.5.7 needs ≤ 3 per face
			for i, v := range m.Faces {
				if nv := uint32(len(m.Positions) / 3); v >= nv {
					m.Faces[i] = v % nv
				}
			}
		}
		b, err := Encode(m)
		if err != nil {
			if strict || !errors.Is(err, ErrInvalidMesh) {
				t.Fatalf("encode: %v", err)
			}
			return
		}
		d, err := dracotest.Decode(b)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		checkDecoded(t, m, d.NumPoints, d.Positions, d.Faces)
	})
}

func BenchmarkEncode(b *testing.B) {
	for _, bc := range []struct {
		name string
		mesh Mesh
	}{
		{"sphere-100k-tris-16bit", sphereMesh(250, 200, 16)},
		{"grid-20k-tris-10bit", gridMesh(100, 10)},
		// A small fragment whose vertices spread over the whole 16-bit
		// range: the symbol alphabet is far larger than the fragment.
		{"random-1k-tris-16bit", randomMesh(rand.New(rand.NewPCG(1, 1)), 500, 1000, 16)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var e Encoder
			var buf []byte
			tris := len(bc.mesh.Faces) / 3
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if buf, err = e.Append(buf[:0], bc.mesh); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(tris)*float64(b.N)/b.Elapsed().Seconds(), "tris/s")
			b.ReportMetric(float64(len(buf))/float64(tris), "bytes/tri")
		})
	}
}
