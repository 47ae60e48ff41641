package api

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/zarr"
)

// Dequantize is dequantize for the external tests (precision_test.go).
var Dequantize = dequantize

// dequantize decodes a kind 6 payload as a client does: offset + q ×
// scale in float64, the product rounded before the sum (float64(…) keeps
// Go from fusing them), planar: all rows of axis 0, then axis 1, ….
func dequantize(payload []byte, bits, rows, dims int) ([]float64, error) {
	w := bits / 8
	if bits != 8 && bits != 16 && bits != 32 {
		return nil, fmt.Errorf("%d bits per value", bits)
	}
	if len(payload) != 16*dims+rows*dims*w {
		return nil, fmt.Errorf("payload of %d bytes for %d rows of %d values of %d bits", len(payload), rows, dims, bits)
	}
	out := make([]float64, rows*dims) // row-major, as the column
	for a := range dims {
		off := math.Float64frombits(binary.LittleEndian.Uint64(payload[8*a:]))
		scale := math.Float64frombits(binary.LittleEndian.Uint64(payload[8*(dims+a):]))
		p := payload[16*dims+a*rows*w:]
		for i := range rows {
			var q uint32
			switch w {
			case 1:
				q = uint32(p[i])
			case 2:
				q = uint32(binary.LittleEndian.Uint16(p[2*i:]))
			default:
				q = binary.LittleEndian.Uint32(p[4*i:])
			}
			out[i*dims+a] = off + float64(float64(q)*scale)
		}
	}
	return out, nil
}

// stored is element i of col as the exact number it is (ok false beyond
// what a float64 holds exactly).
func stored(col *zvf.Column, i int) (float64, bool) {
	n := col.At(i)
	switch n.Kind {
	case zvf.KindFloat:
		return n.F, true
	case zvf.KindInt:
		return float64(n.I), n.I <= 1<<53 && n.I >= -1<<53
	}
	return float64(n.U), n.U <= 1<<53
}

// checkQuantized holds a quantize result to the contract: every decoded
// value within p of the stored one, the step 2P (or the retry's), and no
// more bits than the batch's cells need.
func checkQuantized(col *zvf.Column, rows, dims int, p float64, payload []byte, bits int) error {
	got, err := dequantize(payload, bits, rows, dims)
	if err != nil {
		return err
	}
	maxQ := 0.0
	for a := range dims {
		scale := math.Float64frombits(binary.LittleEndian.Uint64(payload[8*(dims+a):]))
		if scale != 2*p && scale != 2*p*quantMargins[1] {
			return fmt.Errorf("axis %d: scale %g for precision %g", a, scale, p)
		}
	}
	for i := range rows * dims {
		v, ok := stored(col, i)
		if !ok {
			return fmt.Errorf("value %d (%v) has no exact float64, yet the batch was quantized", i, col.At(i))
		}
		if e := math.Abs(got[i] - v); !(e <= p) {
			return fmt.Errorf("row %d axis %d: stored %v decodes to %v, %g away, over the precision %g", i/dims, i%dims, v, got[i], e, p)
		}
		a := i % dims
		off := math.Float64frombits(binary.LittleEndian.Uint64(payload[8*a:]))
		scale := math.Float64frombits(binary.LittleEndian.Uint64(payload[8*(dims+a):]))
		maxQ = max(maxQ, math.Round((got[i]-off)/scale))
	}
	// The fewest bits: a wider batch has a value past the narrower width
	// (give or take the one cell a rounding moves a value by).
	if bits > 8 && maxQ+1 < float64(uint64(1)<<(bits/2)) {
		return fmt.Errorf("%d bits, though the largest value sent is %g", bits, maxQ)
	}
	return nil
}

