package zarr

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"math/big"
	"math/bits"
)

// The scale_offset codec (zarr-extensions): (x - offset) × scale, in the
// array's own data type (scalar.go).

func makeScaleOffset(_ *Codecs, s CodecSpec, in rep) (resolved, error) {
	return arrayToArrayCodec(newScaleOffset(s.Configuration, in))
}

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
	if r, ok := s.arithInt(a, enc); ok {
		return cast(r, s.typ, castRules{})
	}
	return s.arithExact(a, enc)
}

// arithExact is arith for an integer type in exact rational arithmetic.
func (s *scaleOffset) arithExact(a num, enc bool) (num, error) {
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
	switch z := q.Num(); {
	case z.IsInt64():
		return cast(num{Kind: KindInt, I: z.Int64()}, s.typ, castRules{})
	case z.IsUint64():
		return cast(num{Kind: KindUint, U: z.Uint64()}, s.typ, castRules{})
	default:
		return num{}, corrupt("%s is out of the range of %s", z, s.typ.Name)
	}
}

// arithInt is arith for an integer type in machine arithmetic, ok false
// where a step would overflow int64 or uint64 or a quotient is not whole
// (arith's rational arithmetic then decides, with the same answer where
// both apply: TestScaleOffsetIntFast). a, the scale and the offset are all
// of the type's kind.
func (s *scaleOffset) arithInt(a num, enc bool) (num, bool) {
	if s.typ.Kind == KindInt {
		x, sc, of := a.I, s.scale.I, s.offset.I
		if enc {
			d := x - of
			if (x^of)&(x^d) < 0 { // x − of overflowed
				return num{}, false
			}
			hi, lo := bits.Mul64(uint64(abs64(d)), uint64(abs64(sc)))
			if hi != 0 || lo > math.MaxInt64 || d == math.MinInt64 || sc == math.MinInt64 {
				return num{}, false
			}
			r := int64(lo)
			if (d < 0) != (sc < 0) {
				r = -r
			}
			return num{Kind: KindInt, I: r}, true
		}
		if sc == 0 || sc == -1 && x == math.MinInt64 || x%sc != 0 {
			return num{}, false
		}
		q := x / sc
		r := q + of
		if (q^r)&(of^r) < 0 { // q + of overflowed
			return num{}, false
		}
		return num{Kind: KindInt, I: r}, true
	}
	x, sc, of := a.U, s.scale.U, s.offset.U
	if enc {
		if x < of { // negative: out of the type's range, the exact path says so
			return num{}, false
		}
		hi, lo := bits.Mul64(x-of, sc)
		if hi != 0 {
			return num{}, false
		}
		return num{Kind: KindUint, U: lo}, true
	}
	if sc == 0 || x%sc != 0 {
		return num{}, false
	}
	r, carry := bits.Add64(x/sc, of, 0)
	if carry != 0 {
		return num{}, false
	}
	return num{Kind: KindUint, U: r}, true
}

// abs64 is |v|; math.MinInt64 stays itself (callers refuse it).
func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
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
	if s.typ.Kind == KindFloat && s.typ.Size >= 4 {
		return s.applyFloat(data, enc), nil
	}
	return s.applyEach(data, enc)
}

// applyFloat is apply for float32 and float64 in one loop, with arith's
// operations in its order (TestScaleOffsetFloatLoop).
func (s *scaleOffset) applyFloat(data []byte, enc bool) []byte {
	out := make([]byte, len(data))
	if s.typ.Size == 4 {
		sc, of := float32(s.scale.F), float32(s.offset.F)
		for i := 0; i+4 <= len(data); i += 4 {
			x := math.Float32frombits(binary.LittleEndian.Uint32(data[i:]))
			if enc {
				x = (x - of) * sc
			} else {
				x = x/sc + of
			}
			binary.LittleEndian.PutUint32(out[i:], math.Float32bits(x))
		}
		return out
	}
	sc, of := s.scale.F, s.offset.F
	for i := 0; i+8 <= len(data); i += 8 {
		x := math.Float64frombits(binary.LittleEndian.Uint64(data[i:]))
		if enc {
			x = (x - of) * sc
		} else {
			x = x/sc + of
		}
		binary.LittleEndian.PutUint64(out[i:], math.Float64bits(x))
	}
	return out
}

// applyEach is apply an element at a time through arith.
func (s *scaleOffset) applyEach(data []byte, enc bool) ([]byte, error) {
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
