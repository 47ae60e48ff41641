package storage

import (
	"context"
	"errors"

	"golang.org/x/sync/errgroup"
)

// FolderLister is a Store that finds, in one pass, the folders directly
// under a prefix that hold a given object: an object store with one flat
// listing (no request per folder), a local folder with a stat beside each
// directory entry. Decorators that wrap a Store forward it.
type FolderLister interface {
	FoldersHolding(ctx context.Context, prefix, name string) ([]string, error)
}

// FoldersHolding returns the folders directly under prefix ("" or ending
// in "/") that hold an object called name, as full prefixes ending in
// "/", sorted. A folder that holds nothing (an empty folder a crashed
// writer or a delete left, an object store's "folder/" marker) or only
// other objects is left out; one whose check fails for any reason but the
// object's absence (permissions, a link leading out) is kept, so that
// reading it reports why. Stores that are not FolderListers are asked
// with List and a Stat per folder, a few at a time.
func FoldersHolding(ctx context.Context, st Store, prefix, name string) ([]string, error) {
	if fl, ok := st.(FolderLister); ok {
		return fl.FoldersHolding(ctx, prefix, name)
	}
	l, err := st.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	keep := make([]bool, len(l.Prefixes))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i, p := range l.Prefixes {
		g.Go(func() error {
			_, err := st.Stat(gctx, p+name)
			switch {
			case errors.Is(err, ErrNotFound):
			case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
				return err
			default:
				keep[i] = true
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(l.Prefixes))
	for i, p := range l.Prefixes {
		if keep[i] {
			out = append(out, p)
		}
	}
	return out, nil
}
