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

// intRange is the integer range of t.
func intRange(t DataType) (lo, hi *big.Int) {
	bits := uint(t.Size * 8)
	if t.Kind == KindInt {
		lo = new(big.Int).Neg(new(big.Int).Lsh(big.NewInt(1), bits-1))
		hi = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), bits-1), big.NewInt(1))
		return lo, hi
	}
	return big.NewInt(0), new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), bits), big.NewInt(1))
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
	oor      string // "", "clamp", "wrap"
}

// cast converts n to t: exact when representable, else by rounding and
// out_of_range; otherwise an error.
func cast(n num, t DataType, r castRules) (num, error) {
	if t.Kind == KindFloat {
		f := n.Float64()
		// NaN, infinities and signed zeros carry over between IEEE types.
		if n.Kind == KindFloat && (math.IsNaN(f) || math.IsInf(f, 0) || f == 0) {
			return num{Kind: KindFloat, F: f}, nil
		}
		rf, err := roundFloat(n, t, r.rounding)
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

// roundFloat rounds n to the float type t with the given mode.
func roundFloat(n num, t DataType, mode string) (float64, error) {
	q, _ := n.rat()
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
	bf := new(big.Float).SetPrec(prec).SetMode(bm).SetRat(q)
	f, _ := bf.Float64()
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
