// Package golden compares what a test produced with a golden file in its
// testdata, and rewrites the file when the test is run with -update. It
// imports nothing of zvfserve, so the leaf packages' internal tests can
// use it.
package golden

import (
	"bytes"
	"os"
	"testing"
)

// Check fails tb unless got is the content of the file at path, showing
// both in hex; with update it first writes got to path (a deliberate
// change of format, reviewed in the diff).
func Check(tb testing.TB, path string, got []byte, update bool) {
	tb.Helper()
	if update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		tb.Fatalf("%s changed:\n got % x\nwant % x", path, got, want)
	}
}
