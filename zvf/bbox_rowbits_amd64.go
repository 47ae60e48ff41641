//go:build amd64 && !purego

package zvf

import "golang.org/x/sys/cpu"

// The row kernels' steps of 8 rows in AVX2 (bbox_rowbits_amd64.s). Each
// takes the rows of src while at least 9 remain (a step's 16-byte row
// moves reach 4 bytes past it) and returns the bytes of src it took and
// the rows it kept; the caller's Go kernel takes the rest. dst has src's
// length, nums its rows.

//go:noescape
func copyRowsAVX2(dst, src []byte, runs *bitRuns, keyed bool) (done, kept int)

//go:noescape
func matchRowsAVX2(nums []int32, src []byte, r int32, runs *bitRuns, keyed bool) (done, kept int)

//go:noescape
func matchCopyRowsAVX2(nums []int32, dst, src []byte, r int32, runs *bitRuns, keyed bool) (done, kept int)

// simdRows says whether the kernels have a vector path here.
func simdRows() bool { return cpu.X86.HasAVX2 }

// copyRowsSIMD is copyRowsAVX2 (len(dst) >= len(src)).
func copyRowsSIMD(dst, src []byte, runs *bitRuns, keyed bool) (done, kept int) {
	if len(dst) < len(src) {
		panic("zvf: copyRowsSIMD: dst shorter than src")
	}
	return copyRowsAVX2(dst, src, runs, keyed)
}

// matchRowsSIMD is matchRowsAVX2, or matchCopyRowsAVX2 when dst is not
// nil (len(nums) >= len(src)/12, len(dst) >= len(src)).
func matchRowsSIMD(nums []int32, dst, src []byte, r int32, runs *bitRuns, keyed bool) (done, kept int) {
	if len(nums) < len(src)/12 || dst != nil && len(dst) < len(src) {
		panic("zvf: matchRowsSIMD: room shorter than src")
	}
	if dst == nil {
		return matchRowsAVX2(nums, src, r, runs, keyed)
	}
	return matchCopyRowsAVX2(nums, dst, src, r, runs, keyed)
}