var quantDTypes = []string{"float32", "float64", "float16", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"}

// column makes rows × dims values of dtype from vals (row-major), each
// converted as the store would hold it.
func column(t testing.TB, dtype string, dims int, vals []float64) zvf.Column {
	t.Helper()
	var b []byte
	for _, v := range vals {
		switch dtype {
		case "float32":
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(v)))
		case "float64":
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
		case "float16":
			b = binary.LittleEndian.AppendUint16(b, zarr.Float16Bits(v))
		case "int8", "uint8":
			b = append(b, byte(int64(v)))
		case "int16", "uint16":
			b = binary.LittleEndian.AppendUint16(b, uint16(int64(v)))
		case "int32", "uint32":
			b = binary.LittleEndian.AppendUint32(b, uint32(int64(v)))
		case "uint64":
			b = binary.LittleEndian.AppendUint64(b, uint64(v))
		default:
			b = binary.LittleEndian.AppendUint64(b, uint64(int64(v)))
		}
	}
	c, err := zvf.NewColumn("vertices", dtype, dims, b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestQuantizeWithinPrecision is the property the kind 6 block promises:
// over random batches of every vertex type, sizes, magnitudes, spreads and
// precisions (powers of two and not, coarse and finer than float32), every
// coordinate of a quantized batch decodes, as a client computes it, to
// within P of the stored one; and a batch goes out exact (kind 1) only
// when it must: P finer than 32 bits reach over its spread, or near
// float64's resolution at its magnitude.
func TestQuantizeWithinPrecision(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(25, 6))
	var z quantizer
	quantized, exact := 0, 0
	for c := range 3000 {
		dtype := quantDTypes[r.IntN(len(quantDTypes))]
		dims := 1 + r.IntN(4)
		rows := []int{0, 1, 2, 7, 100, 1000}[r.IntN(6)]
		// Centre and spread: floats from tiny to far from the origin,
		// integers within their type.
		centre := []float64{0, 1, -3.5, 1e3, 4096, -1e6, 1e9, 3e12}[r.IntN(8)]
		spread := math.Pow(10, -3+9*r.Float64())
		lo, hi := centre-spread, centre+spread
		switch dtype {
		case "float16":
			lo, hi = max(lo, -6e4), min(hi, 6e4)
		case "int8":
			lo, hi = max(lo, -128), min(hi, 127)
		case "uint8":
			lo, hi = max(lo, 0), min(hi, 255)
		case "int16":
			lo, hi = max(lo, -32768), min(hi, 32767)
		case "uint16":
			lo, hi = max(lo, 0), min(hi, 65535)
		case "int32":
			lo, hi = max(lo, -1<<31), min(hi, 1<<31-1)
		case "uint32", "uint64":
			lo, hi = max(lo, 0), min(hi, 1<<32-1)
		}
		if lo > hi {
			lo, hi = hi, lo
		}
		vals := make([]float64, rows*dims)
		for i := range vals {
			vals[i] = lo + (hi-lo)*r.Float64()
			if r.IntN(10) == 0 && i > 0 {
				vals[i] = vals[i-1] // repeats
			}
			if dtype != "float32" && dtype != "float64" && dtype != "float16" {
				vals[i] = math.Round(vals[i])
			}
		}
		if dtype == "int64" && r.IntN(8) == 0 && len(vals) > 0 {
			vals[0] = 1<<62 + 1 // no float64 holds it: must go out exact
		}
		col := column(t, dtype, dims, vals)
		// P from a millionth of float32's resolution at the values to
		// twice their spread; a third are powers of two.
		p := math.Max(hi-lo, 1) * math.Pow(10, -13+14*r.Float64())
		if r.IntN(3) == 0 {
			p = math.Exp2(math.Round(math.Log2(p)))
		}
		payload, bits, ok := z.quantize(&col, rows, dims, p)
		name := fmt.Sprintf("case %d: %d×%d %s around %g ± %g, precision %g", c, rows, dims, dtype, centre, spread, p)
		if !ok {
			exact++
			// Exact is right when 32 bits cannot count the cells or P is
			// near float64's resolution at these values, or a value has
			// no float64; anything else is a needless fallback.
			mag, vlo, vhi := 0.0, math.Inf(1), math.Inf(-1)
			fits := true
			for i := range rows * dims {
				v, ok := stored(&col, i)
				fits = fits && ok && !math.IsInf(v, 0)
				mag, vlo, vhi = max(mag, math.Abs(v)), min(vlo, v), max(vhi, v)
			}
			if fits && (vhi-vlo)/(2*p) < 1<<31 && mag/p < 1<<40 {
				t.Errorf("%s: sent exact, though 32 bits reach", name)
			}
			continue
		}
		quantized++
		if err := checkQuantized(&col, rows, dims, p, payload, bits); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if quantized < 1000 || exact < 50 {
		t.Errorf("%d batches quantized, %d exact: the cases do not cover both", quantized, exact)
	}
}

// TestQuantizeBitsAndLattice: the widths the targets rest on. On the
// bench's grid (chunks of 125 in a cube of 1,000), P = 1,000/4,096 puts a
// chunk's values on exactly 256 cells (8 bits) and P = 1,000/65,536 on
// 4,096 (16 bits); every batch's offset lies on one lattice (a whole
// number of steps plus a half from 0); a batch of one value repeated is 8
// bits; non-finite coordinates go out exact.
func TestQuantizeBitsAndLattice(t *testing.T) {
	t.Parallel()
	var z quantizer
	for _, tc := range []struct {
		name  string
		p     float64
		vals  []float64
		dtype string
		bits  int // 0: sent exact
	}{
		// One chunk, [125, 250) on every axis.
		{"chunk at 1/4096", 1000.0 / 4096, []float64{125, 125.001, 249.999, 249.99, 200, 130}, "float32", 8},
		{"chunk at 1/65536", 1000.0 / 65536, []float64{125, 125.001, 249.999, 249.99, 200, 130}, "float32", 16},
		{"one value", 1e-9, []float64{7, 7, 7, 7, 7, 7}, "float64", 8},
		{"integers at 0.5", 0.5, []float64{-40000, 5, 1 << 20, 3, 0, 0}, "int32", 32},
		{"NaN", 1, []float64{1, math.NaN(), 2, 3, 4, 5}, "float32", 0},
		{"infinity", 1, []float64{1, math.Inf(1), 2, 3, 4, 5}, "float64", 0},
		{"finer than 32 bits reach", 1e-9, []float64{0, 0, 0, 1e3, 1e3, 1e3}, "float64", 0},
	} {
		col := column(t, tc.dtype, 3, tc.vals)
		payload, bits, ok := z.quantize(&col, 2, 3, tc.p)
		if !ok {
			bits = 0
		}
		if bits != tc.bits {
			t.Errorf("%s: %d bits, want %d", tc.name, bits, tc.bits)
			continue
		}
		if !ok {
			continue
		}
		if err := checkQuantized(&col, 2, 3, tc.p, payload, bits); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		for a := range 3 {
			off := math.Float64frombits(binary.LittleEndian.Uint64(payload[8*a:]))
			s := math.Float64frombits(binary.LittleEndian.Uint64(payload[8*(3+a):]))
			if k := off/s - 0.5; k != math.Round(k) {
				t.Errorf("%s: axis %d offset %v is not on the lattice of step %v (%v steps)", tc.name, a, off, s, k)
			}
		}
	}
}

// TestQuantizePowerOfTwoKeepsCells is what the viewer's seams rely on
// (web/static/layer.js, docs/binary-format.md): at a power-of-two P the
// scale is exactly 2P and every value decodes into the cell [k·2P,
// (k+1)·2P) it lies in, so no value crosses a multiple of 2P (one on it
// decodes above it), whatever batch it comes in. Values on, just below
// and just above such multiples, float32 and float64, several batches.
func TestQuantizePowerOfTwoKeepsCells(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(25, 3))
	var z quantizer
	for _, dtype := range []string{"float32", "float64"} {
		for e := -12; e <= 4; e += 4 {
			p := math.Ldexp(1, e)
			s := 2 * p
			for batch := range 20 {
				const rows, dims = 64, 3
				base := math.Ldexp(float64(r.IntN(1<<12)-1<<11), e+1+r.IntN(6)) // a multiple of 2P, near or far from 0
				vals := make([]float64, rows*dims)
				for i := range vals {
					v := base + s*float64(r.IntN(300))
					switch i % 4 {
					case 1:
						v = math.Nextafter(v, math.Inf(-1))
					case 2:
						v = math.Nextafter(v, math.Inf(1))
					case 3:
						v += r.Float64() * s
					}
					if dtype == "float32" {
						v = float64(float32(v))
					}
					vals[i] = v
				}
				col := column(t, dtype, dims, vals)
				payload, bits, ok := z.quantize(&col, rows, dims, p)
				if !ok {
					t.Fatalf("%s P=%g batch %d: sent exact", dtype, p, batch)
				}
				got, err := dequantize(payload, bits, rows, dims)
				if err != nil {
					t.Fatal(err)
				}
				for a := range dims {
					if sc := math.Float64frombits(binary.LittleEndian.Uint64(payload[8*(dims+a):])); sc != s {
						t.Fatalf("%s P=%g: scale %v, want exactly %v", dtype, p, sc, s)
					}
				}
				for i, x := range vals {
					if math.Floor(got[i]/s) != math.Floor(x/s) {
						t.Fatalf("%s P=%g batch %d: %v decodes to %v, in another cell of %v", dtype, p, batch, x, got[i], s)
					}
				}
			}
		}
	}
}

