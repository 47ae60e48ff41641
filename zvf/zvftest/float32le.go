package zvftest

import (
	"encoding/binary"
	"math"
)

// Float32LE is v as little-endian float32 bytes: the layout of a vertices
// column and of the rows EdgeSet and FaceSet read.
func Float32LE(v []float32) []byte {
	b := make([]byte, 0, 4*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}
