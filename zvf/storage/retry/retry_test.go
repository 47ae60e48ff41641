package retry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/storage/faultstore"
	"github.com/zvfserve/zvfserve/zvf/storage/retry"
)

func TestRetry(t *testing.T) {
	ctx := context.Background()
	mem, _ := blobstore.Open(ctx, "mem://")
	_ = mem.Put(ctx, "k", []byte("v"))
	fs := faultstore.New(mem, nil)
	var waits []time.Duration
	st := retry.Wrap(fs, retry.Options{Attempts: 4, Base: 10 * time.Millisecond, Max: 25 * time.Millisecond,
		Sleep: func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }})
	fs.Add(&faultstore.Rule{Key: "k", Fault: faultstore.Fault{Err: storage.ErrUnavailable, Times: 3}})
	if b, err := storage.ReadAll(ctx, st, "k", 1<<20); err != nil || string(b) != "v" {
		t.Fatalf("after 3 transient failures: %q %v", b, err)
	}
	if len(waits) != 3 || waits[0] != 10*time.Millisecond || waits[1] != 20*time.Millisecond || waits[2] != 25*time.Millisecond {
		t.Fatalf("backoff %v", waits)
	}
	calls := fs.Calls.Load()
	if _, err := storage.ReadAll(ctx, st, "missing", 1<<20); !errors.Is(err, storage.ErrNotFound) || fs.Calls.Load() != calls+1 {
		t.Fatalf("not-found must not be retried: %v, %d calls", err, fs.Calls.Load()-calls)
	}
	fs.Reset()
	fs.Add(&faultstore.Rule{Fault: faultstore.Fault{Err: storage.ErrUnavailable}})
	if _, err := storage.ReadAll(ctx, st, "k", 1<<20); !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("persistent failure: %v", err)
	}
}
