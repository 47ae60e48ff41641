package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/storage/memstore"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// TestOneStoreCommandsOnAFolderOfStores: inspect and validate pointed at
// a folder of stores (and query) say that it is one, list the stores and name one as
// an argument (exit 2, a command-line mistake); they said "no root
// zarr.json: not a ZVF store" and "INVALID".
func TestOneStoreCommandsOnAFolderOfStores(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	zvftest.CopyInto(t, "../../testdata/zvf-reference/graph.zarrvectors", filepath.Join(dir, "lab", "graph.zarrvectors"))
	zvftest.CopyInto(t, "../../testdata/zvf-reference/mesh.zarrvectors", filepath.Join(dir, "mesh.zarr"))
	// query too: it said "no root zarr.json: not a ZVF store".
	for _, args := range [][]string{{"inspect"}, {"inspect", "--json"}, {"validate", "--no-progress"}, {"validate", "--json"}, {"query", "--bbox", "0,0,0,1,1,1"}} {
		out, errs, code := runCmd(t, append(args, dir)...)
		cmd := args[0]
		if code != 2 || out != "" {
			t.Errorf("%v: exit %d, stdout %q; want 2 and nothing", args, code, out)
		}
		for _, want := range []string{dir + " is not a store but a folder of 2 stores: lab/graph.zarrvectors, mesh.zarr",
			fmt.Sprintf("zvfserve %s %s/lab/graph.zarrvectors", cmd, dir), "zvfserve serve " + dir} {
			if !strings.Contains(errs, want) {
				t.Errorf("%v: stderr %q does not say %q", args, errs, want)
			}
		}
	}
	// A store still is one.
	if _, errs, code := runCmd(t, "inspect", filepath.Join(dir, "mesh.zarr")); code != 0 {
		t.Errorf("inspect a store of the folder: exit %d: %s", code, errs)
	}
}

