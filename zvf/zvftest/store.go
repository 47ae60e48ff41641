package zvftest

import (
	"context"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
)

// Store opens urlOrPath as blobstore.Open does (a folder, mem:// for a
// fresh store in memory, or a bucket URL) and closes it when tb ends: the
// open, check and close that most store tests begin with. A failure to
// open stops the test; a failure to close fails it.
func Store(tb testing.TB, urlOrPath string) storage.Writer {
	tb.Helper()
	st, err := blobstore.Open(context.Background(), urlOrPath)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := st.Close(); err != nil {
			tb.Errorf("closing %s: %v", urlOrPath, err)
		}
	})
	return st
}
