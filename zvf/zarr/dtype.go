package zarr

import (
	"bytes"
	"encoding/binary"
	"encoding/json"

	"math"
	"strconv"
	"strings"
)

// Kind groups data types by how their elements are interpreted.
type Kind uint8

const (
	KindBool Kind = iota + 1
	KindInt
	KindUint
	KindFloat
	KindComplex
	KindString // variable-length UTF-8
	KindBytes  // variable-length bytes
)

// DataType is a Zarr v3 data type. Size is the element size in bytes, 0 for
// the variable-length types.
type DataType struct {
	Name string
	Kind Kind
	Size int
}

// Variable reports whether elements have no fixed size.
func (d DataType) Variable() bool { return d.Size == 0 }

var dataTypes = [...]DataType{
	{"bool", KindBool, 1},
	{"int8", KindInt, 1}, {"int16", KindInt, 2}, {"int32", KindInt, 4}, {"int64", KindInt, 8},
	{"uint8", KindUint, 1}, {"uint16", KindUint, 2}, {"uint32", KindUint, 4}, {"uint64", KindUint, 8},
	{"float16", KindFloat, 2}, {"float32", KindFloat, 4}, {"float64", KindFloat, 8},
	{"complex64", KindComplex, 8}, {"complex128", KindComplex, 16},
	{"string", KindString, 0},
	{"variable_length_bytes", KindBytes, 0},
	{"bytes", KindBytes, 0},
}

// ParseDataType resolves a data_type name.
func ParseDataType(name string) (DataType, error) {
	for _, d := range dataTypes {
		if d.Name == name {
			return d, nil
		}
	}
	return DataType{}, unsupported("data type %q", name)
}