// FuzzQuantize: any bytes as any vertex type, any precision: quantize
// never panics, and whatever it quantizes decodes within the precision.
func FuzzQuantize(f *testing.F) {
	f.Add([]byte{0, 0, 128, 63, 0, 0, 0, 64, 0, 0, 64, 64}, uint8(0), uint8(3), 0.01)
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8}, uint8(9), uint8(1), 0.5)
	f.Add([]byte{0, 0, 192, 127, 0, 0, 128, 127}, uint8(0), uint8(2), 1.0)
	// float32 × 3 rows (dims 2 is three axes): bounds3 and cells3's path
	f.Add(float32Rows([][3]float32{{1, 2, 3}, {-4.5, 5, 60}, {0.25, 7, 8}}), uint8(0), uint8(2), 0.01)
	// 19 such rows: two vector steps of 8 and three rows after them
	steps := make([][3]float32, 19)
	for i := range steps {
		steps[i] = [3]float32{float32(i) * 1.7, 100 - float32(i)*3.1, float32(i*i) * 0.3}
	}
	f.Add(float32Rows(steps), uint8(0), uint8(2), 0.05)
	f.Fuzz(func(t *testing.T, data []byte, dt, dims uint8, p float64) {
		dtype := quantDTypes[int(dt)%len(quantDTypes)]
		d := 1 + int(dims)%4
		c, err := zvf.NewColumn("vertices", dtype, d, nil)
		if err != nil {
			t.Fatal(err)
		}
		rows := len(data) / (d * c.ItemBytes())
		c.Data = data[:rows*d*c.ItemBytes()]
		if !(p > 0) || p > 1e300 {
			return // refused by the handler
		}
		var z quantizer
		payload, bits, ok := z.quantize(&c, rows, d, p)
		// Float32 × 3 batches take one pass over the rows (bounds3,
		// cells3): the same as the passes an axis at a time, byte for byte.
		ref := quantizer{axisByAxis: true}
		refPayload, refBits, refOK := ref.quantize(&c, rows, d, p)
		if ok != refOK || bits != refBits || string(payload) != string(refPayload) {
			t.Fatalf("%d rows of %d %s: %v, %d bits, %x; an axis at a time %v, %d bits, %x", rows, d, dtype, ok, bits, payload, refOK, refBits, refPayload)
		}
		if !ok {
			return
		}
		if err := checkQuantized(&c, rows, d, p, payload, bits); err != nil {
			t.Fatal(err)
		}
	})
}

