package demo

import (
	"context"
	"strings"

	"github.com/zvfserve/zvfserve/zvf/storage"
)

// Sub returns a read view of st rooted at prefix (a StoreInfo.Prefix), so
// each demo store can be opened on its own (zvf.Open(ctx, demo.Sub(w,
// info.Prefix), ...)). The stores share one backend: Close on a view does
// nothing, the caller closes st once. (gocloud's blob.PrefixedBucket cannot
// serve here: it closes the bucket it wraps.)
func Sub(st storage.Store, prefix string) storage.Store {
	prefix = strings.Trim(prefix, "/")
	if prefix != "" {
		prefix += "/"
	}
	return &sub{st: st, prefix: prefix}
}

type sub struct {
	st     storage.Store
	prefix string
}

func (s *sub) Get(ctx context.Context, key string) ([]byte, error) {
	return s.st.Get(ctx, s.prefix+key)
}

func (s *sub) GetRange(ctx context.Context, key string, off, length int64) ([]byte, error) {
	return s.st.GetRange(ctx, s.prefix+key, off, length)
}

func (s *sub) List(ctx context.Context, prefix string) (storage.Listing, error) {
	l, err := s.st.List(ctx, s.prefix+prefix)
	if err != nil {
		return l, err
	}
	for i, k := range l.Keys {
		l.Keys[i] = strings.TrimPrefix(k, s.prefix)
	}
	for i, p := range l.Prefixes {
		l.Prefixes[i] = strings.TrimPrefix(p, s.prefix)
	}
	return l, nil
}

func (s *sub) Stat(ctx context.Context, key string) (storage.Attrs, error) {
	return s.st.Stat(ctx, s.prefix+key)
}

// Close is a no-op: the view does not own the backend.
func (s *sub) Close() error { return nil }
