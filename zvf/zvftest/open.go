package zvftest

import (
	"context"
	"testing"

	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
)

// OpenSub opens the store that st holds under the prefix name (where synth
// and the writer put a store) as name, reading through c (nil: no cache).
func OpenSub(tb testing.TB, st storage.Store, name string, c zvf.Cache) *zvf.Store {
	tb.Helper()
	s, err := zvf.Open(context.Background(), storage.Sub(st, name), zvf.Options{Name: name, Cache: c})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}
