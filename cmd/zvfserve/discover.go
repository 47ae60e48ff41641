package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/zvfserve/zvfserve/cmd/internal/cli"
	"github.com/zvfserve/zvfserve/zvf/storage"
)

// Bounds of the search for stores below a folder argument, so that
// pointing serve at a large tree (or a bucket) cannot turn startup into an
// unbounded crawl.
const (
	discoverDepth   = 8      // folder levels below the argument
	discoverFolders = 10_000 // folders listed in all
)

// foundStore is one store below a folder argument.
type foundStore struct {
	name   string // valid in URLs (see storeNameFor)
	prefix string // its folder, relative to the argument, ending in "/"
}

// discoverStores finds the stores below st's root when the root is not a
// store itself: every folder, up to discoverDepth levels down, that holds
// Zarr metadata (zarr.json, or a Zarr v2 .zgroup/.zarray/.zattrs, which is
// then served as its "needs Zarr v3" problem); the search does not descend
// into a store. Hidden folders are skipped, folders that cannot be listed
// are skipped with a warning. It returns nil when the root is itself a
// Zarr node or nothing is found below it: then the argument is one store,
// as before. A link back to a folder above it is not followed (a loop);
// other links to folders are. Names follow storeNameFor, after namePrefix; when two paths
// give the same name, the later path (in byte order) gets "-2", "-3", …
// and a warning.
func discoverStores(ctx context.Context, st storage.Store, namePrefix string, log *slog.Logger) ([]foundStore, error) {
	found, err := discoverStoresWithin(ctx, st, namePrefix, log, 0)
	if errors.Is(err, errNoStoreBelow) || errors.Is(err, errNoStoreNear) {
		return nil, nil
	}
	return found, err
}

// errNoStoreBelow is discoverStoresWithin's answer for a root that was
// listed, is no Zarr node, and has none below it (the whole search done):
// the wrong folder, or one no store has been written into yet.
var errNoStoreBelow = errors.New("no Zarr metadata in the folder nor below it")

// errNoStoreNear is discoverStoresWithin's answer for a root with no
// Zarr metadata in it nor in the folders the search reached, when folders
// lay deeper than it goes (discoverDepth): stores there are not found.
var errNoStoreNear = errors.New("no Zarr metadata within the folder levels searched")

// noStoreNearMessage says that target holds no store as deep as the
// search goes, and what to do.
func noStoreNearMessage(target string) string {
	return fmt.Sprintf("%s holds no ZVF store within %d folder levels of it (the search goes no deeper); name the folder nearer the stores", shownArg(target), discoverDepth)
}

// noStoreMessage says that target holds no store, and what one is.
func noStoreMessage(target string) string {
	return shownArg(target) + " holds no ZVF store: no zarr.json in it nor in the folders below it; a STORE is the folder that holds a store's zarr.json, or a folder of stores"
}

// holdsNoMetadata reports whether st's root surely holds no Zarr
// metadata: a backend whose listing leaves keys out (an HTTP server
// without an index) still answers a Stat of them.
func holdsNoMetadata(ctx context.Context, st storage.Store) bool {
	for _, meta := range []string{"zarr.json", ".zgroup", ".zarray", ".zattrs"} {
		if _, err := st.Stat(ctx, meta); !errors.Is(err, storage.ErrNotFound) {
			return false
		}
	}
	return true
}

