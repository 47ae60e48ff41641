package localfs

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/zvf/storage"
)

func mustWrite(t *testing.T, p, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func open(t *testing.T, dir string, o Options) *Store {
	t.Helper()
	st, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// TestHostileFiles: what an attacker (or an accident) can put in a store's
// folder never hangs a read, never makes it allocate past its bound, and
// never serves bytes from outside the folder — nor says what is there.
func TestHostileFiles(t *testing.T) {
	ctx := context.Background()
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	mustWrite(t, secret, "the exact size of this file is private")
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, "ok"), "fine")
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{
		"escape":   secret,
		"rel":      "../" + filepath.Base(outside) + "/secret",
		"zero":     "/dev/zero",
		"dir/in":   "../ok",
		"dirlink":  "dir",
		"loop":     "loop",
		"dangling": "nothing-here",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	// A 3 GiB sparse file: reading it whole would take the process down.
	big, err := os.Create(filepath.Join(dir, "big"))
	if err != nil {
		t.Fatal(err)
	}
	if err := big.Truncate(3 << 30); err != nil {
		t.Fatal(err)
	}
	_ = big.Close()

	for _, follow := range []bool{false, true} {
		st := open(t, dir, Options{FollowSymlinks: follow})
		for _, tc := range []struct {
			key  string
			want error // nil: readable
		}{
			{"ok", nil},
			{"dir/in", nil}, // a link that stays inside
			{"fifo", storage.ErrNotRegular},
			{"big", storage.ErrTooLarge},
			{"escape", map[bool]error{false: storage.ErrOutside, true: nil}[follow]},
			{"rel", map[bool]error{false: storage.ErrOutside, true: nil}[follow]},
			{"zero", map[bool]error{false: storage.ErrOutside, true: storage.ErrNotRegular}[follow]},
			{"dirlink", storage.ErrNotRegular},
			{"loop", storage.ErrOutside},
			{"dangling", storage.ErrNotFound},
		} {
			done := make(chan struct{})
			var obj storage.Object
			var err error
			go func() {
				defer close(done)
				obj, err = st.Get(ctx, tc.key, storage.Whole(1<<20))
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatalf("follow=%v: Get(%s) did not return", follow, tc.key)
			}
			switch {
			case tc.want == nil && err != nil:
				t.Errorf("follow=%v: Get(%s): %v", follow, tc.key, err)
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Errorf("follow=%v: Get(%s) = %q, %v; want %v", follow, tc.key, obj.Data, err, tc.want)
			}
			if err != nil {
				msg := err.Error()
				for _, leak := range []string{outside, dir, "38", "secret"} {
					if strings.Contains(msg, leak) && !(leak == "secret" && follow) {
						t.Errorf("follow=%v: error for %s reveals %q: %s", follow, tc.key, leak, msg)
					}
				}
			}
			if _, err := st.Stat(ctx, tc.key); tc.want == nil && err != nil {
				t.Errorf("follow=%v: Stat(%s): %v", follow, tc.key, err)
			} else if tc.want != nil && tc.want != storage.ErrTooLarge && !errors.Is(err, tc.want) {
				t.Errorf("follow=%v: Stat(%s): %v; want %v", follow, tc.key, err, tc.want)
			}
		}
	}
}

// TestCancelledReadReturns: a read whose system call never returns (a hung
// network file system) still returns when its context ends.
func TestCancelledReadReturns(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := async(ctx, NewCalls(0), func() (int, error) { <-block; return 0, nil })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("async = %v, want the context's error", err)
	}
}

// TestBlockedCallsAreBounded: calls a hung file system never returns stay
// on their goroutines (threads, in the kernel) after their requests give
// up; past the store's bound every read, stat, listing and batch fails at
// once as the backend being unavailable, starting no goroutine, and the
// calls that return make room again.
func TestBlockedCallsAreBounded(t *testing.T) {
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, "a"), "one")
	calls := NewCalls(3)
	st := open(t, dir, Options{Calls: calls})
	block := make(chan struct{})
	for range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		if _, err := async(ctx, calls, func() (int, error) { <-block; return 0, nil }); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a hung call: %v", err)
		}
		cancel()
	}
	if n := calls.Pending(); n != 3 {
		t.Fatalf("%d calls pending, want the 3 hung ones", n)
	}
	ctx := context.Background()
	g0 := runtime.NumGoroutine()
	_, getErr := st.Get(ctx, "a", storage.Whole(10))
	_, statErr := st.Stat(ctx, "a")
	_, listErr := st.List(ctx, "")
	_, batchErr := st.StartAll(ctx, []storage.Read{{Key: "a", Opt: storage.Whole(10)}})[0]()
	for what, err := range map[string]error{"get": getErr, "stat": statErr, "list": listErr, "batch": batchErr} {
		if !errors.Is(err, storage.ErrUnavailable) || !strings.Contains(err.Error(), "3 file system calls have not returned") {
			t.Errorf("%s past the bound: %v, want unavailable", what, err)
		}
	}
	if g := runtime.NumGoroutine(); g > g0 {
		t.Errorf("%d goroutines started past the bound", g-g0)
	}
	close(block)
	for calls.Pending() > 0 {
		runtime.Gosched()
	}
	if obj, err := st.Get(ctx, "a", storage.Whole(10)); err != nil || string(obj.Data) != "one" {
		t.Fatalf("once the calls returned: %q, %v", obj.Data, err)
	}
}

