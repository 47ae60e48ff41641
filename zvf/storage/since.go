package storage

import (
	"context"
	"errors"
	"time"
)

// Since returns a view of st that refuses objects written at or after t
// (their Attrs.Modified): such a read fails with a *ChangedError, and so
// does a Stat, and so does a read of a missing key whose absence st dates
// at or after t (an AbsenceDater: a local folder whose entries changed
// since, so the key may have been deleted since). A reader that takes t from st.Now() when it starts reading a
// store version therefore never mixes bytes of a later version into it,
// however long it keeps serving: the first newer object it meets is an
// error, not data — also when the newer object is refused for its size.
// Listings pass through (the keys of a version are read once, when it
// opens). Objects without a modification time pass.
//
// Closing the view does not close st.
func Since(st Store, t time.Time) Store { return &since{st: st, t: t} }

type since struct {
	st Store
	t  time.Time
}

func (s *since) check(key, op string, a Attrs) error {
	if !a.Modified.IsZero() && !a.Modified.Before(s.t) {
		return &Error{Op: op, Key: key, Err: &ChangedError{Modified: a.Modified}}
	}
	return nil
}

// absent turns err, a missing key, into a change when st dates the
// absence at or after t.
func (s *since) absent(ctx context.Context, key, op string, err error) error {
	at, derr := Absent(ctx, s.st, key)
	if derr != nil || at.IsZero() || at.Before(s.t) {
		return err
	}
	return &Error{Op: op, Key: key, Err: &ChangedError{Modified: at}}
}

func (s *since) Get(ctx context.Context, key string, o ReadOptions) (Object, error) {
	obj, err := s.st.Get(ctx, key, o)
	return s.got(ctx, key, obj, err)
}

// Start implements Starter: the read starts in st, and is checked as Get
// checks it when it is collected.
func (s *since) Start(ctx context.Context, key string, o ReadOptions) func() (Object, error) {
	w := Start(ctx, s.st, key, o)
	return func() (Object, error) {
		obj, err := w()
		return s.got(ctx, key, obj, err)
	}
}

// StartAll implements BatchStarter: each read is checked as Get checks
// it when it is collected.
func (s *since) StartAll(ctx context.Context, rs []Read) []func() (Object, error) {
	waits := StartAll(ctx, s.st, rs)
	for i, w := range waits {
		key := rs[i].Key
		waits[i] = func() (Object, error) {
			obj, err := w()
			return s.got(ctx, key, obj, err)
		}
	}
	return waits
}

// got is what Get answers for st's answer obj, err.
func (s *since) got(ctx context.Context, key string, obj Object, err error) (Object, error) {
	if errors.Is(err, ErrNotFound) {
		return obj, s.absent(ctx, key, "get", err)
	}
	if errors.Is(err, ErrTooLarge) {
		// Refused for its size before its time was looked at: an object
		// rewritten after t can be larger than the version's metadata
		// allows, and that is a change, not a corrupt object.
		if a, serr := s.st.Stat(ctx, key); serr == nil {
			if cerr := s.check(key, "get", a); cerr != nil {
				return Object{}, cerr
			}
		}
	}
	if err != nil {
		return obj, err
	}
	if err := s.check(key, "get", obj.Attrs); err != nil {
		return Object{}, err
	}
	return obj, nil
}

func (s *since) Stat(ctx context.Context, key string) (Attrs, error) {
	a, err := s.st.Stat(ctx, key)
	if errors.Is(err, ErrNotFound) {
		return a, s.absent(ctx, key, "stat", err)
	}
	if err != nil {
		return a, err
	}
	if err := s.check(key, "stat", a); err != nil {
		return Attrs{}, err
	}
	return a, nil
}

func (s *since) List(ctx context.Context, prefix string) (Listing, error) {
	return s.st.List(ctx, prefix)
}

func (s *since) FoldersHolding(ctx context.Context, prefix, name string) ([]string, error) {
	return FoldersHolding(ctx, s.st, prefix, name)
}

func (s *since) Walk(ctx context.Context, prefix string, fn func(string, Attrs) error) error {
	return s.st.Walk(ctx, prefix, fn)
}

func (s *since) Now() time.Time { return s.st.Now() }

// Absent implements AbsenceDater.
func (s *since) Absent(ctx context.Context, key string) (time.Time, error) {
	return Absent(ctx, s.st, key)
}
func (s *since) Close() error { return nil }
