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
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// panicStore panics in List for matching prefixes while armed: a stand-in
// for a bug below the goroutines that open levels.
type panicStore struct {
	storage.Store
	match func(prefix string) bool
	armed atomic.Bool
}

func (p *panicStore) List(ctx context.Context, prefix string) (storage.Listing, error) {
	if p.armed.Load() && p.match(prefix) {
		panic("storage bug listing " + prefix)
	}
	return p.Store.List(ctx, prefix)
}

// panicCache is a zvf.Cache that, while armed, panics for matching keys:
// on the calling goroutine (one the reader started) or, inLoad, inside
// the load the cache runs.
type panicCache struct {
	inner  *cache.Cache
	match  func(key string) bool
	inLoad bool
	armed  atomic.Bool
}

func (p *panicCache) Get(ctx context.Context, key string, load func(context.Context) (any, int64, error)) (any, error) {
	if p.armed.Load() && p.match(key) {
		bug := "cache bug for " + strings.ReplaceAll(key, "\x00", "/")
		if !p.inLoad {
			panic(bug)
		}
		load = func(context.Context) (any, int64, error) { panic(bug) }
	}
	return p.inner.Get(ctx, key, load)
}

func (p *panicCache) Peek(key string) (any, bool)    { return p.inner.Peek(key) }
func (p *panicCache) RemovePrefix(prefix string) int { return p.inner.RemovePrefix(prefix) }
func (p *panicCache) Retire(prefix string) int       { return p.inner.Retire(prefix) }

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
	t.Parallel()
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
	key := func(parts ...string) func(string) bool {
		return func(k string) bool { return strings.HasSuffix(k, "\x00"+strings.Join(parts, "\x00")) }
	}
	never := func(string) bool { return false }
	for _, tc := range []struct {
		name   string
		key    func(key string) bool // cache Get (or, inLoad, the load) panics
		inLoad bool
		open   bool // List of the level's vertices panics while opening
	}{
		{"fragment index fetch", key("blob", "vertex_fragments", "3.4.2"), false, false},
		{"bbox chunk read", key("verts", "3.4.2"), false, false},
		{"cache load, fragment index", key("blob", "vertex_fragments", "3.4.2"), true, false},
		{"cache load, vertices", key("verts", "3.4.2"), true, false},
		{"open level", never, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bs := zvftest.Store(t, filepath.Join(fixtures, "graph.zarrvectors"))
			st := &panicStore{Store: bs, match: func(p string) bool { return tc.open && p == "0/vertices/" }}
			var err error
			pc := &panicCache{inner: cache.New(64 << 20), match: tc.key, inLoad: tc.inLoad}
			var logs syncBuffer
			o := zvf.Options{Name: "graph", Cache: pc, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
			var s *zvf.Store
			if !tc.open {
				if s, err = zvf.Open(ctx, st, o); err != nil {
					t.Fatal(err)
				}
			}
			st.armed.Store(true)
			pc.armed.Store(true)
			if tc.open {
				_, err = zvf.Open(ctx, st, o)
			} else {
				err = bbox(s)
			}
			var pe *cache.PanicError
			if !errors.Is(err, cache.ErrPanic) || !errors.As(err, &pe) || !strings.Contains(fmt.Sprint(pe.Value), "bug") {
				t.Fatalf("err = %v, want a panic error", err)
			}
			if l := logs.String(); !strings.Contains(l, "bug") || !strings.Contains(l, "stack=") {
				t.Fatalf("the panic was not logged with its stack:\n%s", l)
			}
			st.armed.Store(false)
			pc.armed.Store(false)
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