// TestVersions: a file rewritten in place, or moved into place with an old
// modification time (rsync -a, cp -p), reads as a new version, newer than
// the moment before it was written.
func TestVersions(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, "a"), "one")
	st := open(t, dir, Options{})
	before, err := st.Get(ctx, "a", storage.Whole(10))
	if err != nil {
		t.Fatal(err)
	}
	now := st.Now()
	if before.Attrs.Modified.After(now) {
		t.Fatalf("file written before Now is stamped after it: %v > %v", before.Attrs.Modified, now)
	}
	mark := st.Now()
	// Writes stamped from the kernel's coarse clock lag it by up to a tick
	// (see Store.Now); this one comes later than that.
	time.Sleep(20 * time.Millisecond)
	old := time.Now().Add(-24 * time.Hour)
	mustWrite(t, filepath.Join(dir, ".new"), "two")
	if err := os.Chtimes(filepath.Join(dir, ".new"), old, old); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, ".new"), filepath.Join(dir, "a")); err != nil {
		t.Fatal(err)
	}
	after, err := st.Get(ctx, "a", storage.Whole(10))
	if err != nil {
		t.Fatal(err)
	}
	if after.Attrs.ETag == before.Attrs.ETag {
		t.Errorf("replaced file kept its version %q", after.Attrs.ETag)
	}
	if after.Attrs.Modified.Before(mark) {
		t.Errorf("file moved into place with an old mtime reads as modified at %v, before %v", after.Attrs.Modified, mark)
	}
	if _, err := storage.Since(st, mark).Get(ctx, "a", storage.Whole(10)); !errors.Is(err, storage.ErrChanged) {
		t.Errorf("Since(mark) read of the replaced file: %v, want ErrChanged", err)
	}
	if _, err := st.Get(ctx, "a", storage.ReadOptions{Len: -1, Max: 10, IfMatch: before.Attrs.ETag}); !errors.Is(err, storage.ErrChanged) {
		t.Errorf("read pinned to the old version: %v, want ErrChanged", err)
	}
}

// TestPinFollowsRootLink: a store served through a link (current -> v1)
// sees the link re-pointed, while a view pinned before keeps reading v1.
func TestPinFollowsRootLink(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	mustWrite(t, filepath.Join(base, "v1", "k"), "v1")
	mustWrite(t, filepath.Join(base, "v2", "k"), "v2")
	cur := filepath.Join(base, "current")
	if err := os.Symlink("v1", cur); err != nil {
		t.Fatal(err)
	}
	st := open(t, cur, Options{})
	v1, id1, err := st.Pin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, id, _ := st.Pin(ctx); id != id1 {
		t.Fatalf("unchanged link pinned to a new identity")
	}
	tmp := filepath.Join(base, "next")
	if err := os.Symlink("v2", tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, cur); err != nil {
		t.Fatal(err)
	}
	v2, id2, err := st.Pin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if id2 == id1 {
		t.Fatal("re-pointed link kept its identity")
	}
	for view, want := range map[storage.Store]string{v1: "v1", v2: "v2"} {
		b, err := storage.ReadAll(ctx, view, "k", 10)
		if err != nil || string(b) != want {
			t.Errorf("read %q, %v; want %q", b, err, want)
		}
	}
}

// TestWalkSkipsUnreadableFolders: a folder the server cannot read (a
// lost+found owned by root, a path too long for the system) is skipped
// with a warning, not an error for the whole store.
func TestWalkSkipsUnreadableFolders(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, "zarr.json"), "{}")
	mustWrite(t, filepath.Join(dir, "0", "zarr.json"), "{}")
	lf := filepath.Join(dir, "lost+found")
	mustWrite(t, filepath.Join(lf, "x"), "x")
	if err := os.Chmod(lf, 0o000); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(lf, 0o755) })
	// A chain of folders deeper than PATH_MAX allows naming from the root.
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	deep := strings.Repeat(strings.Repeat("d", 200)+"/", 22)
	if err := r.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	_ = r.Close()
	var warned []string
	st := open(t, dir, Options{Logger: slog.New(warnRecorder{&warned})})
	got := map[string]bool{}
	if err := st.Walk(ctx, "", func(k string, a storage.Attrs) error { got[k] = true; return nil }); err != nil {
		t.Fatalf("Walk: %v", err)
	}
	if !got["zarr.json"] || !got["0/zarr.json"] {
		t.Errorf("Walk found %v", got)
	}
	if len(warned) == 0 {
		t.Errorf("no warning for the folder it could not read")
	}
	if os.Geteuid() != 0 && !strings.Contains(strings.Join(warned, " "), "lost+found") {
		t.Errorf("warnings %v do not name lost+found", warned)
	}
	if l, err := st.List(ctx, ""); err != nil || len(l.Keys) != 1 {
		t.Errorf("List root = %+v, %v", l, err)
	}
}

type warnRecorder struct{ out *[]string }

func (w warnRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (w warnRecorder) Handle(_ context.Context, r slog.Record) error {
	s := r.Message
	r.Attrs(func(a slog.Attr) bool { s += " " + a.Value.String(); return true })
	*w.out = append(*w.out, s)
	return nil
}
func (w warnRecorder) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w warnRecorder) WithGroup(string) slog.Handler      { return w }
