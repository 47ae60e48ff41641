// Package zvftest holds helpers for tests only (the production binary
// never links it, nor the testing package it imports).
package zvftest

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// CopyTree copies the folder src into a fresh temporary folder of tb and
// returns the copy's path (same base name): tests mutate copies of the
// committed fixtures, which are read-only.
func CopyTree(tb testing.TB, src string) string {
	tb.Helper()
	dst := filepath.Join(tb.TempDir(), filepath.Base(src))
	CopyInto(tb, src, dst)
	return dst
}

// CopyInto copies the file or folder src to dst (a folder's files below
// it), writable, creating the folders it needs.
func CopyInto(tb testing.TB, src, dst string) {
	tb.Helper()
	if err := CopyDir(src, dst); err != nil {
		tb.Fatal(err)
	}
}

// CopyDir is CopyInto for a caller with no test at hand (a fixture built
// once for a package's tests).
func CopyDir(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		// A folder's files come after the folder, made above; only a
		// lone file needs its parent made (a stat per file saved).
		if rel == "." {
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return err
			}
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
}
