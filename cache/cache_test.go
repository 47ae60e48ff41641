package cache

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/zvfserve/zvfserve/zvf/zvftest/benchtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func loader(v any, size int64, calls *atomic.Int64) func(context.Context) (any, int64, error) {
	return func(context.Context) (any, int64, error) {
		calls.Add(1)
		return v, size, nil
	}
}

func TestHitMissEvict(t *testing.T) {
	ctx := context.Background()
	c := New(100)
	var calls atomic.Int64
	for i, tc := range []struct {
		key       string
		size      int64
		wantCalls int64
	}{
		{"a", 40, 1}, {"a", 40, 1}, {"b", 40, 2}, {"c", 40, 3}, // c evicts a
		{"b", 40, 3}, {"a", 40, 4}, // a reloaded, evicts c (b was used more recently)
		{"huge", 1000, 5}, {"huge", 1000, 6}, // larger than the budget: never stored
	} {
		v, err := c.Get(ctx, tc.key, loader(tc.key, tc.size, &calls))
		if err != nil || v != tc.key {
			t.Fatalf("step %d: %v %v", i, v, err)
		}
		if calls.Load() != tc.wantCalls {
			t.Fatalf("step %d (%s): %d loads, want %d", i, tc.key, calls.Load(), tc.wantCalls)
		}
		if st := c.Stats(); st.Bytes > 100 {
			t.Fatalf("step %d: %d bytes over budget", i, st.Bytes)
		}
	}
	st := c.Stats()
	if st.Items != 2 || st.Bytes != 80 || st.Evictions != 2 || st.Hits != 2 {
		t.Fatalf("stats %+v", st)
	}
	c.Remove("a")
	if st := c.Stats(); st.Items != 1 || st.Bytes != 40 {
		t.Fatalf("after Remove: %+v", st)
	}
	c.Purge()
	if st := c.Stats(); st.Items != 0 || st.Bytes != 0 {
		t.Fatalf("after Purge: %+v", st)
	}
}

func TestPeek(t *testing.T) {
	c := New(100)
	if _, ok := c.Peek("a"); ok {
		t.Fatal("Peek found a missing key")
	}
	var calls atomic.Int64
	if _, err := c.Get(context.Background(), "a", loader("A", 10, &calls)); err != nil {
		t.Fatal(err)
	}
	if v, ok := c.Peek("a"); !ok || v != "A" || calls.Load() != 1 {
		t.Fatalf("Peek = %v %v after %d loads", v, ok, calls.Load())
	}
	if st := c.Stats(); st.Hits != 1 || st.Misses != 1 {
		t.Fatalf("stats %+v", st)
	}
	if _, ok := (*Cache)(nil).Peek("a"); ok {
		t.Fatal("nil cache peeked something")
	}
}

func TestRemovePrefix(t *testing.T) {
	ctx := context.Background()
	c := New(1000)
	var calls atomic.Int64
	for _, k := range []string{"s\x001\x00a", "s\x001\x00b", "s\x002\x00a", "t\x001\x00a"} {
		if _, err := c.Get(ctx, k, loader(k, 10, &calls)); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.RemovePrefix("s\x001\x00"); n != 2 {
		t.Fatalf("removed %d, want 2", n)
	}
	if st := c.Stats(); st.Items != 2 || st.Bytes != 20 {
		t.Fatalf("after RemovePrefix: %+v", st)
	}
	if _, err := c.Get(ctx, "s\x002\x00a", loader("x", 10, &calls)); err != nil || calls.Load() != 4 {
		t.Fatalf("other generation was dropped too (%d loads)", calls.Load())
	}
	var nilCache *Cache
	if nilCache.RemovePrefix("s") != 0 {
		t.Fatal("nil cache removed something")
	}
}

func TestErrorsNotCached(t *testing.T) {
	c := New(100)
	boom := errors.New("boom")
	n := 0
	for i := 0; i < 3; i++ {
		_, err := c.Get(context.Background(), "k", func(context.Context) (any, int64, error) { n++; return nil, 0, boom })
		if !errors.Is(err, boom) {
			t.Fatal(err)
		}
	}
	if n != 3 {
		t.Fatalf("%d loads, want 3", n)
	}
}

// TestDedup: concurrent Gets of one missing key share one load, and
// every caller but the first is counted as deduplicated. synctest.Wait
// returns once every caller is blocked on the load, so none can still be
// on its way in when the load is released.
func TestDedup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(1 << 20)
		var calls atomic.Int64
		release := make(chan struct{})
		const callers = 100
		var wg sync.WaitGroup
		for range callers {
			wg.Go(func() {
				v, err := c.Get(context.Background(), "k", func(context.Context) (any, int64, error) {
					calls.Add(1)
					<-release
					return 7, 8, nil
				})
				if err != nil || v != 7 {
					t.Error(v, err)
				}
			})
		}
		synctest.Wait()
		close(release)
		wg.Wait()
		if calls.Load() != 1 {
			t.Fatalf("%d loads for %d concurrent Gets", calls.Load(), callers)
		}
		if st := c.Stats(); st.Items != 1 || st.Hits != 0 || st.Deduped != callers-1 || st.Misses != 1 {
			t.Fatalf("after the load: %+v", st)
		}
	})
}

func TestCancelledWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(1 << 20)
		started := make(chan struct{})
		loadCtxDone := make(chan struct{})
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			<-started
			cancel()
		}()
		_, err := c.Get(ctx, "k", func(lctx context.Context) (any, int64, error) {
			close(started)
			<-lctx.Done() // cancelled because the only waiter left
			close(loadCtxDone)
			return nil, 0, lctx.Err()
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
		synctest.Wait() // the load has either seen its cancellation or never will
		select {
		case <-loadCtxDone:
		default:
			t.Fatal("load was not cancelled after its last waiter left")
		}
	})
}

func TestNil(t *testing.T) {
	var c *Cache
	v, err := c.Get(context.Background(), "k", func(context.Context) (any, int64, error) { return "x", 1, nil })
	if err != nil || v != "x" {
		t.Fatal(v, err)
	}
	c.Purge()
	c.Remove("k")
	_ = c.Stats()
}

func BenchmarkGetHit(b *testing.B) {
	c := New(1 << 30)
	ctx := context.Background()
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprint("key", i)
		if _, err := c.Get(ctx, keys[i], func(context.Context) (any, int64, error) { return i, 8, nil }); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, err := c.Get(ctx, keys[i&1023], nil); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

// firstAsker starts a Get of "k" with ctx on a goroutine of its own and
// returns once its load has started; the load then waits for release to
// close and answers end(its ctx). The Get's error arrives on first.
func firstAsker(ctx context.Context, c *Cache, end func(context.Context) (any, int64, error)) (release chan struct{}, first chan error) {
	started := make(chan struct{})
	release, first = make(chan struct{}), make(chan error, 1)
	go func() {
		_, err := c.Get(ctx, "k", func(lctx context.Context) (any, int64, error) {
			close(started)
			<-release
			return end(lctx)
		})
		first <- err
	}()
	<-started
	return release, first
}

// A load abandoned by every waiter must not be joined by later callers:
// they start a fresh load and get a value, not the cancellation. The
// abandoned load runs on its first caller's goroutine, which returns when
// the load does.
func TestAbandonedLoadNotJoined(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(1 << 20)
		ctx, cancel := context.WithCancel(context.Background())
		// The load ignores its context for a while, like a slow read.
		release, first := firstAsker(ctx, c, func(lctx context.Context) (any, int64, error) { return nil, 0, lctx.Err() })
		cancel()
		synctest.Wait() // the first caller has left the load
		v, err := c.Get(context.Background(), "k", func(context.Context) (any, int64, error) { return 42, 8, nil })
		close(release)
		if err != nil || v != 42 {
			t.Fatalf("second caller: %v %v", v, err)
		}
		if err := <-first; !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
		if st := c.Stats(); st.Misses != 2 || st.Deduped != 0 {
			t.Fatalf("the second caller joined the abandoned load: %+v", st)
		}
	})
}

// TestCancelledCallerLoadsNothing: a caller whose ctx has already ended
// gets its error, and no load starts for it.
func TestCancelledCallerLoadsNothing(t *testing.T) {
	c := New(1 << 20)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.Get(ctx, "k", func(context.Context) (any, int64, error) { return 1, 8, nil })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want the caller's cancellation", err)
	}
	if _, ok := c.Peek("k"); ok {
		t.Fatal("a load ran for a caller that had left")
	}
}

// TestCancelledFirstAskerReloads: the load runs on its first caller's
// goroutine under that caller's ctx; when that ctx ends while another
// caller waits, the load is cancelled (the first caller returns at once,
// by its own deadline, not when the others are done), and the other
// caller loads the value itself (and it is cached). Before, the load went
// on for the other caller, holding the first past its deadline as long as
// anyone waited.
func TestCancelledFirstAskerReloads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(1 << 20)
		ctx, cancel := context.WithCancel(context.Background())
		// The first load hangs until its ctx ends, as a hung backend does.
		release, first := firstAsker(ctx, c, func(lctx context.Context) (any, int64, error) {
			<-lctx.Done()
			return nil, 0, lctx.Err()
		})
		close(release)
		second := make(chan any, 1)
		go func() {
			v, err := c.Get(context.Background(), "k", func(context.Context) (any, int64, error) { return 7, 8, nil })
			if err != nil {
				v = err
			}
			second <- v
		}()
		synctest.Wait() // the second caller waits on the load
		cancel()
		if err := <-first; !errors.Is(err, context.Canceled) {
			t.Fatalf("the cancelled first asker got %v", err)
		}
		if v := <-second; v != 7 {
			t.Fatalf("the waiter got %v, want its own load's 7", v)
		}
		// Two loads, each counted once as a miss: the waiter whose shared
		// load was abandoned loaded the value itself, so it is not also
		// a deduplicated request.
		if st := c.Stats(); st.Misses != 2 || st.Deduped != 0 || st.Hits != 0 {
			t.Fatalf("%+v, want 2 misses and nothing else", st)
		}
		if v, ok := c.Peek("k"); !ok || v != 7 {
			t.Fatalf("not cached: %v %v", v, ok)
		}
	})
}

