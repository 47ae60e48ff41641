package faultstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/faultstore"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

func TestFaults(t *testing.T) {
	ctx := context.Background()
	mem := zvftest.Store(t, "mem://")
	if err := mem.Put(ctx, "a/b", []byte("0123456789")); err != nil {
		t.Fatal(err)
	}
	var slept time.Duration
	fs := faultstore.New(mem, func(_ context.Context, d time.Duration) error { slept += d; return nil })
	fs.Add(&faultstore.Rule{Op: "get", Key: "a/", Fault: faultstore.Fault{Err: fmtUnavailable(), Times: 2}})
	for i := 0; i < 2; i++ {
		if _, err := storage.ReadAll(ctx, fs, "a/b", 1<<20); !errors.Is(err, storage.ErrUnavailable) {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if b, err := storage.ReadAll(ctx, fs, "a/b", 1<<20); err != nil || string(b) != "0123456789" {
		t.Fatalf("after Times ran out: %q %v", b, err)
	}
	fs.Reset()
	fs.Add(&faultstore.Rule{Key: "a/", Fault: faultstore.Fault{Delay: time.Second, ShortRead: 3}})
	if b, _ := storage.ReadAll(ctx, fs, "a/b", 1<<20); string(b) != "012" || slept != time.Second {
		t.Fatalf("short read %q after %v", b, slept)
	}
	fs.Reset()
	fs.Add(&faultstore.Rule{Fault: faultstore.Fault{Hang: true}})
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := fs.List(cctx, "a/"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("hang: %v", err)
	}
	if fs.Canceled.Load() != 1 || fs.InFlight.Load() != 0 || fs.Calls.Load() != 5 {
		t.Fatalf("counters: canceled %d in flight %d calls %d", fs.Canceled.Load(), fs.InFlight.Load(), fs.Calls.Load())
	}
}

func fmtUnavailable() error { return errors.Join(storage.ErrUnavailable, faultstore.ErrInjected) }

// TestHideLeavesKeysOutOfAListing: a Hide fault leaves matching keys and
// prefixes out of the listings it applies to (here the first only), as a
// listing that has not caught up with a write would, while the object
// itself still reads.
func TestHideLeavesKeysOutOfAListing(t *testing.T) {
	ctx := context.Background()
	mem := zvftest.Store(t, "mem://")
	for _, k := range []string{"v/1.0/zarr.json", "v/2.0/zarr.json", "v/3.0/zarr.json"} {
		if err := mem.Put(ctx, k, []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	fs := faultstore.New(mem, nil)
	fs.Add(&faultstore.Rule{Op: "list", Key: "v/", Nth: 1, Fault: faultstore.Fault{Hide: "2.0"}})
	l, err := fs.List(ctx, "v/")
	if err != nil || strings.Join(l.Prefixes, " ") != "v/1.0/ v/3.0/" {
		t.Fatalf("the first listing: %v %v, want 2.0 left out", l.Prefixes, err)
	}
	if _, err := fs.Stat(ctx, "v/2.0/zarr.json"); err != nil {
		t.Fatalf("the hidden object does not read: %v", err)
	}
	if l, err = fs.List(ctx, "v/"); err != nil || len(l.Prefixes) != 3 {
		t.Fatalf("the second listing: %v %v, want all three", l.Prefixes, err)
	}
}
