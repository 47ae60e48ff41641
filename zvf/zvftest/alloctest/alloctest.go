// Package alloctest measures what a piece of code allocates, for the
// decoders' tests that bound allocation by input size (a decoder must not
// size a buffer from an unchecked header field). It imports nothing of
// zvfserve, so the leaf packages' internal tests can use it.
package alloctest

import (
	"runtime"
	"testing"
)

// Bytes is the bytes f allocates (the growth of TotalAlloc). It counts
// every goroutine's allocations, so a test that uses it must not run in
// parallel with others in its package.
func Bytes(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// SkipUnderRace skips a test that counts allocations when the race
// detector is on.
func SkipUnderRace(tb testing.TB) {
	tb.Helper()
	if Race {
		tb.Skip("allocation counts are meaningless under the race detector")
	}
}
