//go:build amd64 && !purego

package zvf

import "golang.org/x/sys/cpu"

// The row kernels' steps of 8 rows in AVX2 and in AVX-512
// (bbox_rowbits_amd64.s). Each takes src's rows 8 at a time and returns
// the bytes of src it took and the rows it kept (copyRows*: the bytes it
// wrote); the caller's Go kernel takes the rest. dst has src's length,
// nums its rows: a step stores whole vectors, into the room of the rows
// it took.

//go:noescape
func copyRowsAVX2(dst, src []byte, runs *bitRuns, keyed bool) (done, n int)

//go:noescape
func matchRowsAVX2(nums []int32, src []byte, r int32, runs *bitRuns, keyed bool) (done, kept int)

//go:noescape
func matchCopyRowsAVX2(nums []int32, dst, src []byte, r int32, runs *bitRuns, keyed bool) (done, kept int)

//go:noescape
func copyRowsAVX512(dst, src []byte, runs *bitRuns, keyed bool) (done, n int)

//go:noescape
func matchRowsAVX512(nums []int32, src []byte, r int32, runs *bitRuns, keyed bool) (done, kept int)

//go:noescape
func matchCopyRowsAVX512(nums []int32, dst, src []byte, r int32, runs *bitRuns, keyed bool) (done, kept int)

// The vector steps this CPU runs, read once from x/sys/cpu (its flags
// are fixed when the process starts; read per call they cost a dozen
// instructions of every cut run). AVX-512 wants 512- and 256-bit vectors
// (F, VL) with mask registers (BW for their 32-bit moves, shifts and
// joins), and BMI2 for the masks' scalar part; x/sys/cpu's AVX-512 flags
// include the OS's saving of the mask and upper registers.
var (
	cpuRowsAVX2   = cpu.X86.HasAVX2 && cpu.X86.HasPOPCNT
	cpuRowsAVX512 = cpuRowsAVX2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512BW &&
		cpu.X86.HasBMI2
)

// simdRows says whether path has vector steps here.
func simdRows(path rowPath) bool { return path != rowsGo && cpuRowsAVX2 }

// avx512Rows says whether path takes the AVX-512 steps.
func avx512Rows(path rowPath) bool { return path == rowsBest && cpuRowsAVX512 }

// copyRowsSIMD is copyRowsAVX512 or copyRowsAVX2 (len(dst) >= len(src)),
// its kept rows counted.
func copyRowsSIMD(dst, src []byte, runs *bitRuns, keyed bool, path rowPath) (done, kept int) {
	if len(dst) < len(src) {
		panic("zvf: copyRowsSIMD: dst shorter than src")
	}
	var n int
	if avx512Rows(path) {
		done, n = copyRowsAVX512(dst, src, runs, keyed)
	} else {
		done, n = copyRowsAVX2(dst, src, runs, keyed)
	}
	return done, n / 12
}

// matchRowsSIMD is matchRows*, or matchCopyRows* when dst is not nil
// (len(nums) >= len(src)/12, len(dst) >= len(src)), of AVX-512 or AVX2.
func matchRowsSIMD(nums []int32, dst, src []byte, r int32, runs *bitRuns, keyed bool, path rowPath) (done, kept int) {
	if len(nums) < len(src)/12 || dst != nil && len(dst) < len(src) {
		panic("zvf: matchRowsSIMD: room shorter than src")
	}
	wide := avx512Rows(path)
	switch {
	case dst == nil && wide:
		return matchRowsAVX512(nums, src, r, runs, keyed)
	case dst == nil:
		return matchRowsAVX2(nums, src, r, runs, keyed)
	case wide:
		return matchCopyRowsAVX512(nums, dst, src, r, runs, keyed)
	}
	return matchCopyRowsAVX2(nums, dst, src, r, runs, keyed)
}
