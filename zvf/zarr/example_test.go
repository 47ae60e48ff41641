package zarr_test

import (
	"fmt"

	"github.com/zvfserve/zvfserve/zvf/zarr"
)

// Advance walks a grid of chunks (or the rows of one) in C order, the
// last axis fastest, and reports false once it has passed the last
// position, leaving the index back at zero.
func ExampleAdvance() {
	shape := []int64{2, 3}
	idx := make([]int64, len(shape))
	for {
		fmt.Println(idx)
		if !zarr.Advance(idx, shape) {
			break
		}
	}
	fmt.Println("after:", idx)
	// Output:
	// [0 0]
	// [0 1]
	// [0 2]
	// [1 0]
	// [1 1]
	// [1 2]
	// after: [0 0]
}
