package zarr

import (
	"encoding/json"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// Exact scalar arithmetic for scale_offset and cast_value
// (zarr-extensions), the array→array codecs for storing floats as scaled
// integers: values are converted, never reinterpreted; arithmetic stays in
// the stage's own data type.

// num is one element widened without loss (see Number).
type num = Number

func (n num) rat() (*big.Rat, bool) {
	switch n.Kind {
	case KindInt:
		return new(big.Rat).SetInt64(n.I), true
	case KindUint:
		return new(big.Rat).SetUint64(n.U), true
	}
	if math.IsNaN(n.F) || math.IsInf(n.F, 0) {
		return nil, false
	}
	return new(big.Rat).SetFloat64(n.F), true
}

func store(t DataType, b []byte, n num) {
	switch t.Kind {
	case KindFloat:
		putFloat(b[:t.Size], n.F)
	case KindInt:
		putUint(b[:t.Size], uint64(n.I))
		if t.Size == 1 {
			b[0] = byte(n.I)
		}
	default:
		putUint(b[:t.Size], n.U)
		if t.Size == 1 {
			b[0] = byte(n.U)
		}
	}
}

// intRange is the integer range of t (intBound's, as big.Ints).
func intRange(t DataType) (lo, hi *big.Int) {
	toBig := func(n num) *big.Int {
		if n.Kind == KindInt {
			return new(big.Int).SetInt64(n.I)
		}
		return new(big.Int).SetUint64(n.U)
	}
	return toBig(intBound(t, false)), toBig(intBound(t, true))
}

// parseScalar reads a configuration scalar in the fill-value encoding of
// t (numbers, "NaN", "Infinity", hex), also accepting numeric strings.
func parseScalar(t DataType, raw json.RawMessage) (num, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch strings.TrimPrefix(s, "+") {
		case "NaN":
			return num{Kind: KindFloat, F: math.NaN()}, nil
		case "Infinity":
			if strings.HasPrefix(s, "-") {
				return num{Kind: KindFloat, F: math.Inf(-1)}, nil
			}
			return num{Kind: KindFloat, F: math.Inf(1)}, nil
		case "-Infinity":
			return num{Kind: KindFloat, F: math.Inf(-1)}, nil
		}
		if strings.HasPrefix(s, "0x") && t.Kind == KindFloat {
			b, err := FillBytes(t, raw)
			if err != nil {
				return num{}, err
			}
			return t.At(b, 0), nil
		}
		raw = json.RawMessage(s)
	}
	str := strings.TrimSpace(string(raw))
	if t.Kind == KindFloat || strings.ContainsAny(str, ".eE") {
		f, err := strconv.ParseFloat(str, 64)
		if err != nil {
			return num{}, metaErr("scalar %s is not a number", raw)
		}
		return num{Kind: KindFloat, F: f}, nil
	}
	if strings.HasPrefix(str, "-") {
		v, err := strconv.ParseInt(str, 10, 64)
		if err != nil {
			return num{}, metaErr("scalar %s is not an integer", raw)
		}
		return num{Kind: KindInt, I: v}, nil
	}
	v, err := strconv.ParseUint(str, 10, 64)
	if err != nil {
		return num{}, metaErr("scalar %s is not an integer", raw)
	}
	return num{Kind: KindUint, U: v}, nil
}

// ---- cast ----

type castRules struct {
	rounding string
	oor      string     // "", "clamp", "wrap"
	scratch  *big.Float // roundFloat's, when not nil
}

// cast converts n to t: exact when representable, else by rounding and
// out_of_range; otherwise an error. A value machine arithmetic converts
// exactly takes castFast (a decoded chunk is millions of them); the rest,
// castExact's rational arithmetic, which castFast always agrees with
// (TestCastFastIsExact, FuzzCast).
func cast(n num, t DataType, r castRules) (num, error) {
	if v, ok := castFast(n, t, r); ok {
		return v, nil
	}
	return castExact(n, t, r)
}

