// Package retry wraps a storage.Store so that transient failures
// (storage.ErrUnavailable) are retried with bounded exponential backoff.
// Not-found, cancellation and everything else fail at once.
package retry

import (
	"context"
	"errors"
	"time"

	"github.com/zvfserve/zvfserve/zvf/storage"
)

// Options bound the retries.
type Options struct {
	Attempts int           // total tries (default 3)
	Base     time.Duration // first backoff (default 50 ms), doubled each time
	Max      time.Duration // backoff cap (default 1 s)
	// Sleep waits (honouring ctx); nil uses a timer. Tests inject one.
	Sleep func(context.Context, time.Duration) error
}

// Store retries transient failures of an inner store. Walk passes through
// unretried: its callback may already have seen part of the listing, and
// its caller (store revalidation) tries again on its next round anyway.
type Store struct {
	storage.Store
	o Options
}

// Wrap returns st with retries.
func Wrap(st storage.Store, o Options) *Store {
	if o.Attempts <= 0 {
		o.Attempts = 3
	}
	if o.Base <= 0 {
		o.Base = 50 * time.Millisecond
	}
	if o.Max <= 0 {
		o.Max = time.Second
	}
	if o.Sleep == nil {
		o.Sleep = func(ctx context.Context, d time.Duration) error {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return &Store{Store: st, o: o}
}

func do[T any](ctx context.Context, o *Options, f func() (T, error)) (T, error) {
	d := o.Base
	var v T
	var err error
	for i := 0; i < o.Attempts; i++ {
		v, err = f()
		if err == nil || !errors.Is(err, storage.ErrUnavailable) || ctx.Err() != nil {
			return v, err
		}
		if i == o.Attempts-1 {
			break
		}
		if serr := o.Sleep(ctx, d); serr != nil {
			return v, err
		}
		d = min(2*d, o.Max)
	}
	return v, err
}

// Get implements storage.Store.
func (s *Store) Get(ctx context.Context, key string, o storage.ReadOptions) (storage.Object, error) {
	return do(ctx, &s.o, func() (storage.Object, error) { return s.Store.Get(ctx, key, o) })
}

// List implements storage.Store.
func (s *Store) List(ctx context.Context, prefix string) (storage.Listing, error) {
	return do(ctx, &s.o, func() (storage.Listing, error) { return s.Store.List(ctx, prefix) })
}

// Stat implements storage.Store.
func (s *Store) Stat(ctx context.Context, key string) (storage.Attrs, error) {
	return do(ctx, &s.o, func() (storage.Attrs, error) { return s.Store.Stat(ctx, key) })
}
