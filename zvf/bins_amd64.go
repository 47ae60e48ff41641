//go:build amd64 && !purego

package zvf

// sameBinAVX2 is the first of data's float32 × 3 rows not strictly inside
// the box lohi gives (lo in lohi[0:3], hi in lohi[4:7], float32 bounds
// that decide as sameBin3's float64 ones: see binBounds), taking whole
// steps of 8 rows: when every row of the steps is inside, the rows they
// took; the caller tests the rest.
//
//go:noescape
func sameBinAVX2(data []byte, lohi *[8]float32) (done int)

// sameBinSIMD is sameBinAVX2 where it runs (ok), else nothing: the caller
// tests every row.
func sameBinSIMD(data []byte, lohi *[8]float32) (k int, ok bool) {
	if !cpuRowsAVX2 {
		return 0, false
	}
	return sameBinAVX2(data, lohi), true
}