// TestPanickingLoader: a loader that panics fails every caller waiting on
// it with a *PanicError (matching ErrPanic, carrying the value and the
// stack), caches nothing, and leaves the cache working; no goroutine is
// left behind. Without the recover the panic would reach only the caller
// whose goroutine ran the load, and the others would never be told.
func TestPanickingLoader(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, tc := range []struct {
		name  string
		boom  func()
		value string // fmt of the recovered value
	}{
		{"string", func() { panic("boom") }, "boom"},
		{"error", func() { panic(errors.New("bad")) }, "bad"},
		{"index out of range", func() { var s []int; _ = s[len(s)+3] }, "runtime error: index out of range [3] with length 0"},
		{"nil", func() { panic(nil) }, "panic called with nil argument"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := New(1 << 20)
				const waiters = 5
				release := make(chan struct{})
				errs := make(chan error, waiters)
				load := func(context.Context) (any, int64, error) {
					<-release
					tc.boom()
					return "unreachable", 8, nil
				}
				for i := 0; i < waiters; i++ {
					go func() {
						_, err := c.Get(context.Background(), "k", load)
						errs <- err
					}()
				}
				// Every caller joins the one load before it panics.
				synctest.Wait()
				close(release)
				for i := 0; i < waiters; i++ {
					err := <-errs
					var pe *PanicError
					if !errors.Is(err, ErrPanic) || !errors.As(err, &pe) {
						t.Fatalf("caller %d: err = %v, want a *PanicError", i, err)
					}
					if got := fmt.Sprint(pe.Value); got != tc.value {
						t.Fatalf("panic value %q, want %q", got, tc.value)
					}
					if !strings.Contains(string(pe.Stack), "cache_test.go") {
						t.Fatalf("stack does not reach the loader:\n%s", pe.Stack)
					}
				}
				if st := c.Stats(); st.Items != 0 || st.Bytes != 0 {
					t.Fatalf("a panicked load was cached: %+v", st)
				}
				// Counted as each caller's outcome was known.
				if st := c.Stats(); st.Deduped != waiters-1 || st.Misses != 1 {
					t.Fatalf("%+v: want the %d others to have joined the one load", st, waiters-1)
				}
				v, err := c.Get(context.Background(), "k", func(context.Context) (any, int64, error) { return "ok", 8, nil })
				if err != nil || v != "ok" {
					t.Fatalf("Get after the panic: %v %v", v, err)
				}
				if v, ok := c.Peek("k"); !ok || v != "ok" {
					t.Fatalf("value loaded after the panic was not cached: %v %v", v, ok)
				}
			})
		})
	}
	var nilCache *Cache
	if _, err := nilCache.Get(context.Background(), "k", func(context.Context) (any, int64, error) { panic("boom") }); !errors.Is(err, ErrPanic) {
		t.Fatalf("nil cache: err = %v", err)
	}
}

// TestReserve: bytes held outside the cache (answers being written) count
// against its budget: a reservation evicts cached values, oldest first,
// until values and reservations fit together; while reservations fill
// the budget nothing loaded is kept; released, the room is the cache's
// again. Room reports, without waiting, whether reservations are below a
// limit, and otherwise gives a channel closed when a release may have
// made room.
func TestReserve(t *testing.T) {
	ctx := context.Background()
	c := New(100)
	var calls atomic.Int64
	for _, k := range []string{"a", "b", "c"} {
		if _, err := c.Get(ctx, k, loader(k, 30, &calls)); err != nil {
			t.Fatal(err)
		}
	}
	c.Reserve(25) // 90 + 25 > 100: a goes
	if st := c.Stats(); st.Items != 2 || st.Bytes != 60 || st.Reserved != 25 || st.Evictions != 1 {
		t.Fatalf("after reserving 25: %+v", st)
	}
	if _, ok := c.Peek("a"); ok {
		t.Fatal("the oldest value outlived the reservation")
	}
	c.Reserve(90) // 115 reserved: more than the budget, nothing stays
	if st := c.Stats(); st.Items != 0 || st.Bytes != 0 || st.Reserved != 115 {
		t.Fatalf("after reserving 115: %+v", st)
	}
	if v, err := c.Get(ctx, "d", loader("D", 10, &calls)); err != nil || v != "D" {
		t.Fatalf("a load with the budget reserved: %v %v", v, err)
	}
	if st := c.Stats(); st.Items != 0 {
		t.Fatalf("a value was kept with the budget reserved: %+v", st)
	}
	room := c.Room(100)
	if room == nil {
		t.Fatal("Room(100) with 115 reserved reports room")
	}
	if c.Room(200) != nil {
		t.Fatal("Room(200) with 115 reserved reports none")
	}
	c.Reserve(-10) // 105: still no room below 100
	select {
	case <-room:
		if c.Room(100) == nil {
			t.Fatal("room below 100 with 105 reserved")
		}
	default:
	}
	c.Reserve(-90) // 15
	select {
	case <-room:
	default:
		t.Fatal("a release that made room did not say so")
	}
	if c.Room(100) != nil {
		t.Fatal("no room with 15 of 100 reserved")
	}
	for _, k := range []string{"e", "f", "g"} {
		if _, err := c.Get(ctx, k, loader(k, 30, &calls)); err != nil {
			t.Fatal(err)
		}
	}
	if st := c.Stats(); st.Items != 2 || st.Bytes != 60 || st.Reserved != 15 {
		t.Fatalf("loads beside 15 reserved: %+v", st)
	}
	c.Reserve(-15)
	if st := c.Stats(); st.Reserved != 0 {
		t.Fatalf("everything released: %+v", st)
	}
	var nilCache *Cache
	nilCache.Reserve(10)
	if nilCache.Room(0) != nil {
		t.Fatal("a nil cache has no room")
	}
}

