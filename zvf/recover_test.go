package zvf_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
)

// panicStore panics in Get for keys that match while armed: a stand-in
// for a bug anywhere below the reader's goroutines.
type panicStore struct {
	storage.Store
	match func(key string) bool
	armed atomic.Bool
}

func (p *panicStore) Get(ctx context.Context, key string) ([]byte, error) {
	if p.armed.Load() && p.match(key) {
		panic("storage bug reading " + key)
	}
	return p.Store.Get(ctx, key)
}

// syncBuffer is a log sink safe for the reader's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestGoroutinePanics: a panic on any goroutine the reader starts — the
// fragment-index fetch beside a chunk's vertices, the bbox errgroup, the
// errgroup that opens levels, the cache's loader — fails that request with
// an error matching cache.ErrPanic (value and stack logged) instead of
// killing the process, and the store then serves as before. Without the
// recovers the test binary died.
func TestGoroutinePanics(t *testing.T) {
	ctx := context.Background()
	box := zvf.BBoxQuery{Min: []float64{300, 400, 200}, Max: []float64{399, 499, 299}, Connectivity: true}
	bbox := func(s *zvf.Store) error {
		l, err := s.Level(0)
		if err != nil {
			return err
		}
		res, err := l.BBox(ctx, box, func(*zvf.Batch) error { return nil })
		if err == nil && res.Count == 0 {
			return errors.New("empty answer")
		}
		return err
	}
	for _, tc := range []struct {
		name   string
		cached bool
		match  func(string) bool
		open   bool // the panic happens while opening
	}{
		{"fragment index fetch", false, func(k string) bool { return strings.HasPrefix(k, "0/vertex_fragments/3.4.2/") }, false},
		{"bbox chunk read", false, func(k string) bool { return strings.HasPrefix(k, "0/vertices/3.4.2/") }, false},
		{"cache load, fragment index", true, func(k string) bool { return strings.HasPrefix(k, "0/vertex_fragments/3.4.2/") }, false},
		{"cache load, vertices", true, func(k string) bool { return strings.HasPrefix(k, "0/vertices/3.4.2/") }, false},
		{"open level", false, func(k string) bool { return k == "0/zarr.json" }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bs, err := blobstore.Open(ctx, filepath.Join(fixtures, "graph.zarrvectors"))
			if err != nil {
				t.Fatal(err)
			}
			st := &panicStore{Store: bs, match: tc.match}
			defer st.Close()
			var logs syncBuffer
			o := zvf.Options{Name: "graph", Logger: slog.New(slog.NewTextHandler(&logs, nil))}
			if tc.cached {
				o.Cache = cache.New(64 << 20)
			}
			var s *zvf.Store
			if !tc.open {
				if s, err = zvf.Open(ctx, st, o); err != nil {
					t.Fatal(err)
				}
			}
			st.armed.Store(true)
			if tc.open {
				_, err = zvf.Open(ctx, st, o)
			} else {
				err = bbox(s)
			}
			var pe *cache.PanicError
			if !errors.Is(err, cache.ErrPanic) || !errors.As(err, &pe) || !strings.Contains(fmt.Sprint(pe.Value), "storage bug") {
				t.Fatalf("err = %v, want a panic error", err)
			}
			if l := logs.String(); !strings.Contains(l, "storage bug") || !strings.Contains(l, "stack=") {
				t.Fatalf("the panic was not logged with its stack:\n%s", l)
			}
			st.armed.Store(false)
			if tc.open {
				if s, err = zvf.Open(ctx, st, o); err != nil {
					t.Fatalf("open after the panic: %v", err)
				}
			}
			if err := bbox(s); err != nil {
				t.Fatalf("after the panic: %v", err)
			}
		})
	}
}
