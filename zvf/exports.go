package zvf

import (
	"context"
	"strings"
)

// CacheKey is a key in the store's own cache namespace (its name and
// cache generation come first): what a caller derives from this store's
// data and caches under it is dropped with the store's version, as the
// reader's own entries are.
func (s *Store) CacheKey(parts ...string) string {
	return s.cachePrefix + "ext\x00" + strings.Join(parts, "\x00")
}

// ChunkObjects returns, for every row of chunk key, the object whose
// manifest names the row's fragment first (-1 when none does): the same
// owners BBox reports as Batch.ObjectIDs. It is nil when the level has no
// object index. The slice is the caller's.
func (l *Level) ChunkObjects(ctx context.Context, key Key) ([]int64, error) {
	if len(key) != l.keyArity || !l.hasKey(key) {
		return nil, l.s.errf(ErrNotFound, l.n, "vertices", key.String(), "no chunk %s at level %d", key, l.n)
	}
	if l.objects == nil {
		return nil, nil
	}
	inv, err := l.inverseMap(ctx)
	if err != nil {
		return nil, err
	}
	cv, err := l.vertices(ctx, key)
	if err != nil {
		return nil, err
	}
	m := &chunkMatch{key: key, cv: cv, all: true}
	_, ids := l.rowOwners(nil, nil, m, inv, 0, cv.rows)
	return ids, nil
}

// ObjectAttributes returns object id's row of every object attribute (an
// attribute whose present_mask marks the object absent is left out)
// without reading its vertices. An id the object index does not hold
// (past its rows, or not in object_ids for vlen_manifests_v2) is
// ErrNotFound.
func (l *Level) ObjectAttributes(ctx context.Context, id int64) ([]Column, error) {
	if _, err := l.objectRow(ctx, id); err != nil {
		return nil, err
	}
	return l.objectAttributes(ctx, id)
}
