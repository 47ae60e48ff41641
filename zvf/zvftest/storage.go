package zvftest

import (
	"context"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
)

// OpenStorage opens target (a folder or a blobstore URL) with
// blobstore.Open and closes it when tb ends.
func OpenStorage(tb testing.TB, target string) storage.Writer {
	tb.Helper()
	st, err := blobstore.Open(context.Background(), target)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = st.Close() })
	return st
}
