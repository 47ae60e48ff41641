package zarr

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/zvftest/alloctest"
)

func mustType(t testing.TB, name string) DataType {
	dt, err := ParseDataType(name)
	if err != nil {
		t.Fatal(err)
	}
	return dt
}

func TestCastRounding(t *testing.T) {
	i8 := mustType(t, "int8")
	for _, tc := range []struct {
		in      float64
		mode    string
		oor     string
		want    int64
		wantErr bool
	}{
		{2.5, "nearest-even", "", 2, false}, {3.5, "nearest-even", "", 4, false}, {-2.5, "nearest-even", "", -2, false},
		{2.5, "nearest-away", "", 3, false}, {-2.5, "nearest-away", "", -3, false},
		{2.7, "towards-zero", "", 2, false}, {-2.7, "towards-zero", "", -2, false},
		{2.1, "towards-positive", "", 3, false}, {-2.1, "towards-positive", "", -2, false},
		{2.9, "towards-negative", "", 2, false}, {-2.1, "towards-negative", "", -3, false},
		{200, "", "clamp", 127, false}, {-200, "", "clamp", -128, false},
		{200, "", "wrap", -56, false}, {-129, "", "wrap", 127, false},
		{200, "", "", 0, true}, {math.NaN(), "", "clamp", 0, true}, {math.Inf(1), "", "clamp", 0, true},
	} {
		got, err := cast(num{Kind: KindFloat, F: tc.in}, i8, castRules{rounding: tc.mode, oor: tc.oor})
		if tc.wantErr {
			if err == nil || !errors.Is(err, ErrCorrupt) {
				t.Errorf("cast(%v, %s, %s) = %v, want an error", tc.in, tc.mode, tc.oor, got.I)
			}
			continue
		}
		if err != nil || got.I != tc.want {
			t.Errorf("cast(%v, %s, %s) = %d, %v; want %d", tc.in, tc.mode, tc.oor, got.I, err, tc.want)
		}
	}
	f32 := mustType(t, "float32")
	for _, tc := range []struct {
		mode string
		want float32
	}{{"towards-zero", 0.099999994}, {"nearest-even", 0.1}, {"towards-positive", 0.1}, {"towards-negative", 0.099999994}} {
		got, err := cast(num{Kind: KindFloat, F: 0.1}, f32, castRules{rounding: tc.mode})
		if err != nil || float32(got.F) != tc.want {
			t.Errorf("0.1 → float32 %s = %v, want %v", tc.mode, float32(got.F), tc.want)
		}
	}
	if got, _ := cast(num{Kind: KindFloat, F: math.Copysign(0, -1)}, f32, castRules{}); !math.Signbit(got.F) {
		t.Error("-0 lost its sign")
	}
}

