package zvf_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// holdReads is a store whose reads of a key containing one of the
// strings in hold wait until release is closed or their context ends;
// active counts the reads under way, and idle is signalled when a read
// leaves none.
type holdReads struct {
	storage.Store
	hold    []string
	release chan struct{}
	active  atomic.Int32
	held    chan struct{} // closed when the first held read begins
	idle    chan struct{}
	once    sync.Once
}

func (h *holdReads) Get(ctx context.Context, key string, o storage.ReadOptions) (storage.Object, error) {
	h.active.Add(1)
	defer func() {
		if h.active.Add(-1) == 0 {
			select {
			case h.idle <- struct{}{}:
			default:
			}
		}
	}()
	for _, w := range h.hold {
		if strings.Contains(key, w) {
			h.once.Do(func() { close(h.held) })
			select {
			case <-h.release:
			case <-ctx.Done():
				return storage.Object{}, ctx.Err()
			}
		}
	}
	return h.Store.Get(ctx, key, o)
}

func newHoldReads(t *testing.T, hold []string) (*holdReads, *zvf.Level) {
	t.Helper()
	bs := zvftest.Store(t, filepath.Join(fixtures, "points_bins.zarrvectors"))
	h := &holdReads{Store: bs, hold: hold, release: make(chan struct{}), held: make(chan struct{}), idle: make(chan struct{}, 1)}
	s, err := zvf.Open(context.Background(), h, zvf.Options{Name: "points_bins", Cache: cache.New(64 << 20), Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := s.Level(0)
	return h, l
}

// TestColdAnswerStartsBeforeLaterReads: a cold answer takes a chunk's
// rows as soon as that chunk (and every one before it) is matched, not
// when the chunks read beside it are: the first chunk's rows reach the
// answer while the second chunk's read is still held, and the answer is
// still every row in key order.
func TestColdAnswerStartsBeforeLaterReads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ref, err := zvf.Open(ctx, zvftest.Store(t, filepath.Join(fixtures, "points_bins.zarrvectors")), zvf.Options{Name: "points_bins"})
	if err != nil {
		t.Fatal(err)
	}
	rl, _ := ref.Level(0)
	keys := rl.Keys()
	all := [2][3]float64{{-1e9, -1e9, -1e9}, {1e9, 1e9, 1e9}}
	want := boxRows(t, rl, all[0], all[1])
	h, l := newHoldReads(t, []string{"/vertices/" + keys[1].String() + "/"})
	// If the answer waits for the held read, the read is let go after a
	// while so that the test fails rather than hangs.
	safety := time.AfterFunc(10*time.Second, func() { close(h.release) })
	var got []byte
	early := false
	_, err = l.BBox(ctx, zvf.BBoxQuery{Min: all[0][:], Max: all[1][:]}, func(b *zvf.Batch) error {
		if got == nil && safety.Stop() {
			early = true // the second chunk's read is still held
			close(h.release)
		}
		got = append(got, b.Vertices.Data...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !early {
		t.Error("the first chunk's rows waited for the second chunk's read")
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%d rows, a test of every row finds %d (or in another order)", len(got)/12, len(want)/12)
	}
}

// TestColdAnswerStopLeavesNoRead: an answer that stops mid-way (its
// client went away) returns its own error at once, and the reads it had
// started ahead are cancelled: they end though nothing releases them (the
// cache finishes a cancelled load on its own goroutine, so they may end
// just after the answer returns, never later than their cancellation).
func TestColdAnswerStopLeavesNoRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bs := zvftest.Store(t, filepath.Join(fixtures, "points_bins.zarrvectors"))
	ref, err := zvf.Open(ctx, bs, zvf.Options{Name: "points_bins"})
	if err != nil {
		t.Fatal(err)
	}
	rl, _ := ref.Level(0)
	var hold []string
	for _, k := range rl.Keys()[1:] {
		hold = append(hold, "/vertices/"+k.String()+"/")
	}
	h, l := newHoldReads(t, hold)
	safety := time.AfterFunc(10*time.Second, func() { close(h.release) })
	defer safety.Stop()
	errGone := errors.New("client went away")
	all := [2][3]float64{{-1e9, -1e9, -1e9}, {1e9, 1e9, 1e9}}
	_, err = l.BBox(ctx, zvf.BBoxQuery{Min: all[0][:], Max: all[1][:]}, func(b *zvf.Batch) error {
		<-h.held // a read ahead is under way
		return errGone
	})
	if !errors.Is(err, errGone) {
		t.Fatalf("answer ended with %v, want its writer's error", err)
	}
	if !safety.Stop() {
		t.Error("the stopped answer waited for reads it no longer needed")
	}
	timeout := time.After(10 * time.Second)
	for h.active.Load() != 0 {
		select {
		case <-h.idle:
		case <-timeout:
			t.Fatalf("%d reads still under way after the answer returned", h.active.Load())
		}
	}
}
