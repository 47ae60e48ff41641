package storage

import (
	"context"
	"strings"
	"time"
)

// Sub returns a view of st rooted at prefix ("a/b"): keys are joined to
// the prefix on the way in and stripped from listings on the way out.
// Closing the view does not close st.
func Sub(st Store, prefix string) Store {
	prefix = strings.Trim(prefix, "/")
	if prefix == "" {
		return st
	}
	return &sub{st: st, p: prefix + "/"}
}

type sub struct {
	st Store
	p  string
}

func (s *sub) Get(ctx context.Context, key string, o ReadOptions) (Object, error) {
	return s.st.Get(ctx, s.p+key, o)
}

// Start implements Starter.
func (s *sub) Start(ctx context.Context, key string, o ReadOptions) func() (Object, error) {
	return Start(ctx, s.st, s.p+key, o)
}

// StartAll implements BatchStarter.
func (s *sub) StartAll(ctx context.Context, rs []Read) []func() (Object, error) {
	in := make([]Read, len(rs))
	for i, r := range rs {
		in[i] = Read{Key: s.p + r.Key, Opt: r.Opt}
	}
	return StartAll(ctx, s.st, in)
}

func (s *sub) Stat(ctx context.Context, key string) (Attrs, error) { return s.st.Stat(ctx, s.p+key) }

func (s *sub) List(ctx context.Context, prefix string) (Listing, error) {
	l, err := s.st.List(ctx, s.p+prefix)
	if err != nil {
		return l, err
	}
	for i, k := range l.Keys {
		l.Keys[i] = strings.TrimPrefix(k, s.p)
	}
	for i, k := range l.Prefixes {
		l.Prefixes[i] = strings.TrimPrefix(k, s.p)
	}
	return l, nil
}

func (s *sub) FoldersHolding(ctx context.Context, prefix, name string) ([]string, error) {
	out, err := FoldersHolding(ctx, s.st, s.p+prefix, name)
	for i, k := range out {
		out[i] = strings.TrimPrefix(k, s.p)
	}
	return out, err
}

func (s *sub) Walk(ctx context.Context, prefix string, fn func(string, Attrs) error) error {
	return s.st.Walk(ctx, s.p+prefix, func(k string, a Attrs) error { return fn(strings.TrimPrefix(k, s.p), a) })
}

func (s *sub) Now() time.Time { return s.st.Now() }

// Pin implements Pinner: the view of a pinned store, rooted at the same
// prefix.
func (s *sub) Pin(ctx context.Context) (Store, string, error) {
	v, id, err := Pin(ctx, s.st)
	if err != nil {
		return nil, "", err
	}
	return &sub{st: v, p: s.p}, id, nil
}

// Absent implements AbsenceDater, for the key below the prefix.
func (s *sub) Absent(ctx context.Context, key string) (time.Time, error) {
	return Absent(ctx, s.st, s.p+key)
}

func (s *sub) Close() error { return nil }
