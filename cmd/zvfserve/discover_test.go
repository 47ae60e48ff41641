package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/faultstore"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

func TestStoreNameFor(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"cells/", "cells"},
		{"a/b.zarrvectors/", "a.b"},
		{"hcp/subj01/tracts.zarr/", "hcp.subj01.tracts"},
		{"weird name!/x y.zarrvectors/", "weird_name_.x_y"},
		{"_private/x/", "private.x"},
		{"données/s/", "donn_es.s"},
		{strings.Repeat("a", 200) + "/", strings.Repeat("a", 120)},
	} {
		if got := storeNameFor(tc.in); got != tc.want {
			t.Errorf("storeNameFor(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestDiscoverStores: which folders below an argument are served, under
// which names, and what is skipped with a warning.
func TestDiscoverStores(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem := zvftest.Store(t, "mem://")
	deep := "deep/1/2/3/4/5/6/7/8/9/s.zarrvectors/zarr.json"
	for _, k := range []string{
		"cells/zarr.json", "cells/0/zarr.json", "cells/0/vertices/zarr.json",
		"lab/a/b.zarrvectors/zarr.json", "lab/a/b.zarrvectors/0/zarr.json",
		"lab/a.b.zarrvectors/zarr.json",
		"old.zarr/.zgroup", "old.zarr/0/.zarray",
		".hidden/x.zarrvectors/zarr.json",
		"broken/s.zarrvectors/zarr.json",
		"notes/readme.txt",
		"weird name!/x y.zarrvectors/zarr.json",
		deep,
	} {
		if err := mem.Put(ctx, k, []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	fs := faultstore.New(mem, nil)
	fs.Add(&faultstore.Rule{Op: "list", Key: "broken/", Fault: faultstore.Fault{Err: storage.ErrUnavailable}})
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, nil))
	found, err := discoverStores(ctx, fs, "", log)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range found {
		got = append(got, f.name+"="+f.prefix)
	}
	want := []string{"cells=cells/", "lab.a.b=lab/a.b.zarrvectors/", "lab.a.b-2=lab/a/b.zarrvectors/", "old=old.zarr/", "weird_name_.x_y=weird name!/x y.zarrvectors/"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("found\n%q\nwant\n%q", got, want)
	}
	for _, w := range []string{`skipping a folder that cannot be listed" folder=broken/`, `two stores map to the same name" name=lab.a.b`, `not looking for stores deeper`} {
		if !strings.Contains(logs.String(), w) {
			t.Errorf("the log does not say %q:\n%s", w, logs.String())
		}
	}

	// A store at the root is one store; so is a folder with no store below.
	for _, prefix := range []string{"cells", "notes"} {
		f, err := discoverStores(ctx, storage.Sub(mem, prefix), "", log)
		if err != nil || f != nil {
			t.Errorf("%s: %v, %v; want nothing", prefix, f, err)
		}
	}
	f, err := discoverStores(ctx, storage.Sub(mem, "lab"), "lab.", log)
	if err != nil || len(f) != 2 || f[0].name != "lab.a.b" || f[1].name != "lab.a.b-2" {
		t.Errorf("with a name prefix: %+v, %v", f, err)
	}

	// Cancelled: the search stops with the context's error.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := discoverStores(cctx, mem, "", log); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

// TestServeFolderOfStores: "zvfserve demo DIR" then "zvfserve serve DIR"
// serves every store below DIR by its relative path, and a Zarr v2 store
// among them is listed with the problem that says so; a symbolic link to a
// store outside DIR is not followed.
func TestServeFolderOfStores(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	if _, errs, code := runCmd(t, "demo", "--scale", "0.05", filepath.Join(dir, "scene")); code != 0 {
		t.Fatalf("demo: %s", errs)
	}
	v2 := filepath.Join(dir, "legacy", "old.zarr")
	if err := os.MkdirAll(v2, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(v2, ".zgroup"), []byte(`{"zarr_format": 2}`), 0o644); err != nil {
		t.Fatal(err)
	}
	// A link to a store outside the folder is not followed.
	outside, err := filepath.Abs(graphStore)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "linked")); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, dir)
	s.exitsClean(t)
	base := s.base
	resp, err := http.Get(base + "/api/v1/stores")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var cat struct {
		Stores []struct {
			Name    string `json:"name"`
			Status  string `json:"status"`
			Problem *struct {
				Detail string `json:"detail"`
			} `json:"problem"`
		} `json:"stores"`
	}
	if err := json.Unmarshal(b, &cat); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	got := map[string]string{}
	for _, s := range cat.Stores {
		got[s.Name] = s.Status
		if s.Problem != nil {
			got[s.Name] += ": " + s.Problem.Detail
		}
	}
	for name, want := range map[string]string{
		"scene.cells": "ok", "scene.axons": "ok", "scene.skeletons": "ok", "scene.meshes": "ok",
		"legacy.old": `error: store "legacy.old": Zarr v2 store; ZVF needs Zarr v3`,
	} {
		if got[name] != want {
			t.Errorf("%s: %q, want %q", name, got[name], want)
		}
	}
	if len(got) != 5 {
		t.Errorf("catalog: %v", got)
	}
	resp, err = http.Get(base + "/api/v1/stores/scene.cells/bbox?min=0,0,0&max=1000,1000,600&limit=1")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"count":1`) {
		t.Errorf("bbox on a found store: %d %.200s", resp.StatusCode, b)
	}
}
