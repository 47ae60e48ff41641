//go:build race

package alloctest

// Race reports whether the race detector is on. It makes sync.Pool drop
// items at random (so allocation counts mean nothing under it) and code
// several times slower.
const Race = true
