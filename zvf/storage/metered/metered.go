// Package metered wraps a storage.Store so that every read is reported to
// an Observer (bytes and latency), for metrics. It keeps the wrapped
// store's ability to re-resolve its root (storage.Pinner), its folder
// listings (storage.FolderLister), its dating of an absence
// (storage.AbsenceDater) and its started reads (storage.Starter).
package metered

import (
	"context"
	"time"

	"github.com/zvfserve/zvfserve/zvf/storage"
)

// Observer receives one report per read, failed reads included.
type Observer interface {
	ObserveRead(bytes int, took time.Duration)
}

// Wrap returns st with its reads reported to o.
func Wrap(st storage.Store, o Observer) storage.Store { return &store{Store: st, o: o} }

type store struct {
	storage.Store
	o Observer
}

func (s *store) Get(ctx context.Context, key string, ro storage.ReadOptions) (storage.Object, error) {
	t := time.Now()
	obj, err := s.Store.Get(ctx, key, ro)
	s.o.ObserveRead(len(obj.Data), time.Since(t))
	return obj, err
}

// Start implements storage.Starter: the read is reported when it is
// collected, with the time from its start.
func (s *store) Start(ctx context.Context, key string, ro storage.ReadOptions) func() (storage.Object, error) {
	t := time.Now()
	w := storage.Start(ctx, s.Store, key, ro)
	return func() (storage.Object, error) {
		obj, err := w()
		s.o.ObserveRead(len(obj.Data), time.Since(t))
		return obj, err
	}
}

// StartAll implements storage.BatchStarter: each read is reported when
// it is collected, with the time from the start of all.
func (s *store) StartAll(ctx context.Context, rs []storage.Read) []func() (storage.Object, error) {
	t := time.Now()
	waits := storage.StartAll(ctx, s.Store, rs)
	for i, w := range waits {
		waits[i] = func() (storage.Object, error) {
			obj, err := w()
			s.o.ObserveRead(len(obj.Data), time.Since(t))
			return obj, err
		}
	}
	return waits
}

// FoldersHolding implements storage.FolderLister: a listing, not a read.
func (s *store) FoldersHolding(ctx context.Context, prefix, name string) ([]string, error) {
	return storage.FoldersHolding(ctx, s.Store, prefix, name)
}

// Absent implements storage.AbsenceDater.
func (s *store) Absent(ctx context.Context, key string) (time.Time, error) {
	return storage.Absent(ctx, s.Store, key)
}

// Pin implements storage.Pinner: the view it returns is metered too.
func (s *store) Pin(ctx context.Context) (storage.Store, string, error) {
	v, id, err := storage.Pin(ctx, s.Store)
	if err != nil {
		return nil, "", err
	}
	return &store{Store: v, o: s.o}, id, nil
}