// BenchmarkPeekHit: the warm read path's lookup — Peek of keys shaped as
// the reader's (store, generation, level, kind, chunk) over a level's 512
// chunks, from every core the run allows. Compare -cpu 1,2: with no
// serial point ns/op halves and cpu-ns/op stays; mutex-wait-ns/op is the
// time lookups spent blocked on a lock (zero when nothing serialises
// them).
func BenchmarkPeekHit(b *testing.B) {
	c := New(1 << 30)
	ctx := context.Background()
	keys := make([]string, 512)
	for i := range keys {
		keys[i] = fmt.Sprintf("points\x000\x00level/0\x00verts\x00%d.%d.%d", i/64, i/8%8, i%8)
		if _, err := c.Get(ctx, keys[i], func(context.Context) (any, int64, error) { return i, 4096, nil }); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	m := benchtest.Start(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, ok := c.Peek(keys[i&511]); !ok {
				b.Fatal("miss")
			}
			i += 7
		}
	})
	b.StopTimer()
	m.ReportCPU()
	m.ReportMutexWait()
}

// lockFree runs f on another goroutine while the test holds c.mu, and
// fails if f does not return: the warm read path — hits, and answers
// reserving and releasing memory that needs no eviction — must not wait
// for the lock that loads, stores and evictions take (issue 25: one lock
// on every hit serialised level=auto on 16 cores).
func lockFree(t *testing.T, c *Cache, what string, f func()) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second): // a failure would otherwise hang until the test binary's timeout
		t.Fatalf("%s waited for the cache's lock", what)
	}
}

func TestHitsTakeNoLock(t *testing.T) {
	ctx := context.Background()
	c := New(1 << 20)
	var calls atomic.Int64
	keys := make([]string, 100)
	for i := range keys {
		keys[i] = fmt.Sprint("k", i)
		if _, err := c.Get(ctx, keys[i], loader(i, 10, &calls)); err != nil {
			t.Fatal(err)
		}
	}
	// Lookups of keys stored since the read index was built take the lock
	// until they have paid for a new index.
	for _, k := range keys {
		if _, ok := c.Peek(k); !ok {
			t.Fatalf("%s missing", k)
		}
	}
	lockFree(t, c, "Peek and Get of cached keys", func() {
		for i, k := range keys {
			if v, ok := c.Peek(k); !ok || v != i {
				t.Errorf("Peek(%s) = %v %v", k, v, ok)
			}
			if v, err := c.Get(ctx, k, nil); err != nil || v != i {
				t.Errorf("Get(%s) = %v %v", k, v, err)
			}
		}
		if _, ok := c.Peek("absent"); ok {
			t.Error("Peek found an absent key")
		}
	})
	lockFree(t, c, "Reserve and Room with room to spare", func() {
		c.Reserve(1000)
		if c.Room(2000) != nil {
			t.Error("no room below the limit")
		}
		c.Reserve(-1000)
	})
	if st := c.Stats(); st.Hits != 300 || st.Misses != 100 || calls.Load() != 100 {
		t.Fatalf("stats %+v after %d loads", st, calls.Load())
	}
}

// TestSecondChance: eviction takes the oldest value not hit since it took
// its place; one hit since is moved to the front instead. Hits between two
// stores are one moment (recency is sampled, not written on every hit):
// a value is "hit since" only if a later value was stored before the hit.
func TestSecondChance(t *testing.T) {
	ctx := context.Background()
	var calls atomic.Int64
	for _, tc := range []struct {
		name string
		ops  string // k: Get k (a load when absent); each value is 10 of a budget of 30
		kept string // what the cache holds at the end, sorted
	}{
		{"no hits: first in, first out", "abcde", "cde"},
		{"a hit keeps the oldest", "abcAd", "acd"},           // A: a hit of a
		{"hits in store order", "abcBAd", "abd"},             // b then a hit: c goes
		{"a hit is spent by the move", "abcAde", "ade"},      // a moves ahead; d evicts b, e evicts c
		{"every value hit", "abcABCd", "abd"},                // c's hit is one moment with its store: c goes
		{"hits after a later store count", "abcdBCe", "bce"}, // d evicts a; b and c hit after d: d goes
		{"a hit in its own moment", "aAbcd", "bcd"},
		{"a hit before a later store counts", "abAcd", "acd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(30)
			for _, op := range tc.ops {
				k := strings.ToLower(string(op))
				if _, err := c.Get(ctx, k, loader(k, 10, &calls)); err != nil {
					t.Fatal(err)
				}
			}
			var kept []string
			for _, k := range "abcdefg" {
				if _, ok := c.lru.Peek(string(k)); ok {
					kept = append(kept, string(k))
				}
			}
			if got := strings.Join(kept, ""); got != tc.kept {
				t.Fatalf("%s: holds %q, want %q", tc.ops, got, tc.kept)
			}
		})
	}
}

