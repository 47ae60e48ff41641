package localfs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/zvf/storage"
)

// walkKeys walks st under prefix with a deadline (a walk that does not
// end fails the test instead of hanging it) and returns the keys, sorted.
func walkKeys(t *testing.T, st *Store, prefix string) ([]string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var keys []string
	err := st.Walk(ctx, prefix, func(k string, a storage.Attrs) error {
		keys = append(keys, k)
		return nil
	})
	slices.Sort(keys)
	return keys, err
}

// some shows at most a few keys, so a runaway walk fails readably.
func some(keys []string) string {
	if len(keys) > 8 {
		return fmt.Sprintf("%d keys: %q…", len(keys), keys[:8])
	}
	return fmt.Sprintf("%q", keys)
}

// TestWalkLinkLoops: links to folders inside the store (two "x -> ."
// links make 2^40 paths; a link back to a parent; two links to one
// folder) never make a walk endless: each folder is walked once, by its
// own path where it has one, and each object is reported once.
func TestWalkLinkLoops(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, "zarr.json"), "{}")
	mustWrite(t, filepath.Join(dir, "0", "vertices", "c", "0", "0", "0"), "abc")
	mustWrite(t, filepath.Join(dir, "0", "vertices", "zarr.json"), "{}")
	mustWrite(t, filepath.Join(dir, "shared", "s"), "s")
	for link, target := range map[string]string{
		"x":                   ".",
		"y":                   ".",
		"0/vertices/c/back":   "../..",
		"0/vertices/c/0/self": ".",
		"0/a":                 "../shared",
		"0/b":                 "../shared",
	} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	var warned []string
	st := open(t, dir, Options{Logger: slog.New(warnRecorder{&warned})})
	want := []string{"0/vertices/c/0/0/0", "0/vertices/zarr.json", "shared/s", "zarr.json"}
	keys, err := walkKeys(t, st, "")
	if err != nil || !slices.Equal(keys, want) {
		t.Fatalf("Walk = %s, %v; want %q", some(keys), err, want)
	}
	// Below a prefix, a link to a folder outside the prefix (but inside
	// the store) is walked, once.
	keys, err = walkKeys(t, st, "0/")
	if err != nil || len(keys) != 3 || keys[0] != "0/a/s" && keys[0] != "0/b/s" {
		t.Fatalf("Walk 0/ = %s, %v", some(keys), err)
	}
	// With links allowed to lead anywhere, a loop through the outside is
	// cut the same way.
	out := t.TempDir()
	mustWrite(t, filepath.Join(out, "o"), "o")
	if err := os.Symlink(dir, filepath.Join(out, "loop")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(out, filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
	st = open(t, dir, Options{FollowSymlinks: true, Logger: slog.New(warnRecorder{&warned})})
	keys, err = walkKeys(t, st, "")
	if want := []string{want[0], want[1], "out/o", want[2], want[3]}; err != nil || !slices.Equal(keys, want) {
		t.Fatalf("Walk following links = %s, %v; want %q", some(keys), err, want)
	}
}

// TestWalkBounds: a walk visits at most MaxWalkEntries entries and runs
// at most MaxWalkTime; past either it fails with storage.ErrTooLarge
// naming the bound, instead of running on.
func TestWalkBounds(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for i := range 30 {
		mustWrite(t, filepath.Join(dir, fmt.Sprint(i/10), fmt.Sprint(i)), "x")
	}
	st := open(t, dir, Options{MaxWalkEntries: 20})
	if _, err := walkKeys(t, st, ""); !errors.Is(err, storage.ErrTooLarge) || !strings.Contains(err.Error(), "20 entries") {
		t.Errorf("over MaxWalkEntries: %v", err)
	}
	st = open(t, dir, Options{MaxWalkEntries: 33})
	if keys, err := walkKeys(t, st, ""); err != nil || len(keys) != 30 {
		t.Errorf("at MaxWalkEntries: %d keys, %v", len(keys), err)
	}
	st = open(t, dir, Options{MaxWalkTime: time.Nanosecond})
	if _, err := walkKeys(t, st, ""); !errors.Is(err, storage.ErrTooLarge) || !strings.Contains(err.Error(), "1ns") {
		t.Errorf("over MaxWalkTime: %v", err)
	}
	// The caller's own deadline is its own error, not the bound's.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := st.Walk(ctx, "", func(string, storage.Attrs) error { return nil }); !errors.Is(err, context.Canceled) || errors.Is(err, storage.ErrTooLarge) {
		t.Errorf("cancelled: %v", err)
	}
}

