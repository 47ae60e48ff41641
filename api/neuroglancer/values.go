package neuroglancer

import (
	"encoding/binary"
	"math"
)

// dtypeSize is the element size of the ZVF (numpy/Zarr) data types that
// hold numbers; 0 for anything else.
func dtypeSize(dt string) int {
	switch dt {
	case "bool", "int8", "uint8":
		return 1
	case "int16", "uint16", "float16":
		return 2
	case "int32", "uint32", "float32":
		return 4
	case "int64", "uint64", "float64":
		return 8
	}
	return 0
}

// valueAt reads element i of little-endian data of type dt as a float64.
func valueAt(data []byte, dt string, i int) float64 {
	le := binary.LittleEndian
	switch dt {
	case "bool", "uint8":
		return float64(data[i])
	case "int8":
		return float64(int8(data[i]))
	case "int16":
		return float64(int16(le.Uint16(data[2*i:])))
	case "uint16":
		return float64(le.Uint16(data[2*i:]))
	case "float16":
		return halfToFloat(le.Uint16(data[2*i:]))
	case "int32":
		return float64(int32(le.Uint32(data[4*i:])))
	case "uint32":
		return float64(le.Uint32(data[4*i:]))
	case "float32":
		return float64(math.Float32frombits(le.Uint32(data[4*i:])))
	case "int64":
		return float64(int64(le.Uint64(data[8*i:])))
	case "uint64":
		return float64(le.Uint64(data[8*i:]))
	case "float64":
		return math.Float64frombits(le.Uint64(data[8*i:]))
	}
	return math.NaN()
}

// halfToFloat widens an IEEE 754 binary16 value.
func halfToFloat(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp := int(h>>10) & 0x1f
	frac := float64(h & 0x3ff)
	switch exp {
	case 0:
		return sign * math.Ldexp(frac, -24)
	case 0x1f:
		if frac == 0 {
			return math.Inf(int(sign))
		}
		return math.NaN()
	}
	return sign * math.Ldexp(1+frac/1024, exp-15)
}

// putNumber writes v as one element of Neuroglancer property type typ
// (a numeric type; integers saturate at the type's range, NaN becomes 0).
func putNumber(dst []byte, typ string, v float64) {
	le := binary.LittleEndian
	if typ == "float32" {
		le.PutUint32(dst, math.Float32bits(float32(v)))
		return
	}
	lo, hi := intRange(typ)
	switch {
	case math.IsNaN(v):
		v = 0
	case v < lo:
		v = lo
	case v > hi:
		v = hi
	}
	switch typ {
	case "uint8", "int8":
		dst[0] = byte(int64(v))
	case "uint16", "int16":
		le.PutUint16(dst, uint16(int64(v)))
	case "uint32", "int32":
		le.PutUint32(dst, uint32(int64(v)))
	}
}

func intRange(typ string) (float64, float64) {
	switch typ {
	case "uint8":
		return 0, math.MaxUint8
	case "int8":
		return math.MinInt8, math.MaxInt8
	case "uint16":
		return 0, math.MaxUint16
	case "int16":
		return math.MinInt16, math.MaxInt16
	case "uint32":
		return 0, math.MaxUint32
	case "int32":
		return math.MinInt32, math.MaxInt32
	}
	return math.Inf(-1), math.Inf(1)
}

// putFloat32s appends float32 values converted from data of type dt.
func putFloat32s(dst []byte, data []byte, dt string, n int) []byte {
	if dt == "float32" {
		return append(dst, data[:4*n]...)
	}
	for i := range n {
		dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(float32(valueAt(data, dt, i))))
	}
	return dst
}
