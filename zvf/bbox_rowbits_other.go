//go:build !amd64 || purego

package zvf

// simdRows says whether the kernels have a vector path here: none.
func simdRows(rowPath) bool { return false }

// copyRowsSIMD takes no rows: the Go kernels take them all.
func copyRowsSIMD(dst, src []byte, runs *bitRuns, keyed bool, path rowPath) (done, kept int) {
	return 0, 0
}

// matchRowsSIMD takes no rows: the Go kernels take them all.
func matchRowsSIMD(nums []int32, dst, src []byte, r int32, runs *bitRuns, keyed bool, path rowPath) (done, kept int) {
	return 0, 0
}
