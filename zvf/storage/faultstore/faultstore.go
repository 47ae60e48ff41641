// Package faultstore wraps a storage.Store and injects faults — latency,
// errors, hangs until the context ends, short reads — by rule, so tests can
// prove how the layers above behave. It also counts calls and reads in
// flight, so a test can assert that a cancelled request stopped reading.
// Proxy does the same one level down, to the HTTP exchanges of an
// object store's client (delays, stalls, resets, cut bodies).
package faultstore

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"github.com/zvfserve/zvfserve/zvf/storage"
)

// Fault is what a matching rule does to a call.
type Fault struct {
	Delay     time.Duration // wait this long first (honouring ctx)
	Hang      bool          // block until ctx is done
	Err       error         // fail with this (wrapped in *storage.Error)
	ShortRead int           // return only this many bytes of the object (>0)
	Times     int           // apply to this many matching calls, then stop (0: always)
	// Hide leaves out of a listing the keys and prefixes that contain it:
	// an object store's listing that has not caught up with a write
	// (eventual consistency), while reads of the object succeed.
	Hide string
}

// Rule applies a Fault to calls whose op ("get", "range", "list", "stat", "walk")
// and key match. Empty Op matches every op; Key matches by substring. Nth
// applies it to the Nth matching call only (1-based; 0: every one).
type Rule struct {
	Op, Key string
	Nth     int
	Fault   Fault
	count   counter
}

// Store is the fault-injecting wrapper.
type Store struct {
	inner storage.Store
	sleep func(context.Context, time.Duration) error

	rules rules[Rule]

	Calls    atomic.Int64 // every call
	InFlight atomic.Int64 // calls not yet returned
	Faults   atomic.Int64 // calls a rule changed
	Canceled atomic.Int64 // calls that returned because their ctx ended
}

// New wraps inner. sleep may be nil (a real timer that honours ctx); tests
// inject their own to avoid waiting.
func New(inner storage.Store, sleep func(context.Context, time.Duration) error) *Store {
	if sleep == nil {
		sleep = func(ctx context.Context, d time.Duration) error {
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
	return &Store{inner: inner, sleep: sleep}
}

// Add installs a rule (rules are tried in order; the first match applies).
func (s *Store) Add(r *Rule) { s.rules.add(r) }

// Reset removes every rule.
func (s *Store) Reset() { s.rules.reset() }

func (s *Store) match(op, key string) *Fault {
	r := s.rules.first(func(r *Rule) bool {
		return (r.Op == "" || r.Op == op) && strings.Contains(key, r.Key) && r.count.fires(r.Nth, r.Fault.Times)
	})
	if r == nil {
		return nil
	}
	f := r.Fault
	return &f
}

// before runs a call's fault; it returns a non-nil error to fail the call,
// and the fault so the caller can shorten a read.
func (s *Store) before(ctx context.Context, op, key string) (*Fault, error) {
	s.Calls.Add(1)
	f := s.match(op, key)
	if f == nil {
		return nil, nil
	}
	s.Faults.Add(1)
	if f.Delay > 0 {
		if err := s.sleep(ctx, f.Delay); err != nil {
			s.Canceled.Add(1)
			return f, &storage.Error{Op: op, Key: key, Err: err}
		}
	}
	if f.Hang {
		<-ctx.Done()
		s.Canceled.Add(1)
		return f, &storage.Error{Op: op, Key: key, Err: ctx.Err()}
	}
	if f.Err != nil {
		return f, &storage.Error{Op: op, Key: key, Err: f.Err}
	}
	return f, nil
}

func short(f *Fault, b []byte) []byte {
	if f != nil && f.ShortRead > 0 && f.ShortRead < len(b) {
		return b[:f.ShortRead]
	}
	return b
}

// Get implements storage.Store. Whole-object reads match rules with Op
// "get", reads of a part with Op "range".
func (s *Store) Get(ctx context.Context, key string, o storage.ReadOptions) (storage.Object, error) {
	s.InFlight.Add(1)
	defer s.InFlight.Add(-1)
	op := "get"
	if o.Off != 0 || o.Len >= 0 {
		op = "range"
	}
	f, err := s.before(ctx, op, key)
	if err != nil {
		return storage.Object{}, err
	}
	obj, err := s.inner.Get(ctx, key, o)
	obj.Data = short(f, obj.Data)
	return obj, err
}

// Now implements storage.Store.
func (s *Store) Now() time.Time { return s.inner.Now() }

// Absent implements storage.AbsenceDater for the store it wraps.
func (s *Store) Absent(ctx context.Context, key string) (time.Time, error) {
	return storage.Absent(ctx, s.inner, key)
}

// List implements storage.Store.
func (s *Store) List(ctx context.Context, prefix string) (storage.Listing, error) {
	s.InFlight.Add(1)
	defer s.InFlight.Add(-1)
	f, err := s.before(ctx, "list", prefix)
	if err != nil {
		return storage.Listing{}, err
	}
	l, err := s.inner.List(ctx, prefix)
	if err != nil || f == nil || f.Hide == "" {
		return l, err
	}
	shown := func(k string) bool { return !strings.Contains(k, f.Hide) }
	return storage.Listing{Keys: keep(l.Keys, shown), Prefixes: keep(l.Prefixes, shown)}, nil
}

// keep is the elements of ss that ok keeps, in a new slice.
func keep(ss []string, ok func(string) bool) []string {
	out := make([]string, 0, len(ss))
	for _, s := range ss {
		if ok(s) {
			out = append(out, s)
		}
	}
	return out
}

// Stat implements storage.Store.
func (s *Store) Stat(ctx context.Context, key string) (storage.Attrs, error) {
	s.InFlight.Add(1)
	defer s.InFlight.Add(-1)
	if _, err := s.before(ctx, "stat", key); err != nil {
		return storage.Attrs{}, err
	}
	return s.inner.Stat(ctx, key)
}

// Close implements storage.Store.
func (s *Store) Close() error { return s.inner.Close() }

// ErrInjected is a convenient transient failure for rules.
var ErrInjected = errors.New("injected backend failure")

// Walk implements storage.Store.
func (s *Store) Walk(ctx context.Context, prefix string, fn func(string, storage.Attrs) error) error {
	s.InFlight.Add(1)
	defer s.InFlight.Add(-1)
	if _, err := s.before(ctx, "walk", prefix); err != nil {
		return err
	}
	return s.inner.Walk(ctx, prefix, fn)
}