// TestReadIndexHoldsNothingRemoved: a value evicted or removed is no
// longer reachable from the read index (whose map may still name its key
// until it is rebuilt), so its memory goes; Purge and RemovePrefix leave
// no removed key in it.
func TestReadIndexHoldsNothingRemoved(t *testing.T) {
	ctx := context.Background()
	c := New(100)
	var calls atomic.Int64
	for i := range 50 {
		if _, err := c.Get(ctx, fmt.Sprint("k", i), loader(make([]byte, 10), 10, &calls)); err != nil {
			t.Fatal(err)
		}
		for j := range i {
			c.Peek(fmt.Sprint("k", j)) // locked lookups: the read index is rebuilt now and then
		}
	}
	c.Reserve(50) // 5 values left
	held := 0
	for k, e := range c.read.Load().m {
		_, inLRU := c.lru.Peek(k)
		if e.val.Load() != nil {
			held++
			if !inLRU {
				t.Fatalf("%s: the read index keeps an evicted value", k)
			}
		}
	}
	if st := c.Stats(); held > int(st.Items) || st.Items != 5 {
		t.Fatalf("%d values reachable from the read index, %+v", held, st)
	}
	c.RemovePrefix("k4")
	for k := range c.read.Load().m {
		if strings.HasPrefix(k, "k4") {
			t.Fatalf("%s still in the read index after RemovePrefix", k)
		}
	}
	c.Purge()
	if n := len(c.read.Load().m); n != 0 {
		t.Fatalf("%d keys in the read index after Purge", n)
	}
	c.Reserve(-50)
}

// TestConcurrentChurn: readers and loaders of overlapping keys on a
// cache too small for them all always get each key's own value, and the
// cache ends within its budget with its byte count equal to what it holds
// (run with -race).
func TestConcurrentChurn(t *testing.T) {
	ctx := context.Background()
	const budget = 400
	c := New(budget)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				k := (i*7 + g*13) % 97
				key := fmt.Sprint("k", k)
				if i%3 == 0 {
					if v, ok := c.Peek(key); ok && v != k {
						t.Errorf("Peek(%s) = %v", key, v)
						return
					}
					continue
				}
				v, err := c.Get(ctx, key, func(context.Context) (any, int64, error) { return k, int64(5 + k%20), nil })
				if err != nil || v != k {
					t.Errorf("Get(%s) = %v %v", key, v, err)
					return
				}
				if i%50 == 0 {
					c.Reserve(30)
					c.Reserve(-30)
				}
			}
		})
	}
	wg.Wait()
	st := c.Stats()
	var sum int64
	for _, e := range c.lru.Values() {
		sum += e.size
	}
	if st.Bytes > budget || st.Bytes != sum || st.Reserved != 0 {
		t.Fatalf("stats %+v, values held sum to %d", st, sum)
	}
}

// TestRef: a Ref finds its value again without the key while the value
// is cached, counting hits as Peek does; once the value is evicted,
// removed or purged it names nothing (and holds nothing), also after the
// key is stored again.
func TestRef(t *testing.T) {
	ctx := context.Background()
	c := New(100)
	load := func(v string, size int64) func(context.Context) (any, int64, error) {
		return func(context.Context) (any, int64, error) { return v, size, nil }
	}
	if _, r, ok := c.PeekRef("a"); ok || r != nil {
		t.Fatalf("PeekRef of a missing key: %v, %v", r, ok)
	}
	if v, ok := c.Deref(nil); ok || v != nil {
		t.Fatalf("Deref(nil) = %v, %v", v, ok)
	}
	if _, err := c.Get(ctx, "a", load("one", 60)); err != nil {
		t.Fatal(err)
	}
	v, r, ok := c.PeekRef("a")
	if !ok || v != "one" || r == nil {
		t.Fatalf("PeekRef = %v, %v, %v", v, r, ok)
	}
	hits := c.Stats().Hits
	if v, ok := c.Deref(r); !ok || v != "one" {
		t.Fatalf("Deref = %v, %v", v, ok)
	}
	if got := c.Stats().Hits; got != hits+1 {
		t.Errorf("Deref counted %d hits, want 1", got-hits)
	}
	// Uncounted: the caller counts its hits at once.
	if v, ok := c.DerefUncounted(r); !ok || v != "one" {
		t.Fatalf("DerefUncounted = %v, %v", v, ok)
	}
	if got := c.Stats().Hits; got != hits+1 {
		t.Errorf("DerefUncounted counted %d hits, want none", got-hits-1)
	}
	c.CountHits(3)
	c.CountHits(0)
	if got := c.Stats().Hits; got != hits+4 {
		t.Errorf("CountHits(3) counted %d hits", got-hits-1)
	}
	if v, ok := c.DerefUncounted(nil); ok || v != nil {
		t.Fatalf("DerefUncounted(nil) = %v, %v", v, ok)
	}

	// Evicted by a value that needs the room.
	if _, err := c.Get(ctx, "b", load("two", 60)); err != nil {
		t.Fatal(err)
	}
	if v, ok := c.Deref(r); ok {
		t.Fatalf("Deref of an evicted value = %v", v)
	}
	// Stored again: the old Ref still names nothing, a new one the value.
	if _, err := c.Get(ctx, "a", load("three", 60)); err != nil {
		t.Fatal(err)
	}
	if v, ok := c.Deref(r); ok {
		t.Fatalf("Deref of a Ref from before the key was stored again = %v", v)
	}
	_, r, _ = c.PeekRef("a")
	if v, ok := c.Deref(r); !ok || v != "three" {
		t.Fatalf("Deref of the new Ref = %v, %v", v, ok)
	}
	c.Remove("a")
	if v, ok := c.Deref(r); ok {
		t.Fatalf("Deref after Remove = %v", v)
	}
	if v, ok := c.DerefUncounted(r); ok {
		t.Fatalf("DerefUncounted after Remove = %v", v)
	}
	if _, err := c.Get(ctx, "a", load("four", 10)); err != nil {
		t.Fatal(err)
	}
	_, r, _ = c.PeekRef("a")
	c.Purge()
	if v, ok := c.Deref(r); ok {
		t.Fatalf("Deref after Purge = %v", v)
	}
}

