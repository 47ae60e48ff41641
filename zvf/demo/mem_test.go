package demo

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/zvfserve/zvfserve/zvf/storage"
)

// mem is a minimal in-memory storage.Writer for the demo's tests.
type mem struct {
	mu sync.Mutex
	m  map[string][]byte
}

func newMem() *mem { return &mem{m: map[string][]byte{}} }

func (s *mem) Put(_ context.Context, key string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[key] = slices.Clone(data)
	return nil
}

func (s *mem) Delete(_ context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
	return nil
}

func (s *mem) Get(_ context.Context, key string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.m[key]
	if !ok {
		return nil, &storage.Error{Op: "get", Key: key, Err: storage.ErrNotFound}
	}
	return slices.Clone(b), nil
}

func (s *mem) GetRange(ctx context.Context, key string, off, length int64) ([]byte, error) {
	b, err := s.Get(ctx, key)
	if err != nil || off >= int64(len(b)) {
		return nil, err
	}
	b = b[off:]
	if length >= 0 && length < int64(len(b)) {
		b = b[:length]
	}
	return b, nil
}

func (s *mem) List(_ context.Context, prefix string) (storage.Listing, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var l storage.Listing
	seen := map[string]bool{}
	for k := range s.m {
		rest, ok := strings.CutPrefix(k, prefix)
		if !ok {
			continue
		}
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			if p := prefix + rest[:i+1]; !seen[p] {
				seen[p] = true
				l.Prefixes = append(l.Prefixes, p)
			}
		} else {
			l.Keys = append(l.Keys, k)
		}
	}
	slices.Sort(l.Keys)
	slices.Sort(l.Prefixes)
	return l, nil
}

func (s *mem) Stat(ctx context.Context, key string) (storage.Attrs, error) {
	b, err := s.Get(ctx, key)
	return storage.Attrs{Size: int64(len(b))}, err
}

func (s *mem) Close() error { return nil }
