//go:build amd64 && !purego

package zvf

import "golang.org/x/sys/cpu"

// The row kernels' steps of 8 rows in AVX2 (bbox_rowbits_amd64.s). Each
// takes src's rows 8 at a time and returns the bytes of src it took and
// the rows it kept (copyRowsAVX2: the bytes it wrote); the caller's Go
// kernel takes the rest. dst has src's length, nums its rows: a step
// stores whole vectors, into the room of the rows it took.

//go:noescape
func copyRowsAVX2(dst, src []byte, runs *bitRuns, keyed bool) (done, n int)

//go:noescape
func matchRowsAVX2(nums []int32, src []byte, r int32, runs *bitRuns, keyed bool) (done, kept int)

//go:noescape
func matchCopyRowsAVX2(nums []int32, dst, src []byte, r int32, runs *bitRuns, keyed bool) (done, kept int)

// simdRows says whether the kernels have a vector path here.
func simdRows() bool { return cpu.X86.HasAVX2 && cpu.X86.HasPOPCNT }

// copyRowsSIMD is copyRowsAVX2 (len(dst) >= len(src)), its kept rows
// counted.
func copyRowsSIMD(dst, src []byte, runs *bitRuns, keyed bool) (done, kept int) {
	if len(dst) < len(src) {
		panic("zvf: copyRowsSIMD: dst shorter than src")
	}
	done, n := copyRowsAVX2(dst, src, runs, keyed)
	return done, n / 12
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
