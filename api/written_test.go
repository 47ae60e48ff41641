package api_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
)

// writtenStore serves, as store name, what write puts into a fresh
// in-memory bucket under prefix ("s"): a store made for one test with
// zvf/writer.
func writtenStore(t *testing.T, name string, write func(ctx context.Context, w storage.Writer, prefix string) error) http.Handler {
	t.Helper()
	ctx := t.Context()
	mem, err := blobstore.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	if err := write(ctx, mem, "s"); err != nil {
		t.Fatal(err)
	}
	s, err := zvf.Open(ctx, storage.Sub(mem, "s"), zvf.Options{Name: name, Cache: cache.New(1 << 20)})
	if err != nil {
		t.Fatal(err)
	}
	return apitest.New(t, api.Options{Stores: []*zvf.Store{s}}).Handler()
}
