package main

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/cmd/internal/cli"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/faultstore"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// TestServeFolderAfterAListingBlip: the listing that tells a store from a
// folder of stores failing once (an object store's 503, a dropped
// connection) is asked again. Before, serve took the folder for one store
// at once and without a word; the folder has no zarr.json, so it was served
// as "not a store" until a restart, even once the backend answered.
func TestServeFolderAfterAListingBlip(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, name := range []string{"a.zarrvectors", "b.zarrvectors"} {
		if err := os.Rename(zvftest.CopyTree(t, graphStore), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	var fs *faultstore.Store
	wrap := func(st storage.Store) storage.Store {
		fs = faultstore.New(st, nil)
		fs.Add(&faultstore.Rule{Op: "list", Nth: 1, Fault: faultstore.Fault{Err: storage.ErrUnavailable}})
		return fs
	}
	s := startServeWith(t, serveHooks{wrapArg: wrap}, "--start-wait", "5s", dir)
	s.exitsClean(t)
	code, body, _ := httpGet(t, s.base+"/api/v1/stores")
	if code != http.StatusOK || !strings.Contains(body, `"a"`) || !strings.Contains(body, `"b"`) {
		t.Fatalf("/api/v1/stores after one failed listing: %d %.400s\n%s", code, body, s.errs.String())
	}
	if fs.Faults.Load() != 1 {
		t.Errorf("%d faults injected, want the one", fs.Faults.Load())
	}
	if !strings.Contains(s.errs.String(), "listing again") {
		t.Errorf("the log does not say the listing was asked again: %s", s.errs.String())
	}
}

// TestServeFolderListingThatKeepsFailing: a backend that fails every
// listing is asked listingTries times, then the argument is served as one
// store with a warning saying why (before, this was silent).
func TestServeFolderListingThatKeepsFailing(t *testing.T) {
	t.Parallel()
	var fs *faultstore.Store
	wrap := func(st storage.Store) storage.Store {
		fs = faultstore.New(st, nil)
		fs.Add(&faultstore.Rule{Op: "list", Key: "", Fault: faultstore.Fault{Err: storage.ErrUnavailable, Times: listingTries}})
		return fs
	}
	s := startServeWith(t, serveHooks{wrapArg: wrap}, "--start-wait", "5s", "g="+graphStore)
	s.exitsClean(t)
	if got := fs.Faults.Load(); got != listingTries {
		t.Errorf("%d listings failed, want %d", got, listingTries)
	}
	if !strings.Contains(s.errs.String(), "the backend failed the listing that tells a store from a folder of stores") {
		t.Errorf("no warning: %s", s.errs.String())
	}
	if code, body, _ := httpGet(t, s.base+"/api/v1/stores/g"); code != http.StatusOK {
		t.Errorf("the store itself: %d %.300s", code, body)
	}
}

// TestServeFolderWhoseOnlyStoreCannotBeListed: a folder whose one store's
// folder cannot be listed (an object store's 503 on that prefix, a
// folder this process may not read) has no store serve can find, but
// serve refused it as a usage mistake saying the folder "holds no ZVF
// store: no zarr.json in it nor in the folders below it" — untrue, and
// nothing to correct on the command line. Now it fails (exit 1) naming
// the folder it could not list and why, not as a usage error.
func TestServeFolderWhoseOnlyStoreCannotBeListed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.Rename(zvftest.CopyTree(t, graphStore), filepath.Join(dir, "a.zarrvectors")); err != nil {
		t.Fatal(err)
	}
	wrap := func(st storage.Store) storage.Store {
		fs := faultstore.New(st, nil)
		fs.Add(&faultstore.Rule{Op: "list", Key: "a.zarrvectors", Fault: faultstore.Fault{Err: storage.ErrUnavailable}})
		return fs
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, errs := &syncBuffer{}, &syncBuffer{}
	err := serve(ctx, []string{"--addr", "127.0.0.1:0", "--start-wait", "5s", dir}, out, errs, serveHooks{wrapArg: wrap})
	if err == nil || errors.Is(err, cli.ErrUsage) || strings.Contains(err.Error(), "holds no ZVF store") ||
		!strings.Contains(err.Error(), dir+": no store found: folder a.zarrvectors could not be listed") || !strings.Contains(err.Error(), "could not be listed") || !strings.Contains(err.Error(), "unavailable") {
		t.Fatalf("serve of a folder whose store cannot be listed: %v (usage: %v); want an error, not a usage one, naming the folder it could not list and why\n%s",
			err, errors.Is(err, cli.ErrUsage), errs.String())
	}
}
