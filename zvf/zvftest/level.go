package zvftest

import (
	"context"
	"testing"

	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
)

// OpenLevel opens st with zvf.Open and returns its level n, stopping the
// test on either error: the opening of most reader tests.
func OpenLevel(tb testing.TB, st storage.Store, o zvf.Options, n int) *zvf.Level {
	tb.Helper()
	s, err := zvf.Open(context.Background(), st, o)
	if err != nil {
		tb.Fatal(err)
	}
	l, err := s.Level(n)
	if err != nil {
		tb.Fatal(err)
	}
	return l
}

// Object reads object id of l with the attributes named, stopping the
// test on an error.
func Object(tb testing.TB, l *zvf.Level, id int64, attrs []string) *zvf.Object {
	tb.Helper()
	o, err := l.Object(context.Background(), id, attrs)
	if err != nil {
		tb.Fatal(err)
	}
	return o
}
