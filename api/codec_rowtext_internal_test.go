package api

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/zvfserve/zvfserve/zvf"
)

// f32Rows is a float32 × dims vertex column of vals.
func f32Rows(t testing.TB, vals []float32, dims int) zvf.Column {
	data := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
	}
	return vertexColumn(t, "float32", dims, data)
}

// vertexColumn is a vertex column of dtype with data's whole rows.
func vertexColumn(t testing.TB, dtype string, dims int, data []byte) zvf.Column {
	c, err := zvf.NewColumn("vertices", dtype, dims, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.Data = data[:len(data)/c.RowBytes()*c.RowBytes()]
	return c
}

// specialFloat32s are the values whose text is easiest to get wrong: signed
// zeros, the subnormal range, the extremes, integers at the switch to
// exponent form, powers of two (irregular rounding intervals), and the
// non-finite values JSON writes as null.
var specialFloat32s = []float32{
	0, float32(math.Copysign(0, -1)), math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32,
	math.Float32frombits(0x007fffff), math.Float32frombits(0x00800000), math.MaxFloat32, -math.MaxFloat32,
	999999, 1e6, 1e-4, 1e-5, 0.1, 1.0 / 3, 16777216, 16777217, 1 << 20, 0.5, -2.5e-38,
	float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)),
}

// randomFloat32 draws values from every exponent, and often from the
// coordinate range stores hold.
func randomFloat32(r *rand.Rand) float32 {
	switch r.IntN(4) {
	case 0:
		return specialFloat32s[r.IntN(len(specialFloat32s))]
	case 1:
		return math.Float32frombits(r.Uint32())
	default:
		return float32(r.Float64()*2000 - 1000)
	}
}

// directJSON is what the JSON encoder writes for rows sel of c without
// prepared text.
func directJSON(c *zvf.Column, sel textRows, lead bool) []byte {
	var out []byte
	n := sel.hi - sel.lo
	if !sel.all {
		n = len(sel.rows)
	}
	for i := range n {
		if lead || i > 0 {
			out = append(out, ',')
		}
		r := sel.lo + i
		if !sel.all {
			r = int(sel.rows[i])
		}
		out = appendRow(out, c, r)
	}
	return out
}

// TestRowTextIsAppendRow: a chunk's prepared text gives, for whole chunks,
// spans and scattered rows (runs and lone rows), with and without a
// leading comma, the bytes the encoders format directly, over random rows
// of every exponent and the special values, in 1 to 4 dimensions.
func TestRowTextIsAppendRow(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 5))
	for trial := range 200 {
		dims := 1 + trial%4
		rows := r.IntN(300)
		if trial == 0 {
			rows = 0
		}
		vals := make([]float32, rows*dims)
		for i := range vals {
			vals[i] = randomFloat32(r)
		}
		if trial == 1 {
			copy(vals, specialFloat32s)
		}
		c := f32Rows(t, vals, dims)
		if trial%10 == 9 { // other vertex types take appendRow's general path
			c = vertexColumn(t, []string{"float64", "int16", "uint32"}[trial/10%3], dims, c.Data)
			rows = len(c.Data) / c.RowBytes()
		}
		v, size := buildRowText(c)
		rt := v.(*rowText)
		if want := 64 + int64(len(rt.text)) + 4*int64(len(rt.off)); size != want || size != rt.size() {
			t.Fatalf("size %d, want %d (text and offsets, no spare capacity)", size, want)
		}
		for i := range rows {
			if got, want := rt.row(textRows{all: true, hi: rows}, i), appendRow(nil, &c, i); !bytes.Equal(got, want) {
				t.Fatalf("row %d: %q, want %q", i, got, want)
			}
		}
		sels := []textRows{{all: true, hi: rows}}
		if rows > 0 {
			lo := r.IntN(rows)
			sels = append(sels, textRows{all: true, lo: lo, hi: lo + r.IntN(rows-lo+1)})
			var pick []int32
			for i := range rows {
				if r.IntN(3) > 0 {
					pick = append(pick, int32(i))
				}
			}
			sels = append(sels, textRows{rows: pick}, textRows{rows: []int32{int32(rows - 1)}})
		}
		for _, sel := range sels {
			for _, lead := range []bool{false, true} {
				var got bytes.Buffer
				w := bufio.NewWriter(&got)
				if err := rt.writeJSON(w, sel, lead); err != nil {
					t.Fatal(err)
				}
				if err := w.Flush(); err != nil {
					t.Fatal(err)
				}
				if want := directJSON(&c, sel, lead); !bytes.Equal(got.Bytes(), want) {
					t.Fatalf("trial %d, rows %+v, lead %v:\n got %q\nwant %q", trial, sel, lead, got.Bytes(), want)
				}
			}
		}
	}
}

// FuzzRowText: any float32 rows' prepared text is what appendRow writes.
func FuzzRowText(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0x80, 1, 0, 0, 0, 0xff, 0xff, 0x7f, 0x7f}, uint8(3))
	f.Add([]byte{0, 0, 0xc0, 0x7f}, uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, dims uint8) {
		d := 1 + int(dims%4)
		c := vertexColumn(t, "float32", d, data)
		v, _ := buildRowText(c)
		rt := v.(*rowText)
		rows := len(c.Data) / (4 * d)
		for i := range rows {
			if got, want := rt.row(textRows{all: true, hi: rows}, i), appendRow(nil, &c, i); !bytes.Equal(got, want) {
				t.Fatalf("row %d: %q, want %q", i, got, want)
			}
		}
	})
}
