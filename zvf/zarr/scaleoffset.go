package zarr

import (
	"encoding/json"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// scale_offset and cast_value (zarr-extensions): array→array codecs for
// storing floats as scaled integers. Values are converted, never
// reinterpreted; arithmetic stays in the stage's own data type.

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

type castValue struct {
	in, to   DataType
	rules    castRules
	enc, dec [][2]num
}

func newCastValue(cfg json.RawMessage, in rep) (*castValue, error) {
	var c struct {
		DataType   string `json:"data_type"`
		Rounding   string `json:"rounding"`
		OutOfRange string `json:"out_of_range"`
		ScalarMap  struct {
			Encode [][2]json.RawMessage `json:"encode"`
			Decode [][2]json.RawMessage `json:"decode"`
		} `json:"scalar_map"`
	}
	if err := json.Unmarshal(cfg, &c); err != nil {
		return nil, metaErr("cast_value configuration: %v", err)
	}
	out, err := ParseDataType(c.DataType)
	if err != nil {
		return nil, err
	}
	for _, t := range []DataType{in.typ, out} {
		if t.Kind != KindInt && t.Kind != KindUint && t.Kind != KindFloat {
			return nil, unsupported("cast_value with %s", t.Name)
		}
	}
	switch c.Rounding {
	case "", "nearest-even", "towards-zero", "towards-positive", "towards-negative", "nearest-away":
	default:
		return nil, metaErr("cast_value rounding %q", c.Rounding)
	}
	switch c.OutOfRange {
	case "", "clamp":
	case "wrap":
		if out.Kind == KindFloat {
			return nil, metaErr("cast_value out_of_range wrap needs an integer data_type")
		}
	default:
		return nil, metaErr("cast_value out_of_range %q", c.OutOfRange)
	}
	cv := &castValue{in: in.typ, to: out, rules: castRules{rounding: c.Rounding, oor: c.OutOfRange}}
	for _, p := range c.ScalarMap.Encode {
		a, err1 := parseScalar(in.typ, p[0])
		b, err2 := parseScalar(out, p[1])
		if err1 != nil || err2 != nil {
			return nil, metaErr("cast_value scalar_map entry %s", p)
		}
		cv.enc = append(cv.enc, [2]num{a, b})
	}
	for _, p := range c.ScalarMap.Decode {
		a, err1 := parseScalar(out, p[0])
		b, err2 := parseScalar(in.typ, p[1])
		if err1 != nil || err2 != nil {
			return nil, metaErr("cast_value scalar_map entry %s", p)
		}
		cv.dec = append(cv.dec, [2]num{a, b})
	}
	return cv, nil
}

func (*castValue) name() string { return "cast_value" }

func same(a, b num) bool {
	if a.Kind == KindFloat || b.Kind == KindFloat {
		fa, fb := a.Float64(), b.Float64()
		return fa == fb || (math.IsNaN(fa) && math.IsNaN(fb))
	}
	ra, _ := a.rat()
	rb, _ := b.rat()
	return ra.Cmp(rb) == 0
}

func (c *castValue) convert(n num, to DataType, m [][2]num) (num, error) {
	for _, p := range m {
		if same(n, p[0]) {
			return cast(p[1], to, castRules{rounding: "nearest-even"})
		}
	}
	return cast(n, to, c.rules)
}

func (c *castValue) out(in rep) (rep, error) {
	fill := make([]byte, c.to.Size)
	v, err := c.convert(in.typ.At(in.fill, 0), c.to, c.enc)
	if err != nil {
		return rep{}, metaErr("cast_value cannot cast the fill value: %v", err)
	}
	store(c.to, fill, v)
	return rep{shape: in.shape, typ: c.to, fill: fill}, nil
}

func (c *castValue) run(data []byte, from, to DataType, m [][2]num) ([]byte, error) {
	n := len(data) / from.Size
	out := make([]byte, n*to.Size)
	for i := 0; i < n; i++ {
		v, err := c.convert(from.At(data[i*from.Size:], 0), to, m)
		if err != nil {
			return nil, err
		}
		store(to, out[i*to.Size:], v)
	}
	return out, nil
}

func (c *castValue) decode(ch *Chunk, in rep) (*Chunk, error) {
	if len(ch.Data) != int(prod(in.shape))*c.to.Size {
		return nil, corrupt("cast_value input has %d bytes", len(ch.Data))
	}
	d, err := c.run(ch.Data, c.to, c.in, c.dec)
	if err != nil {
		return nil, err
	}
	return &Chunk{Shape: in.shape, Type: c.in, Data: d}, nil
}

func (c *castValue) encode(ch *Chunk) (*Chunk, error) {
	d, err := c.run(ch.Data, c.in, c.to, c.enc)
	if err != nil {
		return nil, err
	}
	return &Chunk{Shape: ch.Shape, Type: c.to, Data: d}, nil
}

// ---- scale_offset ----

type scaleOffset struct {
	typ           DataType
	scale, offset num
}

func newScaleOffset(cfg json.RawMessage, in rep) (*scaleOffset, error) {
	t := in.typ
	if t.Kind != KindInt && t.Kind != KindUint && t.Kind != KindFloat {
		return nil, unsupported("scale_offset on %s", t.Name)
	}
	var c struct {
		Scale  json.RawMessage `json:"scale"`
		Offset json.RawMessage `json:"offset"`
	}
	if len(cfg) > 0 {
		if err := json.Unmarshal(cfg, &c); err != nil {
			return nil, metaErr("scale_offset configuration: %v", err)
		}
	}
	so := &scaleOffset{typ: t, scale: num{Kind: KindUint, U: 1}, offset: num{Kind: KindUint}}
	var err error
	if len(c.Scale) > 0 {
		if so.scale, err = parseScalar(t, c.Scale); err != nil {
			return nil, err
		}
	}
	if len(c.Offset) > 0 {
		if so.offset, err = parseScalar(t, c.Offset); err != nil {
			return nil, err
		}
	}
	// Both scalars live in the array's own type.
	if so.scale, err = cast(so.scale, t, castRules{rounding: "nearest-even"}); err != nil {
		return nil, metaErr("scale_offset scale: %v", err)
	}
	if so.offset, err = cast(so.offset, t, castRules{rounding: "nearest-even"}); err != nil {
		return nil, metaErr("scale_offset offset: %v", err)
	}
	if so.scale.Float64() == 0 {
		return nil, metaErr("scale_offset scale is zero")
	}
	return so, nil
}

func (*scaleOffset) name() string { return "scale_offset" }

// arith applies f in the element type: floats in their own precision,
// integers exactly with a range check.
func (s *scaleOffset) arith(a num, enc bool) (num, error) {
	if s.typ.Kind == KindFloat {
		x, sc, of := a.F, s.scale.F, s.offset.F
		var r float64
		switch s.typ.Size {
		case 4:
			if enc {
				r = float64((float32(x) - float32(of)) * float32(sc))
			} else {
				r = float64(float32(x)/float32(sc) + float32(of))
			}
		case 2:
			h := func(v float64) float64 { return Float16Value(Float16Bits(v)) }
			if enc {
				r = h(h(x-of) * sc)
			} else {
				r = h(h(x/sc) + of)
			}
		default:
			if enc {
				r = (x - of) * sc
			} else {
				r = x/sc + of
			}
		}
		return num{Kind: KindFloat, F: r}, nil
	}
	x, _ := a.rat()
	sc, _ := s.scale.rat()
	of, _ := s.offset.rat()
	var q *big.Rat
	if enc {
		q = new(big.Rat).Mul(new(big.Rat).Sub(x, of), sc)
	} else {
		q = new(big.Rat).Add(new(big.Rat).Quo(x, sc), of)
	}
	if !q.IsInt() {
		return num{}, corrupt("scale_offset result %s is not an integer of %s", q.RatString(), s.typ.Name)
	}
	return cast(num{Kind: KindInt, I: q.Num().Int64()}, s.typ, castRules{})
}

func (s *scaleOffset) out(in rep) (rep, error) {
	fill := make([]byte, s.typ.Size)
	v, err := s.arith(s.typ.At(in.fill, 0), true)
	if err != nil {
		return rep{}, metaErr("scale_offset cannot transform the fill value: %v", err)
	}
	store(s.typ, fill, v)
	return rep{shape: in.shape, typ: s.typ, fill: fill}, nil
}

func (s *scaleOffset) apply(data []byte, enc bool) ([]byte, error) {
	out := make([]byte, len(data))
	size := s.typ.Size
	for i := 0; i+size <= len(data); i += size {
		v, err := s.arith(s.typ.At(data[i:], 0), enc)
		if err != nil {
			return nil, err
		}
		store(s.typ, out[i:], v)
	}
	return out, nil
}

func (s *scaleOffset) decode(ch *Chunk, in rep) (*Chunk, error) {
	d, err := s.apply(ch.Data, false)
	if err != nil {
		return nil, err
	}
	return &Chunk{Shape: in.shape, Type: s.typ, Data: d}, nil
}

func (s *scaleOffset) encode(ch *Chunk) (*Chunk, error) {
	d, err := s.apply(ch.Data, true)
	if err != nil {
		return nil, err
	}
	return &Chunk{Shape: ch.Shape, Type: s.typ, Data: d}, nil
}