// castFast is cast where machine arithmetic gives the exact answer, ok
// false elsewhere (castExact then decides):
//   - to float64, float32 or float16, a value the type holds as it is (no
//     rounding mode then applies); to float32 also any value of float32's
//     normal range, rounded by the mode;
//   - to an integer type, an integer or a float rounded by the mode (float64
//     rounding to a whole number is exact), then within the type's range or
//     brought into it by out_of_range.
func castFast(n num, t DataType, r castRules) (num, bool) {
	if t.Kind == KindFloat {
		return castFastFloat(n, t, r.rounding)
	}
	var v int64 // n as an integer, when it is one of int64's
	switch n.Kind {
	case KindInt:
		v = n.I
	case KindUint:
		if n.U > math.MaxInt64 {
			switch {
			case t.Kind == KindUint && t.Size == 8:
				return num{Kind: KindUint, U: n.U}, true
			case r.oor == "wrap":
				return wrapInt(n.U, t), true
			case r.oor == "clamp":
				return intBound(t, true), true
			}
			return num{}, false
		}
		v = int64(n.U)
	default:
		f := n.F
		if f != math.Trunc(f) { // also NaN: the exact path's error
			switch r.rounding {
			case "", "nearest-even":
				f = math.RoundToEven(f)
			case "towards-zero":
				f = math.Trunc(f)
			case "towards-negative":
				f = math.Floor(f)
			case "towards-positive":
				f = math.Ceil(f)
			case "nearest-away":
				f = math.Round(f)
			default:
				return num{}, false
			}
		}
		// f is whole now (or NaN, ±Inf: the exact path's errors).
		switch {
		case f >= -1<<63 && f < 1<<63:
			v = int64(f)
		case f >= 1<<63 && f < 1<<64:
			return castFast(num{Kind: KindUint, U: uint64(f)}, t, r)
		case math.IsInf(f, 0) || f != f:
			return num{}, false
		case r.oor == "clamp": // beyond every integer type's range
			return intBound(t, f > 0), true
		case r.oor == "wrap":
			// |f| = m × 2^e, m of 53 bits, e ≥ 11: its low 64 bits.
			mant, exp := math.Frexp(math.Abs(f))
			m, e := uint64(mant*(1<<53)), exp-53
			var u uint64
			if e < 64 {
				u = m << uint(e)
			}
			if f < 0 {
				u = -u
			}
			return wrapInt(u, t), true
		default:
			return num{}, false
		}
	}
	lo, hi := intBound(t, false), intBound(t, true)
	var in bool
	if t.Kind == KindInt {
		in = v >= lo.I && v <= hi.I
	} else {
		in = v >= 0 && uint64(v) <= hi.U
	}
	switch {
	case in && t.Kind == KindInt:
		return num{Kind: KindInt, I: v}, true
	case in:
		return num{Kind: KindUint, U: uint64(v)}, true
	case r.oor == "wrap":
		return wrapInt(uint64(v), t), true
	case r.oor == "clamp":
		return intBound(t, v > 0), true
	}
	return num{}, false
}

// wrapInt is the integer whose two's complement bits are u's low ones, as
// integer type t reads them: u modulo 2^bits, as out_of_range wrap takes it.
func wrapInt(u uint64, t DataType) num {
	shift := 64 - 8*uint(t.Size)
	if t.Kind == KindInt {
		return num{Kind: KindInt, I: int64(u<<shift) >> shift}
	}
	return num{Kind: KindUint, U: u << shift >> shift}
}

// intBound is integer type t's largest value (hi) or its smallest.
func intBound(t DataType, hi bool) num {
	bits := uint(8 * t.Size)
	if t.Kind == KindInt {
		if hi {
			return num{Kind: KindInt, I: int64(uint64(1)<<(bits-1) - 1)}
		}
		return num{Kind: KindInt, I: -1 << (bits - 1)}
	}
	if hi {
		return num{Kind: KindUint, U: math.MaxUint64 >> (64 - bits)}
	}
	return num{Kind: KindUint}
}

// castFastFloat is castFast to a float type.
func castFastFloat(n num, t DataType, rounding string) (num, bool) {
	var f float64
	switch n.Kind {
	case KindInt:
		if n.I < -1<<53 || n.I > 1<<53 {
			return num{}, false
		}
		f = float64(n.I)
	case KindUint:
		if n.U > 1<<53 {
			return num{}, false
		}
		f = float64(n.U)
	default:
		f = n.F
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return num{}, false
		}
	}
	switch t.Size {
	case 8:
		return num{Kind: KindFloat, F: f}, true
	case 2:
		if Float16Value(Float16Bits(f)) != f {
			return num{}, false
		}
		return num{Kind: KindFloat, F: f}, true
	case 4:
	default:
		return num{}, false
	}
	r := float32(f) // nearest, ties to even
	if float64(r) == f {
		return num{Kind: KindFloat, F: f}, true
	}
	// Rounded, within float32's normal range: the exact path rounds once
	// there too (below it, twice: to 24 bits, then to the subnormal).
	if a := math.Abs(f); a < 0x1p-126 || a > math.MaxFloat32 {
		return num{}, false
	}
	up, down := float32(math.Inf(1)), float32(math.Inf(-1))
	switch rounding {
	case "", "nearest-even":
	case "towards-zero":
		if math.Abs(float64(r)) > math.Abs(f) {
			r = math.Nextafter32(r, 0)
		}
	case "towards-negative":
		if float64(r) > f {
			r = math.Nextafter32(r, down)
		}
	case "towards-positive":
		if float64(r) < f {
			r = math.Nextafter32(r, up)
		}
	case "nearest-away":
		// A tie went to the even neighbour; away from zero is the other
		// when it is larger. The differences are exact (Sterbenz).
		o := math.Nextafter32(r, up)
		if float64(r) > f {
			o = math.Nextafter32(r, down)
		}
		if f-float64(r) == float64(o)-f && math.Abs(float64(o)) > math.Abs(float64(r)) {
			r = o
		}
	default:
		return num{}, false
	}
	if math.IsInf(float64(r), 0) {
		return num{}, false
	}
	return num{Kind: KindFloat, F: float64(r)}, true
}

