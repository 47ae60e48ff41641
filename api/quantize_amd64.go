//go:build amd64 && !purego

package api

import "golang.org/x/sys/cpu"

// quantAVX2: this CPU runs the steps of quantize_amd64.s.
var quantAVX2 = cpu.X86.HasAVX2

// cells3AVX2: see quantize_amd64.s.
//
//go:noescape
func cells3AVX2(d, out []byte, stride, w int, r *[3]cellRule) (done int)

// bounds3AVX2: see quantize_amd64.s.
//
//go:noescape
func bounds3AVX2(d []byte, b *[6]float32) (steps int, bad bool)

// cells3SIMD is cells3AVX2 where it runs and w is 1 or 2 (ok), else
// nothing: the caller does every row. out must hold plane 2's rows.
func cells3SIMD(d, out []byte, stride, w int, r *[3]cellRule) (done int, ok bool) {
	if !quantAVX2 || (w != 1 && w != 2) || len(out) < 2*stride+len(d)/12*w {
		return 0, false
	}
	return cells3AVX2(d, out, stride, w, r), true
}

// bounds3SIMD is bounds3AVX2 where it runs, else no steps.
func bounds3SIMD(d []byte, b *[6]float32) (steps int, bad bool) {
	if !quantAVX2 {
		return 0, false
	}
	return bounds3AVX2(d, b)
}