// TestWalkWarningsBounded: a folder of a thousand entries that cannot be
// read (links leading nowhere) costs a few warnings and one count, not a
// warning each (a walk through a link loop wrote ~5 MB of them per 15 s).
func TestWalkWarningsBounded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, "zarr.json"), "{}")
	for i := range 1000 {
		if err := os.Symlink("nowhere", filepath.Join(dir, fmt.Sprintf("dangling%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	var warned []string
	st := open(t, dir, Options{Logger: slog.New(warnRecorder{&warned})})
	keys, err := walkKeys(t, st, "")
	if err != nil || !slices.Equal(keys, []string{"zarr.json"}) {
		t.Fatalf("Walk = %s, %v", some(keys), err)
	}
	if len(warned) > walkWarnings+1 || !strings.Contains(warned[len(warned)-1], fmt.Sprint(1000-walkWarnings)) {
		t.Errorf("%d warnings, the last %q; want at most %d, then a count", len(warned), warned[len(warned)-1], walkWarnings+1)
	}
}

// TestFoldersHolding: the folders that hold an object of a name, found
// without a request per folder; an empty folder, one holding other
// things, a link leading nowhere or to a file is not one; a folder the
// check cannot see into, or a link leading out, is kept so that reading
// it says why.
func TestFoldersHolding(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	v := filepath.Join(dir, "0", "vertices")
	mustWrite(t, filepath.Join(v, "0.0.0", "zarr.json"), "{}")
	mustWrite(t, filepath.Join(v, "0.0.0", "c", "0"), "x")
	mustWrite(t, filepath.Join(v, "1.0.0", "zarr.json"), "{}")
	mustWrite(t, filepath.Join(v, "2.0.0", "c", "0"), "x") // data without metadata
	mustWrite(t, filepath.Join(v, "zarr.json"), "{}")
	for _, d := range []string{"3.0.0", "4.0.0/c", ".hidden"} {
		if err := os.MkdirAll(filepath.Join(v, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	outside := t.TempDir()
	mustWrite(t, filepath.Join(outside, "zarr.json"), "{}")
	for link, target := range map[string]string{"5.0.0": "0.0.0", "6.0.0": "nowhere", "7.0.0": "zarr.json", "8.0.0": outside} {
		if err := os.Symlink(target, filepath.Join(v, link)); err != nil {
			t.Fatal(err)
		}
	}
	st := open(t, dir, Options{})
	got, err := st.FoldersHolding(ctx, "0/vertices/", "zarr.json")
	want := []string{"0/vertices/0.0.0/", "0/vertices/1.0.0/", "0/vertices/5.0.0/", "0/vertices/8.0.0/"}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("FoldersHolding = %q, %v; want %q", got, err, want)
	}
	// The generic way (List, then a Stat each) agrees, but for the link
	// leading out, which List shows as a key.
	got, err = storage.FoldersHolding(ctx, struct{ storage.Store }{st}, "0/vertices/", "zarr.json")
	if want := want[:3]; err != nil || !slices.Equal(got, want) {
		t.Errorf("through List and Stat = %q, %v; want %q", got, err, want)
	}
	if got, err := st.FoldersHolding(ctx, "9/", "zarr.json"); err != nil || len(got) != 0 {
		t.Errorf("missing prefix: %q, %v", got, err)
	}
	if _, err := st.FoldersHolding(ctx, "../", "zarr.json"); err == nil {
		t.Errorf("a prefix out of the store was listed")
	}
}

// TestPermissionIsTyped: a file or folder the server may not read is
// storage.ErrPermission, whatever the call: the mapping from the system's
// errors (tested directly, since tests run as root here) and, when not
// root, a real unreadable chunk.
func TestPermissionIsTyped(t *testing.T) {
	t.Parallel()
	for _, e := range []error{syscall.EACCES, syscall.EPERM, &fs.PathError{Op: "openat2", Path: "/secret/path", Err: syscall.EACCES}} {
		err := classify("get", "0/vertices/1.2.3/c/0", e)
		if !errors.Is(err, storage.ErrPermission) || errors.Is(err, storage.ErrUnavailable) || strings.Contains(err.Error(), "/secret") {
			t.Errorf("%v: %v", e, err)
		}
	}
	if os.Geteuid() == 0 {
		t.Log("running as root: file permissions do not apply; the mapping above stands in")
		return
	}
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, "a", "c", "0"), "x")
	if err := os.Chmod(filepath.Join(dir, "a", "c", "0"), 0); err != nil {
		t.Fatal(err)
	}
	st := open(t, dir, Options{})
	if _, err := st.Get(context.Background(), "a/c/0", storage.Whole(10)); !errors.Is(err, storage.ErrPermission) {
		t.Errorf("Get of an unreadable file: %v", err)
	}
}

// TestWalkEndedMidReadCloses: walks of a large folder ended by their
// context at every point of their reading: the folder is closed once the
// read in progress returns, never under it. Before, the close ran beside
// the read (a data race under -race, and a nil dereference in os.File's
// ReadDir that took the process down when a check's deadline ended a
// walk).
func TestWalkEndedMidReadCloses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for i := range 5000 {
		mustWrite(t, filepath.Join(dir, fmt.Sprintf("f%05d", i)), "x")
	}
	st := open(t, dir, Options{})
	for i := range 200 {
		ctx, cancel := context.WithCancel(context.Background())
		stop := time.AfterFunc(time.Duration(i%50)*20*time.Microsecond, cancel)
		err := st.Walk(ctx, "", func(string, storage.Attrs) error { return nil })
		stop.Stop()
		cancel()
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("walk %d: %v", i, err)
		}
	}
}
