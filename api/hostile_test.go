package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/storage/localfs"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// hostileChunk is the chunk every case below replaces.
const hostileChunk = "0/vertices/3.4.2/c/0"

// TestHostileFiles: what can sit in a store's folder in place of a chunk —
// a huge file, a link to /dev/zero, a FIFO, a link to a file outside the
// store — fails the requests that need that chunk with a 422 problem,
// promptly, without reading it, without saying what is outside the store,
// and leaves the server (and the healthy store beside it) serving. Before
// storage reads were bounded and confined, the huge file and /dev/zero
// were read whole (the process died of OOM), the FIFO hung its request and
// shutdown, and the outside file was served with its size in the 422 text.
func TestHostileFiles(t *testing.T) {
	ctx := context.Background()
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret-vertices")
	// The chunk's own bytes, so a server that follows the link serves them.
	orig, err := os.ReadFile(filepath.Join(fixtures, "graph.zarrvectors", filepath.FromSlash(hostileChunk)))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secret, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	healthy := openStores(t, "graph")[0]
	healthyAnswer := graphBoxAnswer(t, healthy)
	sc := copyStore(t, "graph")
	dir := sc.dir
	for _, tc := range []struct {
		name    string
		follow  bool
		apply   func(t *testing.T, p string)
		problem string // "" when the chunk is served
	}{
		{"3 GiB file", false, func(t *testing.T, p string) {
			f, err := os.Create(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := f.Truncate(3 << 30); err != nil {
				t.Fatal(err)
			}
		}, "corrupt-data"},
		{"link to /dev/zero", false, symlinkTo("/dev/zero"), "corrupt-data"},
		{"link to /dev/zero, links followed", true, symlinkTo("/dev/zero"), "corrupt-data"},
		{"FIFO", false, func(t *testing.T, p string) {
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "corrupt-data"},
		{"link outside the store", false, symlinkTo(secret), "corrupt-data"},
		{"link outside the store, links followed", true, symlinkTo(secret), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc.change(t, change{hostileChunk, func(t *testing.T, p string) {
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
				tc.apply(t, p)
			}})
			st, err := blobstore.OpenWith(ctx, dir, localfs.Options{FollowSymlinks: tc.follow})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			_, srv := handleServer(t, st, zvf.Options{Name: "bad", Cache: cache.New(32 << 20)}, zvf.Watch{Enabled: true},
				api.Options{Stores: []*zvf.Store{healthy}, RequestTimeout: 10 * time.Second})
			var ms0, ms1 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			start := time.Now()
			code, ctype, body := serve(t, srv.Handler(), "/api/v1/stores/bad/levels/0/chunks/3.4.2")
			took := time.Since(start)
			runtime.ReadMemStats(&ms1)
			if tc.problem == "" {
				if code != 200 || !strings.Contains(string(body), `"count":4`) {
					t.Fatalf("followed link: %d %.300s", code, body)
				}
			} else {
				var p api.Problem
				if code != 422 || ctype != "application/problem+json" || json.Unmarshal(body, &p) != nil || !strings.HasSuffix(p.Type, "/"+tc.problem) {
					t.Fatalf("%d %s %s", code, ctype, body)
				}
				if !strings.Contains(p.Detail, "level 0 array vertices chunk 3.4.2") {
					t.Errorf("detail does not say where: %q", p.Detail)
				}
				for _, leak := range []string{outside, dir, "secret", "48", "3221225472"} {
					if strings.Contains(string(body), leak) {
						t.Errorf("problem reveals %q: %s", leak, body)
					}
				}
			}
			if alloc := ms1.TotalAlloc - ms0.TotalAlloc; alloc > 64<<20 {
				t.Errorf("the request allocated %d MB", alloc>>20)
			}
			if took > 5*time.Second {
				t.Errorf("the request took %v", took)
			}
			if code, _, body := serve(t, srv.Handler(), graphBox); code != 200 || !bytes.Equal(body, healthyAnswer) {
				t.Fatalf("healthy store: %d %.200s", code, body)
			}
			if code, _, _ := serve(t, srv.Handler(), "/api/v1/stores/bad/levels/0/chunks/3.4.3"); code != 200 {
				t.Fatalf("another chunk of the same store: %d", code)
			}
		})
	}
}

func symlinkTo(target string) func(t *testing.T, p string) {
	return func(t *testing.T, p string) {
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStrayFoldersDoNotBreakAStore: a folder beside the levels that the
// server cannot read (a lost+found owned by root; a chain of folders too
// deep to name) does not make the store fail — it used to turn every
// route into 502, indefinitely, because revalidation listed the whole
// store. Neither start nor revalidation reads it now; a whole-store walk,
// when asked for, skips it with a warning.
func TestStrayFoldersDoNotBreakAStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := zvftest.CopyTree(t, filepath.Join(fixtures, "graph.zarrvectors"))
	lf := filepath.Join(dir, "lost+found")
	if err := os.MkdirAll(filepath.Join(lf, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(lf, 0o700); err != nil {
		t.Fatal(err)
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.MkdirAll(strings.Repeat(strings.Repeat("d", 250)+"/", 20), 0o755); err != nil {
		t.Fatal(err)
	}
	_ = r.Close()
	_, srv := handleServer(t, zvftest.Store(t, dir), zvf.Options{Name: "graph", Cache: cache.New(32 << 20)}, zvf.Watch{Enabled: true}, api.Options{})
	want := graphBoxAnswer(t, openStores(t, "graph")[0])
	check := func(step string) {
		t.Helper()
		if code, _, body := serve(t, srv.Handler(), graphBox); code != 200 || !bytes.Equal(body, want) {
			t.Fatalf("%s: %d %.300s", step, code, body)
		}
	}
	check("opened")
	if err := srv.Refresh(ctx); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	check("refreshed")
	if err := srv.RefreshDeep(ctx); err != nil {
		t.Fatalf("RefreshDeep: %v", err)
	}
	check("walked")
}