// TestGetDetached: a detached load runs on its own goroutine; its first
// caller returns as soon as its ctx ends, while the load goes on for
// another caller, who gets its value (cached); a load every caller left is
// cancelled.
func TestGetDetached(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(1 << 20)
		ctx, cancel := context.WithCancel(context.Background())
		release := make(chan struct{})
		first := make(chan error, 1)
		go func() {
			_, err := c.GetDetached(ctx, "k", func(lctx context.Context) (any, int64, error) {
				select {
				case <-release:
					return 7, 8, nil
				case <-lctx.Done():
					return nil, 0, lctx.Err()
				}
			})
			first <- err
		}()
		synctest.Wait()
		second := make(chan any, 1)
		go func() {
			v, err := c.Get(context.Background(), "k", nil)
			if err != nil {
				v = err
			}
			second <- v
		}()
		synctest.Wait()
		cancel()
		if err := <-first; !errors.Is(err, context.Canceled) {
			t.Fatalf("the first caller got %v, want its cancellation at once", err)
		}
		close(release)
		if v := <-second; v != 7 {
			t.Fatalf("the waiter got %v, want the load's 7", v)
		}
		if v, ok := c.Peek("k"); !ok || v != 7 {
			t.Fatalf("not cached: %v %v", v, ok)
		}
		// Every caller leaves: the load is cancelled, nothing is left.
		ctx2, cancel2 := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := c.GetDetached(ctx2, "k2", func(lctx context.Context) (any, int64, error) {
				<-lctx.Done()
				return nil, 0, lctx.Err()
			})
			done <- err
		}()
		synctest.Wait()
		cancel2()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
		synctest.Wait() // the load's goroutine has ended (synctest fails on one left blocked)
	})
}

// TestLoaderGoexit: a load that ends its goroutine without returning or
// panicking (runtime.Goexit, as t.FailNow does) must still fail its
// waiters, not leave them waiting for a value that will never come, and
// must not leave the key in flight for later callers.
func TestLoaderGoexit(t *testing.T) {
	for _, detached := range []bool{false, true} {
		t.Run(fmt.Sprintf("detached=%v", detached), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := New(1 << 20)
				get := c.Get
				if detached {
					get = c.GetDetached
				}
				release := make(chan struct{})
				load := func(context.Context) (any, int64, error) {
					<-release
					runtime.Goexit()
					return "unreachable", 8, nil
				}
				const waiters = 3
				errs := make(chan error, waiters)
				firstDone := make(chan struct{})
				go func() {
					defer close(firstDone)
					_, err := get(context.Background(), "k", load)
					errs <- err
				}()
				synctest.Wait()
				for i := 1; i < waiters; i++ {
					go func() {
						_, err := get(context.Background(), "k", load)
						errs <- err
					}()
				}
				synctest.Wait()
				close(release)
				<-firstDone
				want := waiters - 1 // the goroutine that ran the load is gone
				if detached {
					want = waiters // the load ran on one of its own
				}
				for i := 0; i < want; i++ {
					select {
					case err := <-errs:
						if !errors.Is(err, ErrGoexit) || !strings.Contains(err.Error(), "without returning") {
							t.Fatalf("waiter %d: err = %v, want ErrGoexit", i, err)
						}
					case <-time.After(time.Minute):
						t.Fatalf("waiter %d is still waiting for a load whose goroutine exited", i)
					}
				}
				v, err := get(context.Background(), "k", func(context.Context) (any, int64, error) { return "ok", 8, nil })
				if err != nil || v != "ok" {
					t.Fatalf("Get after the exit: %v %v", v, err)
				}
			})
		})
	}
}