// BenchmarkQuantize: one chunk of the bench's store (3,906 uniform float32
// points in a cube of 125) at P = 1,000 / 65,536 (16 bits); MB/s is of the
// float32 coordinates read.
func BenchmarkQuantize(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	const rows = 3906
	vals := make([]float64, 3*rows)
	for i := range vals {
		vals[i] = float64(float32(125 + 125*r.Float64()))
	}
	col := column(b, "float32", 3, vals)
	var z quantizer
	b.SetBytes(int64(len(col.Data)))
	for b.Loop() {
		if _, bits, ok := z.quantize(&col, rows, 3, 1000.0/65536); !ok || bits != 16 {
			b.Fatal(bits, ok)
		}
	}
}

// TestBounds3: a float32 × 3 batch's bounds found in one pass over its
// rows are bounds' axis by axis: the smallest and largest values, and a
// refusal for a NaN or an infinity anywhere, first row or last, in the
// vector steps or the rows after them.
func TestBounds3(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	negz := float32(math.Copysign(0, -1))
	for _, rows := range [][][3]float32{
		{},
		{{1, 2, 3}},
		{{1, 2, 3}, {-4, 5, -6}, {0.5, -7, 8}},
		{{0, negz, 0}, {negz, 0, negz}},
		{{nan, 1, 1}, {2, 2, 2}},
		{{1, 1, 1}, {2, 2, nan}},
		{{1, 1, 1}, {2, -inf, 2}},
		{{inf, 1, 1}},
		{{1, 1, 1}, {3, 3, 3}, {2, 2, inf}},
	} {
		checkBounds3(t, float32Rows(rows))
	}
}