func TestScalarMapAndFill(t *testing.T) {
	f64 := mustType(t, "float64")
	cfg := json.RawMessage(`{"data_type":"uint8","out_of_range":"clamp","scalar_map":{"encode":[["NaN",255]],"decode":[[255,"NaN"]]}}`)
	nanFill := make([]byte, 8)
	putFloat(nanFill, math.NaN())
	cv, err := newCastValue(cfg, rep{shape: []int64{3}, typ: f64, fill: nanFill})
	if err != nil {
		t.Fatal(err)
	}
	r, err := cv.out(rep{shape: []int64{3}, typ: f64, fill: nanFill})
	if err != nil || r.fill[0] != 255 || r.typ.Name != "uint8" {
		t.Fatalf("fill through cast_value: %v %v", r.fill, err)
	}
	in := make([]byte, 24)
	putFloat(in[0:8], math.NaN())
	putFloat(in[8:16], 300)
	putFloat(in[16:24], 1.5)
	enc, err := cv.encode(&Chunk{Shape: []int64{3}, Type: f64, Data: in})
	if err != nil || enc.Data[0] != 255 || enc.Data[1] != 255 || enc.Data[2] != 2 {
		t.Fatalf("encode %v %v", enc, err)
	}
	dec, err := cv.decode(enc, rep{shape: []int64{3}, typ: f64})
	if err != nil || !math.IsNaN(f64.At(dec.Data, 0).F) || f64.At(dec.Data[16:], 0).F != 2 {
		t.Fatalf("decode %v", err)
	}
	so, err := newScaleOffset(json.RawMessage(`{"offset":1000,"scale":10}`), rep{typ: f64})
	if err != nil {
		t.Fatal(err)
	}
	zero := make([]byte, 8)
	r, _ = so.out(rep{shape: []int64{1}, typ: f64, fill: zero})
	if f64.At(r.fill, 0).F != -10000 {
		t.Fatalf("scale_offset fill = %v", f64.At(r.fill, 0).F)
	}
	for _, bad := range []string{`{"scale":0}`, `{"scale":"x"}`, `{"offset":[1]}`} {
		if _, err := newScaleOffset(json.RawMessage(bad), rep{typ: f64}); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	for _, bad := range []string{`{"data_type":"complex64"}`, `{"data_type":"float32","out_of_range":"wrap"}`, `{"data_type":"int8","rounding":"up"}`} {
		if _, err := newCastValue(json.RawMessage(bad), rep{typ: f64, fill: zero}); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

// FuzzCastValue: any configuration, types and bytes fail cleanly or
// decode; nothing panics; decoding and encoding allocate their outputs
// (at most 16 × the data: uint8 ↔ complex128) plus a few KiB for the
// configuration, nothing sized from it.
func FuzzCastValue(f *testing.F) {
	f.Add(`{"data_type":"uint8","out_of_range":"clamp","scalar_map":{"encode":[["NaN",255]],"decode":[[255,"NaN"]]}}`, uint8(11), []byte{1, 2, 255, 0})
	f.Add(`{"data_type":"int16","rounding":"towards-zero"}`, uint8(10), []byte{0, 0, 0, 0, 0, 0, 0xf0, 0x7f})
	f.Add(`{"data_type":"float16","rounding":"nearest-away"}`, uint8(9), []byte{0x00, 0x7c, 0x01, 0x7c})
	names := []string{"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32", "float64", "bool"}
	f.Fuzz(func(t *testing.T, cfg string, which uint8, data []byte) {
		in, _ := ParseDataType(names[int(which)%len(names)])
		fill := make([]byte, in.Size)
		cv, err := newCastValue(json.RawMessage(cfg), rep{shape: []int64{1}, typ: in, fill: fill})
		if err != nil {
			return
		}
		a := alloctest.Bytes(func() {
			n := len(data) / cv.to.Size
			_, _ = cv.decode(&Chunk{Shape: []int64{int64(n)}, Type: cv.to, Data: data[:n*cv.to.Size]}, rep{shape: []int64{int64(n)}, typ: in})
			m := len(data) / in.Size
			_, _ = cv.encode(&Chunk{Shape: []int64{int64(m)}, Type: in, Data: data[:m*in.Size]})
		})
		if bound := 2*16*uint64(len(data)) + 16<<10; a > bound {
			t.Fatalf("%d bytes allocated %d, bound %d", len(data), a, bound)
		}
	})
}

// castNames are the types cast_value converts between.
var castNames = []string{"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32", "float64"}

// checkCast requires cast, with its fast path, to answer as castExact
// does: the same value (floats by their bits) or the same error.
func checkCast(t *testing.T, n num, to DataType, r castRules) {
	t.Helper()
	got, err := cast(n, to, r)
	want, werr := castExact(n, to, r)
	if (err == nil) != (werr == nil) || err != nil && err.Error() != werr.Error() {
		t.Fatalf("%+v to %s %+v: error %v, exactly %v", n, to.Name, r, err, werr)
	}
	if err == nil && (got.Kind != want.Kind || got.I != want.I || got.U != want.U || math.Float64bits(got.F) != math.Float64bits(want.F)) {
		t.Fatalf("%+v to %s %+v: %+v, exactly %+v", n, to.Name, r, got, want)
	}
}

// TestCastFastIsExact: cast's fast path gives castExact's answer for
// values at and beside every type's range bounds, float32's and float64's
// exact-integer bounds, halves and quarters (where the rounding modes
// part), signed zeros, subnormals, the largest finite values, NaN and the
// infinities, into every type, with every rounding mode and out_of_range
// rule.
func TestCastFastIsExact(t *testing.T) {
	var vals []num
	for _, b := range []uint{7, 8, 15, 16, 24, 31, 32, 53, 62, 63} {
		for _, d := range []int64{-2, -1, 0, 1, 2} {
			p := int64(1) << b
			vals = append(vals, num{Kind: KindInt, I: p + d}, num{Kind: KindInt, I: -p + d})
			vals = append(vals, num{Kind: KindUint, U: uint64(p + d)})
			vals = append(vals, num{Kind: KindFloat, F: float64(p + d)}, num{Kind: KindFloat, F: -float64(p + d)})
		}
	}
	vals = append(vals, num{Kind: KindInt, I: math.MinInt64}, num{Kind: KindInt, I: math.MaxInt64},
		num{Kind: KindUint, U: math.MaxUint64}, num{Kind: KindUint, U: 1 << 63}, num{Kind: KindUint, U: 1<<63 + 1})
	for _, f := range []float64{0, math.Copysign(0, -1), 0.25, 0.5, 0.75, 1.5, 2.5, -0.5, -1.5, -2.5, 127.5, 128.5, -128.5,
		255.5, 32767.5, 1e-40, 1e-310, math.SmallestNonzeroFloat64, math.MaxFloat32, math.MaxFloat64, 65504, 65520, 1.0 / 3,
		float64(math.Nextafter32(1, 2)), 1 + 0x1p-30, 0x1p63, 0x1p64, -0x1p63, 1e19, 1e20,
		math.NaN(), math.Inf(1), math.Inf(-1)} {
		vals = append(vals, num{Kind: KindFloat, F: f}, num{Kind: KindFloat, F: -f})
	}
	rng := rand.New(rand.NewPCG(3, 3))
	for range 2000 {
		vals = append(vals, num{Kind: KindInt, I: int64(rng.Uint64()) >> rng.IntN(64)},
			num{Kind: KindUint, U: rng.Uint64() >> rng.IntN(64)},
			num{Kind: KindFloat, F: math.Float64frombits(rng.Uint64())},
			num{Kind: KindFloat, F: (rng.Float64() - 0.5) * math.Pow(2, float64(rng.IntN(80)))})
	}
	var z big.Float
	for _, name := range castNames {
		to := mustType(t, name)
		for _, rounding := range []string{"", "nearest-even", "towards-zero", "towards-positive", "towards-negative", "nearest-away"} {
			if to.Kind == KindFloat {
				// roundFloat, reusing z, rounds as big.Rat's exact value
				// does.
				for _, n := range vals {
					if n.Kind == KindFloat && (math.IsNaN(n.F) || math.IsInf(n.F, 0) || n.F == 0) {
						continue // cast keeps these as they are, signed zeros too
					}
					got, err := roundFloat(n, to, rounding, &z)
					want, werr := roundFloatRat(n, to, rounding)
					if (err == nil) != (werr == nil) || math.Float64bits(got) != math.Float64bits(want) {
						t.Fatalf("round %+v to %s %q: %v %v, from its rational %v %v", n, name, rounding, got, err, want, werr)
					}
				}
			}
			for _, oor := range []string{"", "clamp", "wrap"} {
				if oor == "wrap" && to.Kind == KindFloat {
					continue
				}
				for _, n := range vals {
					checkCast(t, n, to, castRules{rounding: rounding, oor: oor})
				}
			}
		}
	}
}

// TestSameIsExact: a scalar map's integer keys match as exact numbers,
// whatever kinds hold them.
func TestSameIsExact(t *testing.T) {
	ints := []num{{Kind: KindInt, I: -1}, {Kind: KindInt, I: 0}, {Kind: KindInt, I: 7}, {Kind: KindInt, I: math.MaxInt64},
		{Kind: KindInt, I: math.MinInt64}, {Kind: KindUint, U: 0}, {Kind: KindUint, U: 7}, {Kind: KindUint, U: math.MaxInt64},
		{Kind: KindUint, U: 1 << 63}, {Kind: KindUint, U: math.MaxUint64}}
	for _, a := range ints {
		for _, b := range ints {
			ra, _ := a.rat()
			rb, _ := b.rat()
			if want := ra.Cmp(rb) == 0; same(a, b) != want {
				t.Errorf("same(%+v, %+v) = %v, want %v", a, b, !want, want)
			}
		}
	}
}

// roundFloatRat is roundFloat from n's exact rational value, as it was
// before it took a reusable big.Float.
func roundFloatRat(n num, t DataType, mode string) (float64, error) {
	q, _ := n.rat()
	prec := map[int]uint{2: 11, 4: 24, 8: 53}[t.Size]
	bm := map[string]big.RoundingMode{"towards-zero": big.ToZero, "towards-positive": big.ToPositiveInf,
		"towards-negative": big.ToNegativeInf, "nearest-away": big.ToNearestAway}[mode] // nearest-even: 0
	f, _ := new(big.Float).SetPrec(prec).SetMode(bm).SetRat(q).Float64()
	switch t.Size {
	case 4:
		if f32 := float32(f); math.IsInf(float64(f32), 0) && !math.IsInf(f, 0) {
			return 0, errors.New("overflow")
		} else {
			return float64(f32), nil
		}
	case 2:
		if h := Float16Value(Float16Bits(f)); math.IsInf(h, 0) && !math.IsInf(f, 0) {
			return 0, errors.New("overflow")
		} else {
			return h, nil
		}
	}
	return f, nil
}

// FuzzCast: any value of any kind, into any type by any rules: cast's
// fast path answers as castExact.
func FuzzCast(f *testing.F) {
	f.Add(uint8(0), uint64(1<<53+1), uint8(9), uint8(0))
	f.Add(uint8(2), math.Float64bits(2.5), uint8(3), uint8(5))
	f.Fuzz(func(t *testing.T, kind uint8, bits uint64, to, rules uint8) {
		n := num{Kind: []Kind{KindInt, KindUint, KindFloat}[int(kind)%3]}
		switch n.Kind {
		case KindInt:
			n.I = int64(bits)
		case KindUint:
			n.U = bits
		default:
			n.F = math.Float64frombits(bits)
		}
		dt := mustType(t, castNames[int(to)%len(castNames)])
		r := castRules{rounding: []string{"", "nearest-even", "towards-zero", "towards-positive", "towards-negative", "nearest-away"}[int(rules)%6],
			oor: []string{"", "clamp", "wrap"}[int(rules/6)%3]}
		if r.oor == "wrap" && dt.Kind == KindFloat {
			return
		}
		checkCast(t, n, dt, r)
	})
}

// TestScaleOffsetIntFast: scale_offset on an integer type answers in
// machine arithmetic as in exact rational arithmetic, for values, scales
// and offsets at and beside the types' bounds and random ones, encoding
// and decoding: the same value or the same error (overflow, a quotient
// that is not whole, a result out of the type's range).
func TestScaleOffsetIntFast(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	for _, name := range []string{"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"} {
		typ := mustType(t, name)
		bits := uint(8 * typ.Size)
		var edges []num // values of the type: its bounds, ±1, 0 and randoms
		for range 40 {
			if typ.Kind == KindInt {
				lo, hi := int64(-1)<<(bits-1), int64(uint64(1)<<(bits-1)-1)
				for _, v := range []int64{lo, lo + 1, -2, -1, 0, 1, 2, 3, 7, hi - 1, hi, int64(rng.Uint64()) >> (64 - bits), int64(rng.IntN(201)) - 100} {
					edges = append(edges, num{Kind: KindInt, I: v})
				}
			} else {
				hi := uint64(1)<<bits - 1
				if bits == 64 {
					hi = math.MaxUint64
				}
				for _, v := range []uint64{0, 1, 2, 3, 7, hi - 1, hi, hi / 2, hi/2 + 1, rng.Uint64() >> (64 - bits), uint64(rng.IntN(100))} {
					edges = append(edges, num{Kind: KindUint, U: v})
				}
			}
		}
		for range 3000 {
			sc, of, x := edges[rng.IntN(len(edges))], edges[rng.IntN(len(edges))], edges[rng.IntN(len(edges))]
			if sc.Float64() == 0 {
				continue
			}
			s := &scaleOffset{typ: typ, scale: sc, offset: of}
			for _, enc := range []bool{true, false} {
				got, err := s.arith(x, enc)
				want, werr := s.arithExact(x, enc)
				if (err == nil) != (werr == nil) || err != nil && err.Error() != werr.Error() || err == nil && got != want {
					t.Fatalf("%s scale %+v offset %+v x %+v enc %v: %+v %v, exactly %+v %v", name, sc, of, x, enc, got, err, want, werr)
				}
			}
		}
	}
	// A uint64 past int64's range comes back as itself (the exact path
	// once read it through int64 and called it out of range).
	s := &scaleOffset{typ: mustType(t, "uint64"), scale: num{Kind: KindUint, U: 2}, offset: num{Kind: KindUint, U: 1 << 62}}
	x := num{Kind: KindUint, U: 1<<63 + 10}
	if got, err := s.arithExact(x, false); err != nil || got.U != (1<<63+10)/2+1<<62 {
		t.Fatalf("uint64 decode: %+v %v", got, err)
	}
}

// FuzzScaleOffsetInt: scale_offset on any integer type, with any scale,
// offset and value of it: machine arithmetic answers as exact rational
// arithmetic.
func FuzzScaleOffsetInt(f *testing.F) {
	f.Add(uint8(3), uint64(1<<63), uint64(3), uint64(7))
	f.Add(uint8(7), uint64(1<<63+10), uint64(2), uint64(1<<62))
	names := []string{"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}
	f.Fuzz(func(t *testing.T, which uint8, x, sc, of uint64) {
		typ := mustType(t, names[int(which)%len(names)])
		// Each as a value of the type: its low bits, sign-extended for
		// the signed types.
		val := func(u uint64) num {
			shift := 64 - 8*uint(typ.Size)
			if typ.Kind == KindInt {
				return num{Kind: KindInt, I: int64(u<<shift) >> shift}
			}
			return num{Kind: KindUint, U: u << shift >> shift}
		}
		s := &scaleOffset{typ: typ, scale: val(sc), offset: val(of)}
		if s.scale.Float64() == 0 {
			return
		}
		for _, enc := range []bool{true, false} {
			got, err := s.arith(val(x), enc)
			want, werr := s.arithExact(val(x), enc)
			if (err == nil) != (werr == nil) || err != nil && err.Error() != werr.Error() || err == nil && got != want {
				t.Fatalf("%s scale %+v offset %+v x %+v enc %v: %+v %v, exactly %+v %v", typ.Name, s.scale, s.offset, val(x), enc, got, err, want, werr)
			}
		}
	})
}

// TestCastValueWiden: cast_value's one loop for narrow integers into
// floats gives runEach's bytes, from every integer type it takes into
// float32 and float64, without a scalar map, with integer keys (one at
// the type's bound, one it cannot hold) and with a float key or five keys
// (left to runEach).
func TestCastValueWiden(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	data := make([]byte, 4*4000)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	for i := 0; i < 64; i++ { // bounds: all zero and all one bytes
		data[i] = 0
		data[len(data)-1-i] = 0xff
	}
	for _, from := range []string{"int8", "uint8", "int16", "uint16", "int32", "uint32"} {
		for _, to := range []string{"float32", "float64"} {
			for _, sm := range []string{"", `,"scalar_map":{"decode":[[-1,"NaN"],[18446744073709551615,"NaN"]]}`,
				`,"scalar_map":{"decode":[[255,"NaN"],[65535,"-Infinity"],[7,0.5]]}`,
				`,"scalar_map":{"decode":[[1.0,"NaN"]]}`,
				`,"scalar_map":{"decode":[[1,2],[2,3],[3,4],[4,5],[5,6]]}`} {
				in := mustType(t, to)
				cv, err := newCastValue(json.RawMessage(`{"data_type":"`+from+`"`+sm+`}`), rep{shape: []int64{1}, typ: in, fill: make([]byte, in.Size)})
				if err != nil {
					t.Fatal(from, to, sm, err)
				}
				if cv.to.Size == 4 && in.Size == 4 {
					continue // not widened: int32 → float32 rounds
				}
				got, err := cv.run(data, cv.to, in, cv.dec)
				want, werr := cv.runEach(data, cv.to, in, cv.dec)
				if (err == nil) != (werr == nil) || string(got) != string(want) {
					t.Fatalf("%s → %s%s: %v, one at a time %v (bytes equal: %v)", from, to, sm, err, werr, string(got) == string(want))
				}
			}
		}
	}
}

// TestScaleOffsetFloatLoop: scale_offset's one loop for float32 and
// float64 gives applyEach's bytes, NaN payloads, infinities and
// subnormals included, encoding and decoding.
func TestScaleOffsetFloatLoop(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	data := make([]byte, 8*3000)
	for i := 0; i+8 <= len(data); i += 8 {
		binary.LittleEndian.PutUint64(data[i:], rng.Uint64())
	}
	for i, v := range []uint64{0x7fc00001, 0x7f800001, 0xff800000, 0x00000001, 0x7ff0000000000001, 0x7ff8000000000123, 0x0000000000000001, 0x8000000000000000} {
		binary.LittleEndian.PutUint64(data[8*i:], v) // NaNs quiet and signalling, ±Inf, subnormals, −0
	}
	for _, typ := range []string{"float32", "float64"} {
		for _, cfg := range []string{`{"offset":100,"scale":64}`, `{"offset":0.1,"scale":3}`, `{"offset":-2.5,"scale":1e-30}`, `{"scale":-0.7}`} {
			so, err := newScaleOffset(json.RawMessage(cfg), rep{typ: mustType(t, typ)})
			if err != nil {
				t.Fatal(err)
			}
			for _, enc := range []bool{true, false} {
				got := so.applyFloat(data, enc)
				want, err := so.applyEach(data, enc)
				if err != nil || string(got) != string(want) {
					for i := 0; i < len(got); i++ {
						if got[i] != want[i] {
							t.Fatalf("%s %s enc %v: byte %d differs (%v)", typ, cfg, enc, i, err)
						}
					}
				}
			}
		}
	}
}
