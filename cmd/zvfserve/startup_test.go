package main

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/storage/localfs"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// TestServeBadStoreWithoutRevalidate: with --revalidate 0 (stores taken
// as immutable) a store that does not open is served as its problem
// beside the others, as with checks on — it is only never retried.
// Before, serve exited with the store's error.
func TestServeBadStoreWithoutRevalidate(t *testing.T) {
	t.Parallel()
	bad := unknownVersionCopy(t, graphStore)
	s := startServe(t, "--revalidate", "0", "good="+graphStore, "bad="+bad)
	const q = "/bbox?min=390,223,585&max=480,313,675&limit=1"
	if code, body, _ := httpGet(t, s.base+"/api/v1/stores/good"+q); code != http.StatusOK || !strings.Contains(body, `"count":1`) {
		t.Errorf("good store: %d %.200s", code, body)
	}
	if code, body, _ := httpGet(t, s.base+"/api/v1/stores/bad"+q); code != http.StatusUnprocessableEntity || !strings.Contains(body, "zv_version") {
		t.Errorf("bad store: %d %.200s", code, body)
	}
	if code, body, _ := httpGet(t, s.base+"/api/v1/stores"); code != http.StatusOK || !strings.Contains(body, `"name":"bad","status":"error"`) {
		t.Errorf("catalog: %d %.300s", code, body)
	}
	if !strings.Contains(s.errs.String(), `store does not open; serving its error" store=bad`) || !strings.Contains(s.errs.String(), "not retried") {
		t.Errorf("the log does not say which store failed and that it is not retried: %s", s.errs.String())
	}
}

// TestServeLinkLoops09: a ZVF 0.9 store without nonempty_chunks (its
// cells found by listing) whose array folder holds links back to itself
// ("x -> .", twice: ~2^40 paths) opens, serve listens, and the answers
// are those of the same store without the links. Before, serve never
// listened (the walk never ended, writing ~5 MB of warnings per 15 s).
func TestServeLinkLoops09(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "loops.zarrvectors")
	src := zvftest.Store(t, graphStore)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	dst, err := localfs.Open(dir, localfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	if err := zvftest.To09(ctx, src, dst, zvftest.To09Options{OmitNonempty: true}); err != nil {
		t.Fatal(err)
	}
	clean := zvftest.CopyTree(t, dir)
	for _, l := range []string{"x", "y"} {
		if err := os.Symlink(".", filepath.Join(dir, "0", "vertices", "c", l)); err != nil {
			t.Fatal(err)
		}
	}
	s := startServe(t, "--revalidate", "0", "loops="+dir, "clean="+clean)
	const q = "/bbox?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9"
	_, want, _ := httpGet(t, s.base+"/api/v1/stores/clean"+q)
	code, got, _ := httpGet(t, s.base+"/api/v1/stores/loops"+q)
	if want = strings.Replace(want, `"store":"clean"`, `"store":"loops"`, 1); code != http.StatusOK || got != want || !strings.Contains(got, `"count":600,`) {
		t.Errorf("loops: %d %.300s\nwant %.300s", code, got, want)
	}
	if n := strings.Count(s.errs.String(), "\n"); n > 40 {
		t.Errorf("%d log lines: %.2000s", n, s.errs.String())
	}
}

// TestDiscoverLinkLoops: links that lead back to a folder above them
// ("x -> .", a link to the parent) do not make the search for stores find
// one store under many names (two "x -> ." links gave 255 copies); a
// link to a store elsewhere in the folder still serves it under that
// name too, as before.
func TestDiscoverLinkLoops(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	zvftest.CopyInto(t, graphStore, filepath.Join(dir, "lab", "a.zarrvectors"))
	for link, target := range map[string]string{"x": ".", "y": ".", "lab/up": "..", "lab/b": "a.zarrvectors"} {
		if err := os.Symlink(target, filepath.Join(dir, filepath.FromSlash(link))); err != nil {
			t.Fatal(err)
		}
	}
	st, err := localfs.Open(dir, localfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var logs strings.Builder
	found, err := discoverStores(ctx, st, "", slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range found {
		got = append(got, f.name+"="+f.prefix)
	}
	if want := "lab.a=lab/a.zarrvectors/ lab.b=lab/b/"; strings.Join(got, " ") != want {
		t.Errorf("found %q, want %q", got, want)
	}
	if !strings.Contains(logs.String(), "a link back to a folder above it") {
		t.Errorf("the log does not name the loop:\n%s", logs.String())
	}
}
