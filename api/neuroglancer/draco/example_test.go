package draco_test

import (
	"fmt"

	"github.com/zvfserve/zvfserve/api/neuroglancer/draco"
)

// One fragment at Neuroglancer's 10-bit vertex quantization: a triangle
// and a degenerate one, both kept as given.
func ExampleEncoder_Append() {
	var enc draco.Encoder // reuse it for every fragment
	m := draco.Mesh{
		Bits:      10,
		Positions: []uint32{0, 0, 0, 1023, 0, 0, 0, 1023, 0},
		Faces:     []uint32{0, 1, 2, 2, 2, 1},
	}
	buf, err := enc.Append(nil, m)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%d bytes, starting %q\n", len(buf), buf[:5])

	m.Positions[0] = 1024 // above 2^10 − 1
	_, err = enc.Append(buf[:0], m)
	fmt.Println(err)
	// Output:
	// 59 bytes, starting "DRACO"
	// draco: Positions[0]: 1024 is above 2^10-1
}
