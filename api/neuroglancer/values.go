package neuroglancer

import (
	"encoding/binary"
	"math"

	"github.com/zvfserve/zvfserve/zvf"
)

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

// putFloat32s appends n float32 values converted from the elements of c
// starting at element first.
func putFloat32s(dst []byte, c *zvf.Column, first, n int) []byte {
	if c.DType == "float32" {
		return append(dst, c.Data[4*first:4*(first+n)]...)
	}
	for i := range n {
		dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(float32(c.At(first+i).Float64())))
	}
	return dst
}