// TestBadSizes: a load that declares a negative size (a bug in a size
// computation, an overflow) must not be kept: counted as negative bytes
// it would let the cache hold more than its budget.
func TestBadSizes(t *testing.T) {
	ctx := context.Background()
	c := New(100)
	v, err := c.Get(ctx, "neg", func(context.Context) (any, int64, error) { return "n", -1 << 40, nil })
	if err != nil || v != "n" {
		t.Fatalf("Get: %v %v", v, err)
	}
	for i := range 5 {
		if _, err := c.Get(ctx, fmt.Sprint(i), func(context.Context) (any, int64, error) { return i, 60, nil }); err != nil {
			t.Fatal(err)
		}
	}
	st := c.Stats()
	if st.Bytes > st.Budget || st.Bytes < 0 || st.Items != 1 {
		t.Fatalf("after a negative size: %d bytes in %d items, budget %d", st.Bytes, st.Items, st.Budget)
	}
	if _, ok := c.Peek("neg"); ok {
		t.Fatal("a value of negative size was kept")
	}
}

// TestRemovalsReachLoadsInFlight: a value being loaded when its key is
// removed (Remove, RemovePrefix: a reopened store's old generation, or
// Purge) is handed to its callers but not kept: stored afterwards, it
// would be unreachable and hold its bytes, perhaps most of the budget (a
// long detached build), until it aged out, evicting live values first.
func TestRemovalsReachLoadsInFlight(t *testing.T) {
	for _, tc := range []struct {
		name   string
		remove func(c *Cache)
	}{
		{"RemovePrefix", func(c *Cache) { c.RemovePrefix("old\x00") }},
		{"Remove", func(c *Cache) { c.Remove("old\x00k") }},
		{"Purge", func(c *Cache) { c.Purge() }},
	} {
		for _, detached := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/detached=%v", tc.name, detached), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					c := New(100)
					get := c.Get
					if detached {
						get = c.GetDetached
					}
					live, err := c.Get(context.Background(), "new\x00k", func(context.Context) (any, int64, error) { return "live", 40, nil })
					if err != nil || live != "live" {
						t.Fatal(live, err)
					}
					release := make(chan struct{})
					got := make(chan any, 1)
					go func() {
						v, err := get(context.Background(), "old\x00k", func(context.Context) (any, int64, error) {
							<-release
							return "old", 80, nil
						})
						if err != nil {
							v = err
						}
						got <- v
					}()
					synctest.Wait()
					tc.remove(c)
					close(release)
					if v := <-got; v != "old" {
						t.Fatalf("the caller got %v, want the loaded value", v)
					}
					synctest.Wait()
					if v, ok := c.Peek("old\x00k"); ok {
						t.Fatalf("a value loaded across its key's removal was kept: %v", v)
					}
					if tc.name != "Purge" {
						if v, ok := c.Peek("new\x00k"); !ok || v != "live" {
							t.Fatalf("a live value was evicted for a removed one: %v %v", v, ok)
						}
					}
					// The key loads and keeps again once asked anew.
					if _, err := c.Get(context.Background(), "old\x00k", func(context.Context) (any, int64, error) { return "again", 10, nil }); err != nil {
						t.Fatal(err)
					}
					if v, ok := c.Peek("old\x00k"); !ok || v != "again" {
						t.Fatalf("after the removal, a new load was not kept: %v %v", v, ok)
					}
				})
			})
		}
	}
}

// TestConcurrentRemovalsAndPanics (run with -race): Gets, detached Gets,
// loads that fail, panic or run long, reservations and removals of every
// kind at once; afterwards the bytes counted are those of the values
// held, within the budget, nothing is reserved or in flight, and no
// caller was left waiting.
func TestConcurrentRemovalsAndPanics(t *testing.T) {
	const budget = 300
	c := New(budget)
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			for i := range 600 {
				k := (i*11 + g*7) % 41
				key := fmt.Sprintf("p%d\x00k%d", k%3, k)
				switch i % 10 {
				case 0:
					c.RemovePrefix(fmt.Sprintf("p%d\x00", (i+g)%3))
					continue
				case 1:
					c.Remove(key)
					continue
				case 2:
					if i%50 == 2 {
						c.Purge()
					}
					c.Reserve(25)
					c.Reserve(-25)
					continue
				}
				get := c.Get
				if i%3 == 0 {
					get = c.GetDetached
				}
				lctx, cancel := context.WithCancel(ctx)
				if i%7 == 0 {
					cancel() // leaves at once, or as the load runs
				}
				v, err := get(lctx, key, func(context.Context) (any, int64, error) {
					switch k % 9 {
					case 0:
						return nil, 0, errors.New("transient")
					case 1:
						panic("boom")
					}
					return k, int64(3 + k%40), nil
				})
				cancel()
				if err == nil && v != k {
					t.Errorf("Get(%q) = %v", key, v)
					return
				}
			}
		})
	}
	wg.Wait()
	c.mu.Lock()
	var sum int64
	for _, e := range c.lru.Values() {
		sum += e.size
	}
	inflight, bytes := len(c.inflight), c.bytes.Load() // a detached load may still store: read together
	c.mu.Unlock()
	if bytes != sum || bytes > budget || c.reserved.Load() != 0 || inflight != 0 {
		t.Fatalf("%d bytes counted, values held sum to %d, %d reserved, %d loads in flight", bytes, sum, c.reserved.Load(), inflight)
	}
}

