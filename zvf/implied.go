package zvf

import (
	"context"
	"errors"

	"golang.org/x/sync/errgroup"

	"github.com/zvfserve/zvfserve/zvf/storage"
)

// A store that may change while it is served (Options.watched) records at
// open what its version has: the chunks of every family (layout07.open,
// the 0.9 grids' cells) and the arrays a level reads on first use
// (recordStored). A read that then finds one of them missing fails with a
// *missingError (Store.implied) — a change, or a store broken there, which
// Handle.Changed tells apart — and never reads as the array's absence.

// recordStored notes which of the arrays the level reads on first use were
// there when it opened, with a stat of each one's zarr.json (in parallel).
func (l *Level) recordStored(ctx context.Context) error {
	if !l.s.watched {
		return nil
	}
	var arrays []string
	if o := l.objects; o != nil {
		switch {
		case o.legacy:
			arrays = append(arrays, "object_index/data", "object_index/offsets")
		default:
			arrays = append(arrays, "object_index/manifests")
		}
		if o.byID {
			arrays = append(arrays, "object_index/object_ids")
		}
	}
	for _, a := range l.oattrs {
		p := "object_attributes/" + a.Name
		if a.plain {
			arrays = append(arrays, p)
		} else {
			arrays = append(arrays, p+"/data", p+"/present_mask")
		}
	}
	if l.s.format == format09 {
		arrays = append(arrays, "groups")
	} else {
		arrays = append(arrays, "groups/data", "groups/offsets")
	}
	found := make([]bool, len(arrays))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i, p := range arrays {
		g.Go(func() error {
			_, err := l.s.st.Stat(gctx, join(join(l.path, p), "zarr.json"))
			switch {
			case err == nil:
				found[i] = true
			case !errors.Is(err, storage.ErrNotFound):
				return l.s.wrap(kindOf(err), l.n, p, "", err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	l.stored = make(map[string]bool, len(arrays))
	for i, p := range arrays {
		if found[i] {
			l.stored[p] = true
		}
	}
	return nil
}

// lazyErr wraps err, met opening array (below the level) on first use: a
// missing array the level had when it opened is a *missingError.
func (l *Level) lazyErr(err error, array string) error {
	if l.stored[array] {
		return l.s.implied(err, l.n, array, "")
	}
	return l.s.wrap(kindOf(err), l.n, array, "", err)
}