// TestOneStoreCommandsOnAFolderOfNoStore: inspect, validate and query
// pointed at a folder that holds no store at all (the wrong folder: notes,
// an empty one) say so and what a STORE is (exit 2). They said "store
// \"junk\": no root zarr.json: not a ZVF store" (exit 1), and validate
// printed a report of the folder as a broken store.
func TestOneStoreCommandsOnAFolderOfNoStore(t *testing.T) {
	t.Parallel()
	junk := t.TempDir()
	if err := os.MkdirAll(filepath.Join(junk, "notes"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(junk, "notes", "readme.txt"), []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{junk, t.TempDir()} {
		for _, args := range [][]string{{"inspect"}, {"validate", "--no-progress"}, {"query", "--bbox", "0,0,0,1,1,1"}} {
			out, errs, code := runCmd(t, append(args, dir)...)
			want := "zvfserve " + args[0] + ": " + dir + " holds no ZVF store: no zarr.json in it nor in the folders below it; a STORE is the folder that holds a store's zarr.json, or a folder of stores\n"
			if code != 2 || out != "" || errs != want {
				t.Errorf("%v %s: exit %d, stdout %q, stderr %q; want 2 and %q", args, dir, code, out, errs, want)
			}
		}
	}
}

// TestServeFolderOfNoStore: serve pointed at a folder that holds no store
// (the wrong folder: notes, an empty one), alone or beside a store, does
// not start: it says so, what a STORE is, and that folders are searched
// only at start (exit 2). It served the folder as one store that answered
// every route with "no root zarr.json" and kept /readyz at 503, and
// stores written below it later were never found.
func TestServeFolderOfNoStore(t *testing.T) {
	t.Parallel()
	junk := t.TempDir()
	if err := os.MkdirAll(filepath.Join(junk, "notes"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(junk, "notes", "readme.txt"), []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	for _, args := range [][]string{{junk}, {empty}, {graphStore, empty}} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var out, errs bytes.Buffer
		code := run(ctx, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...), &out, &errs)
		cancel()
		dir := args[len(args)-1]
		want := "zvfserve serve: " + dir + " holds no ZVF store: no zarr.json in it nor in the folders below it; a STORE is the folder that holds a store's zarr.json, or a folder of stores" +
			" (searched for stores only at start: start serve once one is written there)\n"
		if code != 2 || out.Len() != 0 || !strings.HasSuffix(errs.String(), want) {
			t.Errorf("serve %v: exit %d, stdout %q, stderr %q; want 2 and %q", args, code, out.String(), errs.String(), want)
		}
	}
}

// TestValidateGroupsOneBrokenChunk: one truncated chunk is one problem for
// the chunk and one for the objects whose manifests name it — with their
// count and the first few of their paths — not a line per object.
func TestValidateGroupsOneBrokenChunk(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := zvftest.CopyTree(t, "../../testdata/zvf-reference/polylines.zarrvectors")
	// The level-0 chunk most objects pass through, and those objects.
	st, err := blobstore.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	l0 := zvftest.OpenLevel(t, st, zvf.Options{Name: "p"}, 0)
	objects := map[string]map[int64]bool{}
	for id := range l0.Info().ObjectCount {
		m, err := l0.Manifest(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range m.Blocks {
			k := b.Chunk.String()
			if objects[k] == nil {
				objects[k] = map[int64]bool{}
			}
			objects[k][id] = true
		}
	}
	_ = st.Close()
	chunk := ""
	for k, ids := range objects {
		if chunk == "" || len(ids) > len(objects[chunk]) || len(ids) == len(objects[chunk]) && k < chunk {
			chunk = k
		}
	}
	if len(objects[chunk]) < 6 {
		t.Fatalf("chunk %s is named by %d objects: too few to group", chunk, len(objects[chunk]))
	}
	file := filepath.Join(dir, "0", "vertices", chunk, "c", "0")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}

	out, errs, code := runCmd(t, "validate", "--json", dir)
	if code != 1 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep struct {
		OK       bool
		Problems []zvf.Problem
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	var forObjects []zvf.Problem
	for _, p := range rep.Problems {
		if strings.HasPrefix(p.Path, "0/objects/") {
			forObjects = append(forObjects, p)
		}
		if p.Count < 1 || p.Count > 1 && (len(p.Paths) == 0 || len(p.Paths) > 5 || p.Paths[0] != p.Path) {
			t.Errorf("problem %+v: count and paths disagree", p)
		}
	}
	if len(forObjects) != 1 {
		t.Fatalf("%d problems for objects, want 1: %+v", len(forObjects), forObjects)
	}
	p := forObjects[0]
	if p.Count != len(objects[chunk]) || len(p.Paths) != 5 || !strings.Contains(p.Message, chunk) {
		t.Errorf("the objects' problem: %+v; %d objects name chunk %s", p, len(objects[chunk]), chunk)
	}
	for _, path := range p.Paths {
		var id int64
		if _, err := fmt.Sscanf(path, "0/objects/%d", &id); err != nil || !objects[chunk][id] {
			t.Errorf("path %q is no object that names chunk %s", path, chunk)
		}
	}
	if len(rep.Problems) > 4 {
		t.Errorf("%d problems for one broken chunk: %+v", len(rep.Problems), rep.Problems)
	}

	out, _, code = runCmd(t, "validate", "--no-progress", dir)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 1 || len(lines) != len(rep.Problems)+1 {
		t.Fatalf("exit %d, %d lines for %d problems:\n%s", code, len(lines), len(rep.Problems), out)
	}
	want := fmt.Sprintf("error   L3  %d× %s, …: ", p.Count, strings.Join(p.Paths, ", "))
	if !strings.Contains(out, want) || !strings.Contains(lines[len(lines)-1], fmt.Sprintf("problems, found at %d places)", len(rep.Problems)-1+p.Count)) {
		t.Errorf("text report:\n%s\nwant a line with %q", out, want)
	}
}

// TestDemoRefusesToWriteIntoAStore: OUT inside a store (or a store
// itself) is refused before anything is written; the demo's stores would
// have become part of it.
func TestDemoRefusesToWriteIntoAStore(t *testing.T) {
	t.Parallel()
	store := zvftest.CopyTree(t, "../../testdata/zvf-reference/graph.zarrvectors")
	for _, out := range []string{store, filepath.Join(store, "demo"), filepath.Join(store, "0", "new", "deeper"), "file://" + filepath.Join(store, "x")} {
		stdout, errs, code := runCmd(t, "demo", "--scale", "0.01", out)
		want := "inside the store " + store + ";"
		if out == store {
			want = store + " is a store;" // not "inside the store" it is
		}
		if code != 2 || stdout != "" || !strings.Contains(errs, want) {
			t.Errorf("demo %s: exit %d, %q, %q; want 2 and %q", out, code, stdout, errs, want)
		}
	}
	for _, p := range []string{"demo", "cells", "0/new", "x"} {
		if _, err := os.Stat(filepath.Join(store, p)); err == nil {
			t.Errorf("%s was written into the store", p)
		}
	}
}

// refusingStore answers every listing with err: a bucket that does not
// exist, credentials refused.
type refusingStore struct {
	storage.Store
	err error
}

func (s refusingStore) List(context.Context, string) (storage.Listing, error) {
	return storage.Listing{}, s.err
}

// TestFolderOfNoStoreNeedsAListing: a root that cannot be listed (here a
// bucket that does not exist) is not "a folder that holds no store": the
// command reports why it could not be read instead. inspect on a missing
// bucket said "holds no ZVF store: no zarr.json in it …".
func TestFolderOfNoStoreNeedsAListing(t *testing.T) {
	t.Parallel()
	missing := &storage.Error{Op: "list", Err: &storage.SetupError{Msg: "the bucket does not exist (NoSuchBucket)"}}
	st := refusingStore{Store: memstore.New(), err: missing}
	if err := folderOfStores(context.Background(), st, "s3://b/x", "inspect"); err != nil {
		t.Errorf("a root that cannot be listed: %v", err)
	}
}

// TestValidateVerdictDropsTheQuery: validate's verdict line named the
// store as typed, query and all, though a store URL's query may carry
// secrets (docs/security.md: they are dropped from messages); it now
// shows the URL as errors do, its query elided.
func TestValidateVerdictDropsTheQuery(t *testing.T) {
	t.Parallel()
	abs, err := filepath.Abs("../../testdata/zvf-reference/graph.zarrvectors")
	if err != nil {
		t.Fatal(err)
	}
	out, errs, code := runCmd(t, "validate", "--no-progress", "file://"+abs+"?sig=s3cr3t")
	if code != 0 || strings.Contains(out+errs, "s3cr3t") || !strings.Contains(out, "file://"+abs+"?…: valid") {
		t.Errorf("exit %d: %s%s", code, out, errs)
	}
}

// TestServeFolderWithStoresOnlyTooDeep: a folder whose only store lies
// deeper than the search goes (8 folder levels) was refused saying it
// holds "no zarr.json in it nor in the folders below it" — untrue, and
// no hint that the depth was the reason. Now the refusal (exit 2) says
// no store was found within 8 folder levels, and to name a folder nearer
// the stores.
func TestServeFolderWithStoresOnlyTooDeep(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	deep := filepath.Join(root, "a", "b", "c", "d", "e", "f", "g", "h", "i")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(zvftest.CopyTree(t, graphStore), filepath.Join(deep, "g.zarrvectors")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out, errs bytes.Buffer
	code := run(ctx, []string{"serve", "--addr", "127.0.0.1:0", root}, &out, &errs)
	want := "zvfserve serve: " + root + " holds no ZVF store within 8 folder levels of it (the search goes no deeper); name the folder nearer the stores\n"
	if code != 2 || !strings.HasSuffix(errs.String(), want) || strings.Contains(errs.String(), "nor in the folders below it") {
		t.Errorf("serve of a folder whose store is 10 levels down: exit %d, stderr %q; want 2 and %q", code, errs.String(), want)
	}
}