// TestRetire: a retired prefix (a reopened store's old generation) is
// removed, and what is loaded under it afterwards — by requests still
// running on the old generation — goes to its callers without being kept,
// so it neither holds bytes nobody will ask for again nor evicts live
// values for them. Other prefixes keep working, and only the latest
// retiredKept prefixes are remembered (generations are never reused).
func TestRetire(t *testing.T) {
	ctx := context.Background()
	c := New(100)
	load := func(v string, size int64) func(context.Context) (any, int64, error) {
		return func(context.Context) (any, int64, error) { return v, size, nil }
	}
	for _, k := range []string{"s\x001\x00a", "s\x002\x00a"} {
		if _, err := c.Get(ctx, k, load(k, 40)); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.Retire("s\x001\x00"); n != 1 {
		t.Fatalf("retired %d values, want 1", n)
	}
	v, err := c.Get(ctx, "s\x001\x00b", load("straggler", 80))
	if err != nil || v != "straggler" {
		t.Fatalf("Get under a retired prefix: %v %v", v, err)
	}
	if _, ok := c.Peek("s\x001\x00b"); ok {
		t.Fatal("a value loaded under a retired prefix was kept")
	}
	if v, ok := c.Peek("s\x002\x00a"); !ok || v != "s\x002\x00a" {
		t.Fatalf("the live generation's value was evicted for a retired one: %v %v", v, ok)
	}
	if _, err := c.Get(ctx, "s\x002\x00b", load("live", 40)); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Peek("s\x002\x00b"); !ok {
		t.Fatal("a live generation's value was not kept")
	}
	for i := range retiredKept {
		c.Retire(fmt.Sprintf("t\x00%d\x00", i))
	}
	if _, err := c.Get(ctx, "s\x001\x00c", load("old", 10)); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Peek("s\x001\x00c"); !ok {
		t.Fatalf("after %d later retirements the first is still remembered", retiredKept)
	}
	var nilCache *Cache
	if nilCache.Retire("s") != 0 {
		t.Fatal("nil cache retired something")
	}
}

// TestRetiredPrefixInUseIsRemembered: past retiredKept retired prefixes,
// the one forgotten is the one least recently retired or matched by a
// load, not the first retired: a store's old generation that requests
// still load under stays retired while other stores reopen.
func TestRetiredPrefixInUseIsRemembered(t *testing.T) {
	ctx := context.Background()
	c := New(1 << 20)
	load := func(context.Context) (any, int64, error) { return "v", 10, nil }
	c.Retire("busy\x001\x00")
	for i := range retiredKept - 1 {
		c.Retire(fmt.Sprintf("other\x00%d\x00", i))
	}
	// A request still running on the busy generation loads under it ...
	if _, err := c.Get(ctx, "busy\x001\x00a", load); err != nil {
		t.Fatal(err)
	}
	// ... and one more store reopens, past what is remembered.
	c.Retire("late\x001\x00")
	if _, err := c.Get(ctx, "busy\x001\x00b", load); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Peek("busy\x001\x00b"); ok {
		t.Fatal("a retired prefix still loaded under was forgotten before ones unused since")
	}
	if _, err := c.Get(ctx, "other\x000\x00a", load); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Peek("other\x000\x00a"); !ok {
		t.Fatal("the least recently used retired prefix was not the one forgotten")
	}
}

// TestEveryGetCountedOnce: each Get is one hit, one miss or one
// deduplicated request, counted as its outcome is known: a caller whose
// ctx had ended before it could load is a miss (the cache had nothing for
// it), a waiter that gives up on a shared load is deduplicated (it caused
// no load). Before, a Get that found ctx ended was counted nowhere, and
// a waiter that reloaded after its load was abandoned counted twice.
func TestEveryGetCountedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := New(1 << 20)
		value := func(context.Context) (any, int64, error) { return 7, 8, nil }
		done, stop := context.WithCancel(context.Background())
		stop()
		if _, err := c.Get(done, "k", value); !errors.Is(err, context.Canceled) {
			t.Fatalf("Get with an ended ctx: %v", err)
		}
		// A waiter that leaves by its ctx while the load runs.
		release, first := firstAsker(context.Background(), c, func(context.Context) (any, int64, error) { return 7, 8, nil })
		wctx, leave := context.WithCancel(context.Background())
		left := make(chan error, 1)
		go func() {
			_, err := c.Get(wctx, "k", value)
			left <- err
		}()
		synctest.Wait()
		leave()
		if err := <-left; !errors.Is(err, context.Canceled) {
			t.Fatalf("the waiter that left got %v", err)
		}
		close(release)
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		if _, err := c.Get(context.Background(), "k", value); err != nil {
			t.Fatal(err)
		}
		if st := c.Stats(); st.Misses != 2 || st.Deduped != 1 || st.Hits != 1 {
			t.Fatalf("%+v, want 2 misses (the ended ctx, the load), 1 deduplicated (the waiter that left), 1 hit", st)
		}
	})
}
