package zvf_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/synth"
	"go.uber.org/goleak"
)

// TestHandleRetiresBuilds: a level-table build under way on a version the
// handle replaces (the store changed) ends with the retirement, though
// its storage would block it forever; the old version still answers, and
// Close leaves no goroutine behind.
func TestHandleRetiresBuilds(t *testing.T) {
	// Not parallel: goleak looks at every goroutine.
	ignore := goleak.IgnoreCurrent()
	ctx := context.Background()
	src, err := synth.Streamlines(ctx, 30_000, 7)
	if err != nil {
		t.Fatal(err)
	}
	cs := newClockStore(t)
	sub := storage.Sub(src, "streamlines")
	err = sub.Walk(ctx, "", func(key string, _ storage.Attrs) error {
		b, err := storage.ReadAll(ctx, sub, key, 1<<30)
		if err != nil {
			return err
		}
		return cs.Put(ctx, key, b)
	})
	if err != nil {
		t.Fatal(err)
	}
	cs.advance(time.Minute) // the store settled before it is opened
	hang := &hangingStore{Store: cs, entered: make(chan struct{})}
	h, err := zvf.OpenHandle(ctx, hang, zvf.Options{Name: "lines", Cache: cache.New(256 << 20), Concurrency: 4},
		zvf.Watch{Enabled: true, Settle: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	old, err := h.Current()
	if err != nil {
		t.Fatal(err)
	}
	l, _ := old.Level(1)
	min, max := firstCell(l)
	q := zvf.BBoxQuery{Min: min, Max: max, Connectivity: true, Wire: true}
	want, _ := tableAnswer(t, l, q)
	hang.armed.Store(true)
	if got, _ := tableAnswer(t, l, q); !bytes.Equal(got, want) { // starts the build, which blocks
		t.Fatal("the answer that started the build differs")
	}
	within(t, "the build to begin", func() { <-hang.entered })
	// The build's read blocks on; no read after it does (a new version's
	// open reads a chunk).
	hang.armed.Store(false)
	// A new version: the root's metadata written again, then settled.
	root, err := storage.ReadAll(ctx, cs, "zarr.json", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	cs.advance(time.Minute)
	if err := cs.Put(ctx, "zarr.json", root); err != nil {
		t.Fatal(err)
	}
	cs.advance(time.Minute)
	for i := 0; ; i++ {
		if _, err := h.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		if s, _ := h.Current(); s != old {
			break
		}
		if i == 3 {
			t.Fatal("the handle kept the old version")
		}
	}
	within(t, "the retired version's build to end", func() { zvf.WaitTableBuilds(old) })
	if got, _ := tableAnswer(t, l, q); !bytes.Equal(got, want) {
		t.Fatal("the retired version's answer differs")
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, ignore)
}

// within runs f and fails t when it has not returned in 20 seconds.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("waited 20 s for %s", what)
	}
}