// castExact is cast in exact rational arithmetic.
func castExact(n num, t DataType, r castRules) (num, error) {
	if t.Kind == KindFloat {
		f := n.Float64()
		// NaN, infinities and signed zeros carry over between IEEE types.
		if n.Kind == KindFloat && (math.IsNaN(f) || math.IsInf(f, 0) || f == 0) {
			return num{Kind: KindFloat, F: f}, nil
		}
		rf, err := roundFloat(n, t, r.rounding, r.scratch)
		if err != nil {
			return num{}, err
		}
		return num{Kind: KindFloat, F: rf}, nil
	}
	if n.Kind == KindFloat && (math.IsNaN(n.F) || math.IsInf(n.F, 0)) {
		return num{}, corrupt("%v cannot be cast to %s without a scalar_map entry", n.F, t.Name)
	}
	q, _ := n.rat()
	var z *big.Int
	if q.IsInt() {
		z = new(big.Int).Set(q.Num())
	} else {
		if r.rounding == "" {
			r.rounding = "nearest-even"
		}
		z = roundRat(q, r.rounding)
	}
	lo, hi := intRange(t)
	if z.Cmp(lo) < 0 || z.Cmp(hi) > 0 {
		switch r.oor {
		case "clamp":
			if z.Cmp(lo) < 0 {
				z = lo
			} else {
				z = hi
			}
		case "wrap":
			m := new(big.Int).Lsh(big.NewInt(1), uint(t.Size*8))
			z = new(big.Int).Mod(z, m)
			if t.Kind == KindInt && z.Cmp(hi) > 0 {
				z.Sub(z, m)
			}
		default:
			return num{}, corrupt("%s is out of the range of %s", z, t.Name)
		}
	}
	if t.Kind == KindInt {
		return num{Kind: KindInt, I: z.Int64()}, nil
	}
	return num{Kind: KindUint, U: z.Uint64()}, nil
}

func roundRat(q *big.Rat, mode string) *big.Int {
	num, den := q.Num(), q.Denom()
	fl := new(big.Int).Div(num, den) // Euclidean: floor for positive den
	rem := new(big.Rat).Sub(q, new(big.Rat).SetInt(fl))
	half := big.NewRat(1, 2)
	switch mode {
	case "towards-negative":
		return fl
	case "towards-positive":
		return fl.Add(fl, big.NewInt(1))
	case "towards-zero":
		if q.Sign() < 0 {
			return fl.Add(fl, big.NewInt(1))
		}
		return fl
	case "nearest-away":
		c := rem.Cmp(half)
		if c > 0 || (c == 0 && q.Sign() > 0) {
			return fl.Add(fl, big.NewInt(1))
		}
		return fl
	}
	c := rem.Cmp(half) // nearest-even
	if c > 0 || (c == 0 && fl.Bit(0) == 1) {
		return fl.Add(fl, big.NewInt(1))
	}
	return fl
}

// roundFloat rounds n to the float type t with the given mode, in z if
// not nil (a chunk's values reuse one: nothing is allocated a value).
func roundFloat(n num, t DataType, mode string, z *big.Float) (float64, error) {
	if z == nil {
		z = new(big.Float)
	}
	prec := uint(53)
	switch t.Size {
	case 4:
		prec = 24
	case 2:
		prec = 11
	}
	bm := big.ToNearestEven
	switch mode {
	case "towards-zero":
		bm = big.ToZero
	case "towards-positive":
		bm = big.ToPositiveInf
	case "towards-negative":
		bm = big.ToNegativeInf
	case "nearest-away":
		bm = big.ToNearestAway
	}
	// n exactly (precision 0 takes the value's own), then rounded once.
	z.SetPrec(0)
	switch n.Kind {
	case KindInt:
		z.SetInt64(n.I)
	case KindUint:
		z.SetUint64(n.U)
	default:
		z.SetFloat64(n.F)
	}
	f, _ := z.SetMode(bm).SetPrec(prec).Float64()
	// Respect the target's exponent range (subnormals and overflow).
	switch t.Size {
	case 4:
		f32 := float32(f)
		if math.IsInf(float64(f32), 0) && !math.IsInf(f, 0) {
			return 0, corrupt("%v overflows float32", n.Float64())
		}
		return float64(f32), nil
	case 2:
		h := Float16Value(Float16Bits(f))
		if math.IsInf(h, 0) && !math.IsInf(f, 0) {
			return 0, corrupt("%v overflows float16", n.Float64())
		}
		return h, nil
	}
	return f, nil
}