// discoverStoresWithin is discoverStores whose first look, the one that
// tells a store from a folder of stores, ends after decide (0: no bound):
// a backend that does not answer it by then is taken for one store, whose
// open (with its own deadline, retried by the checks) reports it. serve
// must not wait on such a backend before it listens. A root that was
// listed and holds no Zarr metadata, in it or below it, is errNoStoreBelow.
func discoverStoresWithin(ctx context.Context, st storage.Store, namePrefix string, log *slog.Logger, decide time.Duration) ([]foundStore, error) {
	dctx := ctx
	if decide > 0 {
		var cancel context.CancelFunc
		dctx, cancel = context.WithTimeout(ctx, decide)
		defer cancel()
	}
	var notice *time.Timer
	if decide > 0 {
		// Say what start-up waits on, once it is more than a blink: a
		// backend that does not answer at all is otherwise silent until
		// the wait ends.
		notice = time.AfterFunc(min(waitNotice, decide/4), func() {
			log.Info("waiting for the backend to answer the listing that tells a store from a folder of stores",
				"up_to", decide, "set_by", "--start-wait")
		})
	}
	root, err := firstListing(dctx, st, log)
	if notice != nil {
		notice.Stop()
	}
	undecided := func() bool {
		if dctx.Err() == nil || ctx.Err() != nil {
			return false
		}
		log.Warn("no answer from the backend in time to tell a store from a folder of stores: serving it as one store (restart once it answers, if it is a folder of stores)",
			"waited", decide)
		return true
	}
	if err != nil {
		if !undecided() && ctx.Err() == nil {
			log.Warn("the backend failed the listing that tells a store from a folder of stores: serving it as one store (restart once it answers, if it is a folder of stores)",
				"err", err)
		}
		return nil, nil // opening the store reports it
	}
	if isZarrNode(dctx, st, "", root) || undecided() {
		return nil, nil
	}
	var found []string
	listed, deepWarned := 0, false
	var unlisted error // the first folder that could not be listed
	ids, _ := st.(folderIDer)
	above := map[string]bool{} // the folders on the path to the one visited
	var visit func(prefix string, depth int) error
	visit = func(prefix string, depth int) error {
		if ids != nil {
			// A link back to a folder above (x -> ., up -> ..) would find
			// the stores there again under new names, down to the depth
			// bound; links elsewhere are followed, as before.
			id, err := ids.FolderID(ctx, prefix)
			switch {
			case ctx.Err() != nil:
				return ctx.Err()
			case err == nil && above[id]:
				log.Warn("skipping a link back to a folder above it (a loop)", "folder", prefix)
				return nil
			case err == nil:
				above[id] = true
				defer delete(above, id)
			}
		}
		l := root
		if prefix != "" {
			if listed >= discoverFolders {
				return errStopSearch
			}
			listed++
			var err error
			if l, err = st.List(ctx, prefix); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				log.Warn("skipping a folder that cannot be listed", "folder", prefix, "err", err)
				if unlisted == nil {
					unlisted = fmt.Errorf("folder %s could not be listed: %w", strings.TrimSuffix(prefix, "/"), err)
				}
				return nil
			}
			if isZarrNode(ctx, st, prefix, l) {
				found = append(found, prefix)
				return nil
			}
		}
		for _, p := range l.Prefixes {
			base := strings.TrimSuffix(strings.TrimPrefix(p, prefix), "/")
			if strings.HasPrefix(base, ".") {
				continue // hidden: .git, partial writes
			}
			if depth == discoverDepth {
				if !deepWarned {
					log.Warn("not looking for stores deeper", "folder", prefix, "levels", discoverDepth)
					deepWarned = true
				}
				return nil
			}
			if err := visit(p, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	stopped := false
	switch err := visit("", 0); {
	case errors.Is(err, errStopSearch):
		stopped = true
		log.Warn("stopped looking for stores", "folders_listed", discoverFolders, "stores_found", len(found))
	case err != nil:
		return nil, err
	}
	if len(found) == 0 {
		if !stopped && unlisted != nil {
			// Not known to hold no store: the store may be the folder
			// that could not be listed.
			return nil, fmt.Errorf("no store found: %w", unlisted)
		}
		if !stopped && holdsNoMetadata(ctx, st) {
			if deepWarned {
				return nil, errNoStoreNear
			}
			return nil, errNoStoreBelow
		}
		return nil, nil
	}
	slices.Sort(found)
	out := make([]foundStore, 0, len(found))
	taken := map[string]string{}
	for _, p := range found {
		name := storeNameFor(p)
		base := name
		for i := 2; taken[name] != ""; i++ {
			name = fmt.Sprintf("%s-%d", base, i)
		}
		if name != base {
			log.Warn("two stores map to the same name", "name", base, "first", taken[base], "renamed", p, "as", name)
		}
		taken[name] = p
		out = append(out, foundStore{name: namePrefix + name, prefix: p})
	}
	log.Info("serving the stores found in a folder", "stores", len(out))
	return out, nil
}

// waitNotice is how long the first listing may take before serve logs
// that it waits on it.
const waitNotice = 500 * time.Millisecond

// listingTries bounds how often firstListing asks a backend that fails
// it as unavailable: 100, 200, 400 and 800 ms apart, 1.5 s in all.
const listingTries = 5

// firstListing is st's root listing, asked again (with back-off, within
// ctx) while the backend fails it as unavailable: one 503 or dropped
// connection at start must not turn a folder of stores into one broken
// store until a restart. Other errors (denied, not found) are final.
func firstListing(ctx context.Context, st storage.Store, log *slog.Logger) (storage.Listing, error) {
	wait := 100 * time.Millisecond
	for try := 1; ; try++ {
		l, err := st.List(ctx, "")
		if err == nil || try == listingTries || !errors.Is(err, storage.ErrUnavailable) || ctx.Err() != nil {
			return l, err
		}
		log.Warn("the backend failed the first listing; listing again", "err", err, "in", wait)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return l, err
		}
		wait *= 2
	}
}

// namePrefix is "NAME." for a folder argument given as NAME=PATH: the
// stores found below it are then served as NAME.a, NAME.b, ….
func namePrefix(arg string) string {
	if name, target := storeArg(arg); target != arg {
		return name + "."
	}
	return ""
}

var errStopSearch = errors.New("too many folders")

// folderOfStores is the error for a command that takes one store (cmd)
// when arg, opened as st, is no store but a folder (or prefix) of them: it
// says so and lists them, and how to name one; pointed at a folder with
// no Zarr metadata in it or below it (the wrong folder), it says that. nil
// when st is a store itself (the command then says what is wrong with it).
func folderOfStores(ctx context.Context, st storage.Store, arg, cmd string) error {
	// A root that cannot be listed (a missing bucket, refused
	// credentials) is not known to be empty: the command's own error
	// says why.
	found, err := discoverStoresWithin(ctx, st, "", slog.New(slog.DiscardHandler), 0)
	_, target := storeArg(arg)
	switch {
	case errors.Is(err, errNoStoreBelow):
		return fmt.Errorf("%w: %s", cli.ErrUsage, noStoreMessage(target))
	case errors.Is(err, errNoStoreNear):
		return fmt.Errorf("%w: %s", cli.ErrUsage, noStoreNearMessage(target))
	}
	if err != nil || len(found) == 0 {
		return nil
	}
	const shown = 12
	var list []string
	for i, f := range found {
		if i == shown {
			list = append(list, fmt.Sprintf("and %d more", len(found)-shown))
			break
		}
		list = append(list, strings.TrimSuffix(f.prefix, "/"))
	}
	return fmt.Errorf("%w: %s is not a store but a folder of %d stores: %s; %s one of them (zvfserve %s %s) or serve them all (zvfserve serve %s)",
		cli.ErrUsage, target, len(found), strings.Join(list, ", "), cmd, cmd, below(target, found[0].prefix), target)
}

// below is the argument naming folder prefix below target (a path or a
// URL, whose query stays at the end).
func below(target, prefix string) string {
	base, query, hasQuery := strings.Cut(target, "?")
	out := strings.TrimRight(base, "/") + "/" + strings.TrimSuffix(prefix, "/")
	if hasQuery {
		out += "?" + query
	}
	return out
}

// storeAround is the store that the local folder dir is in or is: the
// outermost of it and its ancestors with Zarr metadata (a store's levels
// and arrays have their own), or "" when there is none. dir need not
// exist yet.
func storeAround(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	store := ""
	for d := abs; ; d = filepath.Dir(d) {
		for _, meta := range []string{"zarr.json", ".zgroup", ".zarray", ".zattrs"} {
			if fi, err := os.Stat(filepath.Join(d, meta)); err == nil && fi.Mode().IsRegular() {
				store = d
				break
			}
		}
		if filepath.Dir(d) == d {
			return store, nil
		}
	}
}

// folderIDer is a store whose folders one may reach by several paths (a
// local folder with links; localfs.Store): FolderID names a folder by
// what it is, the same through any link.
type folderIDer interface {
	FolderID(ctx context.Context, prefix string) (string, error)
}

// isZarrNode reports whether the folder at prefix (listed as l) holds Zarr
// metadata. Local listings hide dot files, so the v2 names are asked for.
func isZarrNode(ctx context.Context, st storage.Store, prefix string, l storage.Listing) bool {
	for _, k := range l.Keys {
		switch strings.TrimPrefix(k, prefix) {
		case "zarr.json", ".zgroup", ".zarray", ".zattrs":
			return true
		}
	}
	for _, k := range []string{".zgroup", ".zarray", ".zattrs"} {
		if _, err := st.Stat(ctx, prefix+k); err == nil {
			return true
		}
	}
	return false
}

// storeNameFor names the store at a relative folder path: the suffix
// .zarrvectors or .zarr comes off the last element, characters outside
// letters, digits, '.', '_' and '-' become '_', the elements are joined
// with '.', leading '.', '_' and '-' are dropped and the name is cut to
// 120 characters (room for a "-N" suffix). "a/b.zarrvectors" is "a.b".
func storeNameFor(prefix string) string {
	parts := strings.Split(strings.Trim(prefix, "/"), "/")
	last := len(parts) - 1
	parts[last] = strings.TrimSuffix(strings.TrimSuffix(parts[last], ".zarrvectors"), ".zarr")
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			return r
		}
		return '_'
	}, strings.Join(parts, "."))
	name = strings.TrimLeft(name, "._-")
	if len(name) > 120 {
		name = name[:120]
	}
	if name == "" {
		name = "store"
	}
	return name
}