// parseDataTypeJSON accepts the plain-string form and the extension-object
// form {"name": ..., "configuration": ...} for the names above.
func parseDataTypeJSON(raw json.RawMessage) (DataType, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return ParseDataType(s)
	}
	var obj struct {
		Name           string          `json:"name"`
		MustUnderstand *bool           `json:"must_understand"`
		Configuration  json.RawMessage `json:"configuration"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Name == "" {
		return DataType{}, metaErr("data_type must be a string or {name: ...}")
	}
	return ParseDataType(obj.Name)
}

// FillBytes converts a JSON fill_value into one element of d, little-endian.
// For variable-length types it returns the element's bytes.
func FillBytes(d DataType, raw json.RawMessage) ([]byte, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		if d.Variable() {
			return []byte{}, nil
		}
		return nil, metaErr("fill_value is required for %s", d.Name)
	}
	switch d.Kind {
	case KindBool:
		var b bool
		if err := json.Unmarshal(raw, &b); err != nil {
			return nil, metaErr("fill_value %s is not a boolean", raw)
		}
		if b {
			return []byte{1}, nil
		}
		return []byte{0}, nil
	case KindInt, KindUint:
		return intFill(d, raw)
	case KindFloat:
		out := make([]byte, d.Size)
		if err := putFloatFill(out, raw); err != nil {
			return nil, err
		}
		return out, nil
	case KindComplex:
		var pair []json.RawMessage
		if err := json.Unmarshal(raw, &pair); err != nil || len(pair) != 2 {
			return nil, metaErr("fill_value %s for %s must be [re, im]", raw, d.Name)
		}
		out := make([]byte, d.Size)
		h := d.Size / 2
		if err := putFloatFill(out[:h], pair[0]); err != nil {
			return nil, err
		}
		if err := putFloatFill(out[h:], pair[1]); err != nil {
			return nil, err
		}
		return out, nil
	case KindString:
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, metaErr("fill_value %s for string must be a string", raw)
		}
		return []byte(s), nil
	case KindBytes:
		var s string
		if err := json.Unmarshal(raw, &s); err == nil {
			return []byte(s), nil
		}
		var arr []int
		if err := json.Unmarshal(raw, &arr); err != nil {
			return nil, metaErr("fill_value %s for bytes must be a string or byte list", raw)
		}
		out := make([]byte, len(arr))
		for i, v := range arr {
			if v < 0 || v > 255 {
				return nil, metaErr("fill_value byte %d out of range", v)
			}
			out[i] = byte(v)
		}
		return out, nil
	}
	return nil, unsupported("data type %q", d.Name)
}

func intFill(d DataType, raw json.RawMessage) ([]byte, error) {
	s := string(raw)
	out := make([]byte, 8)
	if d.Kind == KindInt {
		v, err := strconv.ParseInt(s, 10, d.Size*8)
		if err != nil {
			f, ferr := strconv.ParseFloat(s, 64)
			if ferr != nil || f != math.Trunc(f) || f < math.MinInt64 || f > math.MaxInt64 {
				return nil, metaErr("fill_value %s does not fit %s", s, d.Name)
			}
			v = int64(f)
			if d.Size < 8 && (v < -(1<<(d.Size*8-1)) || v >= 1<<(d.Size*8-1)) {
				return nil, metaErr("fill_value %s does not fit %s", s, d.Name)
			}
		}
		binary.LittleEndian.PutUint64(out, uint64(v))
	} else {
		v, err := strconv.ParseUint(s, 10, d.Size*8)
		if err != nil {
			f, ferr := strconv.ParseFloat(s, 64)
			if ferr != nil || f != math.Trunc(f) || f < 0 || f >= math.Ldexp(1, d.Size*8) {
				return nil, metaErr("fill_value %s does not fit %s", s, d.Name)
			}
			v = uint64(f)
		}
		binary.LittleEndian.PutUint64(out, v)
	}
	return out[:d.Size], nil
}

// putFloatFill writes one float fill value (number, "NaN", "Infinity",
// "-Infinity" or a hex string of the raw bits) into out (2, 4 or 8 bytes).
func putFloatFill(out []byte, raw json.RawMessage) error {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		switch {
		case s == "NaN":
			// The canonical quiet NaN of each width, as numpy writes it.
			putUint(out, map[int]uint64{2: 0x7e00, 4: 0x7fc00000, 8: 0x7ff8000000000000}[len(out)])
		case s == "Infinity":
			putFloat(out, math.Inf(1))
		case s == "-Infinity":
			putFloat(out, math.Inf(-1))
		case strings.HasPrefix(s, "0x"):
			bits, err := strconv.ParseUint(s[2:], 16, len(out)*8)
			if err != nil || len(s)-2 != len(out)*2 {
				return metaErr("hex fill_value %q must have %d hex digits", s, len(out)*2)
			}
			putUint(out, bits)
		default:
			return metaErr("fill_value %q is not a float", s)
		}
		return nil
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil {
		return metaErr("fill_value %s is not a float", raw)
	}
	putFloat(out, f)
	return nil
}

func putUint(out []byte, v uint64) {
	switch len(out) {
	case 2:
		binary.LittleEndian.PutUint16(out, uint16(v))
	case 4:
		binary.LittleEndian.PutUint32(out, uint32(v))
	case 8:
		binary.LittleEndian.PutUint64(out, v)
	}
}

func putFloat(out []byte, f float64) {
	switch len(out) {
	case 2:
		binary.LittleEndian.PutUint16(out, Float16Bits(f))
	case 4:
		binary.LittleEndian.PutUint32(out, math.Float32bits(float32(f)))
	case 8:
		binary.LittleEndian.PutUint64(out, math.Float64bits(f))
	}
}

// Float16Bits converts f to IEEE 754 binary16 bits, rounding to nearest even.
func Float16Bits(f float64) uint16 {
	b := math.Float32bits(float32(f))
	sign := uint16(b>>16) & 0x8000
	exp := int((b >> 23) & 0xff)
	mant := b & 0x7fffff
	switch {
	case exp == 0xff: // inf or NaN
		if mant != 0 {
			return sign | 0x7e00 | uint16(mant>>13)
		}
		return sign | 0x7c00
	case exp-127 > 15:
		return sign | 0x7c00
	case exp-127 >= -14: // normal
		e := uint32(exp-127+15) << 10
		m := mant >> 13
		rem := mant & 0x1fff
		v := e | m
		if rem > 0x1000 || (rem == 0x1000 && m&1 == 1) {
			v++
		}
		return sign | uint16(v)
	case exp-127 >= -25: // subnormal
		mant |= 0x800000
		shift := uint32(-(exp - 127) - 14 + 13)
		m := mant >> shift
		rem := mant & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || (rem == half && m&1 == 1) {
			m++
		}
		return sign | uint16(m)
	}
	return sign
}

// Float16Value converts binary16 bits to float64 exactly.
func Float16Value(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp := int(h>>10) & 0x1f
	mant := float64(h & 0x3ff)
	switch exp {
	case 0:
		return sign * math.Ldexp(mant, -24)
	case 0x1f:
		if mant != 0 {
			return math.NaN()
		}
		return sign * math.Inf(1)
	}
	return sign * math.Ldexp(1+mant/1024, exp-15)
}

func (d DataType) String() string { return d.Name }

// Number is one numeric element widened without loss: floats as float64
// (F), signed integers as int64 (I), unsigned integers and bools as uint64
// (U); Kind says which.
type Number struct {
	Kind Kind
	F    float64
	I    int64
	U    uint64
}

// At reads element i of b, a little-endian buffer of d's elements. d must
// be a numeric or bool type (not complex, not variable-length). It is the
// one place elements are decoded by type.
func (d DataType) At(b []byte, i int) Number {
	p := b[i*d.Size:]
	switch d.Kind {
	case KindFloat:
		switch d.Size {
		case 2:
			return Number{Kind: KindFloat, F: Float16Value(binary.LittleEndian.Uint16(p))}
		case 4:
			return Number{Kind: KindFloat, F: float64(math.Float32frombits(binary.LittleEndian.Uint32(p)))}
		}
		return Number{Kind: KindFloat, F: math.Float64frombits(binary.LittleEndian.Uint64(p))}
	case KindInt:
		var v int64
		switch d.Size {
		case 1:
			v = int64(int8(p[0]))
		case 2:
			v = int64(int16(binary.LittleEndian.Uint16(p)))
		case 4:
			v = int64(int32(binary.LittleEndian.Uint32(p)))
		default:
			v = int64(binary.LittleEndian.Uint64(p))
		}
		return Number{Kind: KindInt, I: v}
	case KindBool:
		return Number{Kind: KindUint, U: uint64(p[0])}
	}
	var v uint64
	switch d.Size {
	case 1:
		v = uint64(p[0])
	case 2:
		v = uint64(binary.LittleEndian.Uint16(p))
	case 4:
		v = uint64(binary.LittleEndian.Uint32(p))
	default:
		v = binary.LittleEndian.Uint64(p)
	}
	return Number{Kind: KindUint, U: v}
}

// Float64 is the number as a float64 (integers beyond 2^53 round).
func (n Number) Float64() float64 {
	switch n.Kind {
	case KindInt:
		return float64(n.I)
	case KindUint:
		return float64(n.U)
	}
	return n.F
}