// FuzzBounds3: any bytes as float32 × 3 rows.
func FuzzBounds3(f *testing.F) {
	f.Add(float32Rows([][3]float32{{1, 2, 3}, {-4, 5, -6}}))
	f.Add(float32Rows([][3]float32{{1, float32(math.NaN()), 3}}))
	f.Fuzz(func(t *testing.T, d []byte) {
		checkBounds3(t, d[:len(d)/12*12])
	})
}

func float32Rows(rows [][3]float32) []byte {
	var d []byte
	for _, r := range rows {
		for _, v := range r {
			d = binary.LittleEndian.AppendUint32(d, math.Float32bits(v))
		}
	}
	return d
}

// checkBounds3 compares bounds3 with bounds on d's rows.
func checkBounds3(t *testing.T, d []byte) {
	t.Helper()
	rows := len(d) / 12
	col := &zvf.Column{DType: "float32", Channels: 3, Data: d}
	var z quantizer
	wantOK := true
	var wantLo, wantHi [3]float64
	for a := range 3 {
		lo, hi, ok := z.bounds(col, rows, 3, a)
		wantOK = wantOK && ok
		wantLo[a], wantHi[a] = lo, hi
	}
	lo, hi := make([]float64, 3), make([]float64, 3)
	ok := bounds3(d, lo, hi)
	if ok != wantOK {
		t.Fatalf("rows %x: ok %v, axis by axis %v", d, ok, wantOK)
	}
	if !ok {
		return
	}
	for a := range 3 {
		// Numbers, not bits: of a −0 and a +0 either may be the bound
		// (FuzzQuantize checks that the payload does not tell).
		if lo[a] != wantLo[a] || hi[a] != wantHi[a] {
			t.Fatalf("rows %x axis %d: %v–%v, axis by axis %v–%v", d, a, lo[a], hi[a], wantLo[a], wantHi[a])
		}
	}
}

