//go:build !amd64 || purego

package api

// quantAVX2: no vector steps here.
const quantAVX2 = false

// cells3SIMD has no vector steps here: the caller does every row.
func cells3SIMD(_, _ []byte, _, _ int, _ *[3]cellRule) (done int, ok bool) { return 0, false }

// bounds3SIMD has no vector steps here.
func bounds3SIMD([]byte, *[6]float32) (steps int, bad bool) { return 0, false }
