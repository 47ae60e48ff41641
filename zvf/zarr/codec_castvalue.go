package zarr

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"math/big"
)

// The cast_value codec (zarr-extensions): each element converted to
// another data type, with a rounding mode, out-of-range rule and scalar
// map (scalar.go).

func makeCastValue(_ *Codecs, s CodecSpec, in rep) (resolved, error) {
	return arrayToArrayCodec(newCastValue(s.Configuration, in))
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

// same reports whether a and b are one value for a scalar map: floats (or
// a float and an integer) as float64, NaN matching NaN; integers exactly.
func same(a, b num) bool {
	if a.Kind == KindFloat || b.Kind == KindFloat {
		fa, fb := a.Float64(), b.Float64()
		return fa == fb || (math.IsNaN(fa) && math.IsNaN(fb))
	}
	switch {
	case a.Kind == KindInt && b.Kind == KindInt:
		return a.I == b.I
	case a.Kind == KindUint && b.Kind == KindUint:
		return a.U == b.U
	case a.Kind == KindInt:
		return a.I >= 0 && uint64(a.I) == b.U
	default:
		return b.I >= 0 && uint64(b.I) == a.U
	}
}

func (c *castValue) convert(n num, to DataType, m [][2]num, r castRules) (num, error) {
	for _, p := range m {
		if same(n, p[0]) {
			return cast(p[1], to, castRules{rounding: "nearest-even", scratch: r.scratch})
		}
	}
	return cast(n, to, r)
}

func (c *castValue) out(in rep) (rep, error) {
	fill := make([]byte, c.to.Size)
	v, err := c.convert(in.typ.At(in.fill, 0), c.to, c.enc, c.rules)
	if err != nil {
		return rep{}, metaErr("cast_value cannot cast the fill value: %v", err)
	}
	store(c.to, fill, v)
	return rep{shape: in.shape, typ: c.to, fill: fill}, nil
}

func (c *castValue) run(data []byte, from, to DataType, m [][2]num) ([]byte, error) {
	if out, ok := c.widen(data, from, to, m); ok {
		return out, nil
	}
	return c.runEach(data, from, to, m)
}

// widen is run for integers of at most 16 bits into float32 or float64,
// or of 32 bits into float64 (a quantized float's decoding): every such
// integer is a float the type holds, which cast gives as it is, so one
// loop converts them; an element a scalar map names goes through convert.
// ok false for other types and for a map with float keys (runEach).
func (c *castValue) widen(data []byte, from, to DataType, m [][2]num) ([]byte, bool) {
	if from.Kind != KindInt && from.Kind != KindUint || to.Kind != KindFloat ||
		from.Size > 4 || to.Size < 4 || from.Size == 4 && to.Size == 4 {
		return nil, false
	}
	var keys [4]int64 // the map's keys; one that int64 does not hold matches none
	nk := 0
	for _, p := range m {
		switch k := p[0]; {
		case k.Kind == KindFloat || nk == len(keys):
			return nil, false
		case k.Kind == KindInt:
			keys[nk], nk = k.I, nk+1
		case k.U <= math.MaxInt64:
			keys[nk], nk = int64(k.U), nk+1
		}
	}
	n, w := len(data)/from.Size, to.Size
	out := make([]byte, n*w)
	signed := from.Kind == KindInt
	r := c.rules
	for i := range n {
		var v int64
		switch o := i * from.Size; from.Size {
		case 1:
			v = int64(data[o])
			if signed {
				v = int64(int8(data[o]))
			}
		case 2:
			u := binary.LittleEndian.Uint16(data[o:])
			v = int64(u)
			if signed {
				v = int64(int16(u))
			}
		default:
			u := binary.LittleEndian.Uint32(data[o:])
			v = int64(u)
			if signed {
				v = int64(int32(u))
			}
		}
		mapped := false
		for _, k := range keys[:nk] {
			mapped = mapped || v == k
		}
		if mapped {
			x, err := c.convert(from.At(data[i*from.Size:], 0), to, m, r)
			if err != nil {
				return nil, false // runEach meets it too, and says so
			}
			store(to, out[i*w:], x)
			continue
		}
		if w == 4 {
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(float32(v)))
		} else {
			binary.LittleEndian.PutUint64(out[8*i:], math.Float64bits(float64(v)))
		}
	}
	return out, true
}

// runEach is run an element at a time through cast.
func (c *castValue) runEach(data []byte, from, to DataType, m [][2]num) ([]byte, error) {
	n := len(data) / from.Size
	out := make([]byte, n*to.Size)
	r := c.rules
	r.scratch = new(big.Float)
	for i := 0; i < n; i++ {
		x := from.At(data[i*from.Size:], 0)
		v, ok := num{}, false
		if len(m) == 0 { // no scalar map: straight to cast's fast path
			v, ok = castFast(x, to, r)
		}
		if !ok {
			var err error
			if v, err = c.convert(x, to, m, r); err != nil {
				return nil, err
			}
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