// TestQuantizeSteps: float32 × 3 batches, quantized 8 rows a step where
// the CPU has the steps (quantize_amd64.s) and a row at a time around
// them, are the payloads of an axis at a time, byte for byte: batches of
// every length around a step's, at 8, 16 and 32 bits, with values on and
// beside cell edges anywhere in a step (where the steps stop), at
// precisions near float64's resolution (neighbour cells, the retry,
// refusal), with zeros of both signs, and with a NaN or an infinity at
// every place.
func TestQuantizeSteps(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	stops := 0
	// same quantizes d both ways and requires one answer; it returns the
	// quantizer that took the steps.
	same := func(d []byte, p float64) *quantizer {
		t.Helper()
		rows := len(d) / 12
		c, err := zvf.NewColumn("vertices", "float32", 3, nil)
		if err != nil {
			t.Fatal(err)
		}
		c.Data = d
		var z quantizer
		payload, bits, ok := z.quantize(&c, rows, 3, p)
		ref := quantizer{axisByAxis: true}
		refPayload, refBits, refOK := ref.quantize(&c, rows, 3, p)
		if ok != refOK || bits != refBits || string(payload) != string(refPayload) {
			t.Fatalf("%d rows at p %v: %v, %d bits; an axis at a time %v, %d bits (payloads equal: %v)\nrows %x",
				rows, p, ok, bits, refOK, refBits, string(payload) == string(refPayload), d)
		}
		if ok {
			if err := checkQuantized(&c, rows, 3, p, payload, bits); err != nil {
				t.Fatal(err)
			}
			// Did the steps stop in this batch? (Counted to show the
			// cases reach the rows done one at a time.)
			if w := bits / 8; w <= 2 {
				out := make([]byte, 3*rows*w)
				if n, ran := cells3SIMD(d, out, rows*w, w, &z.rules); ran && n < rows/8*8 {
					stops++
				}
			}
		}
		return &z
	}
	edges := []float64{0.1, 0.3, 1.0 / 3, 0.7, 2.5e-4, 1e-6}
	for _, rows := range []int{1, 7, 8, 9, 15, 16, 17, 23, 24, 25, 40, 100} {
		for _, p := range []float64{0.5, 0.1, 1.0 / 3, 0.07, 1e-3, 2.5e-4, 1e-6, 1e-12, 3e-15} {
			for range 6 {
				v := make([][3]float32, rows)
				for i := range v {
					for a := range 3 {
						x := 125 + 125*rng.Float64()
						switch rng.IntN(4) {
						case 0: // on an edge of a lattice near p's, as float32 rounds it
							s := 2 * edges[rng.IntN(len(edges))]
							x = math.Floor(x/s) * s
						case 1: // one float32 beside such an edge
							s := 2 * p
							x = float64(math.Nextafter32(float32(math.Floor(x/s)*s), float32(rng.IntN(2))*1e9))
						}
						v[i][a] = float32(x)
					}
				}
				same(float32Rows(v), p)
			}
		}
	}
	if quantAVX2 && stops == 0 {
		t.Fatal("the steps never stopped: the rows around them were not tested")
	}
	t.Logf("%d batches where the steps stopped", stops)
	// Values away from cell edges: the steps do nearly every row (a step
	// that puts values in the wrong cells stops, and the rows done one at
	// a time would hide it but for this).
	if quantAVX2 {
		const rows = 4000
		v := make([][3]float32, rows)
		for i := range v {
			v[i] = [3]float32{float32(125 + 125*rng.Float64()), float32(125 + 125*rng.Float64()), float32(125 + 125*rng.Float64())}
		}
		d := float32Rows(v)
		// Cells of 2p across the values' 125: 125 (8 bits), 625 and 62,500.
		for _, c := range []struct {
			p float64
			w int
		}{{0.5, 1}, {0.1, 2}, {1e-3, 2}} {
			p, w := c.p, c.w
			z := same(d, p)
			out := make([]byte, 3*rows*w)
			stepped := 0
			for i := 0; i+8 <= rows; {
				n, _ := cells3SIMD(d[12*i:], out[i*w:], rows*w, w, &z.rules)
				stepped += n
				i += n + 8
			}
			if stepped < rows*9/10 {
				t.Fatalf("p %v: the steps did %d of %d rows", p, stepped, rows)
			}
		}
	}
	// Zeros of both signs, and a NaN or an infinity at every place.
	negz := float32(math.Copysign(0, -1))
	for _, rows := range []int{8, 9, 16, 17, 25} {
		v := make([][3]float32, rows)
		for i := range v {
			for a := range 3 {
				v[i][a] = [...]float32{0, negz, 1, -1}[rng.IntN(4)]
			}
		}
		same(float32Rows(v), 0.01)
		for at := range 3 * rows {
			for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
				w := append([][3]float32(nil), v...)
				w[at/3][at%3] = bad
				d := float32Rows(w)
				same(d, 0.01)
				checkBounds3(t, d)
			}
		}
	}
}
