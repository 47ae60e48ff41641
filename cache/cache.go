// Package cache is a byte-budgeted LRU with in-flight deduplication: the
// first caller of a missing key loads it, concurrent callers of the same
// key wait for that load, and the value is kept while the sum of declared
// sizes stays within the budget. Load errors are not cached; a load that
// panics fails its callers with a *PanicError and leaves the cache working.
//
// The budget is the process's memory for data, shared with what its users
// hold outside the cache (a server's answers being written): Reserve
// counts such bytes against it, and the cache keeps only what fits beside
// them.
//
// The recency order comes from hashicorp/golang-lru/v2 (unbounded in
// count); eviction by bytes is done here, oldest first.
package cache

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"

	lru "github.com/hashicorp/golang-lru/v2/simplelru"
)

// ErrPanic is matched (errors.Is) by every *PanicError.
var ErrPanic = errors.New("panic")

// PanicError is what the callers of a load that panicked get: the load runs
// on the cache's own goroutine, where a panic would kill the process, so it
// is recovered there and delivered like any other load error.
type PanicError struct {
	Value any    // what the load panicked with
	Stack []byte // the panicking goroutine's stack, for the log

	reported atomic.Bool
}

// FirstReport is true for exactly one call: every waiter of a load gets
// the same *PanicError, and it should be logged once.
func (e *PanicError) FirstReport() bool { return e.reported.CompareAndSwap(false, true) }

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

func (e *PanicError) Is(t error) bool { return t == ErrPanic }

// NewPanicError captures the current goroutine's stack: call it from the
// deferred function that recovered v.
func NewPanicError(v any) *PanicError { return &PanicError{Value: v, Stack: debug.Stack()} }

// Stats are cumulative counters and current occupancy.
type Stats struct {
	Hits, Misses, Evictions, Deduped int64
	Bytes, Items, Budget             int64
	Reserved                         int64 // held outside the cache (see Reserve)
}

// Cache is safe for concurrent use. A nil *Cache loads every time.
type Cache struct {
	budget int64

	mu       sync.Mutex
	lru      *lru.LRU[string, entry]
	bytes    int64
	reserved int64         // see Reserve
	room     chan struct{} // closed at the next release; nil until Room waits
	inflight map[string]*call

	hits, misses, evictions, deduped atomic.Int64
}

type entry struct {
	v    any
	size int64
}

type call struct {
	done    chan struct{}
	v       any
	err     error
	waiters int
	cancel  context.CancelFunc
}

// New returns a cache holding at most budget bytes of values.
func New(budget int64) *Cache {
	c := &Cache{budget: budget, inflight: map[string]*call{}}
	l, err := lru.NewLRU[string, entry](1<<62, func(_ string, e entry) {
		// Called with c.mu held (from Add/RemoveOldest/Remove/Purge).
		c.bytes -= e.size
	})
	if err != nil {
		panic(err) // only for a non-positive size, which 1<<62 is not
	}
	c.lru = l
	return c
}

// Get returns the value for key, loading it with load on a miss. Concurrent
// Gets of one key share a single load. A caller whose ctx ends stops
// waiting at once; the load is cancelled when no caller waits any more.
func (c *Cache) Get(ctx context.Context, key string, load func(ctx context.Context) (any, int64, error)) (any, error) {
	if c == nil {
		v, _, err := safeLoad(ctx, load)
		return v, err
	}
	c.mu.Lock()
	if e, ok := c.lru.Get(key); ok {
		c.mu.Unlock()
		c.hits.Add(1)
		return e.v, nil
	}
	if cl, ok := c.inflight[key]; ok {
		cl.waiters++
		c.mu.Unlock()
		c.deduped.Add(1)
		return c.wait(ctx, key, cl)
	}
	c.misses.Add(1)
	// The load runs detached from the first caller's cancellation so that
	// other waiters are not failed by it; it is cancelled when the last
	// waiter leaves.
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	cl := &call{done: make(chan struct{}), waiters: 1, cancel: cancel}
	c.inflight[key] = cl
	c.mu.Unlock()
	go func() {
		v, size, err := safeLoad(lctx, load)
		cancel()
		c.mu.Lock()
		if c.inflight[key] == cl {
			delete(c.inflight, key)
		}
		if err == nil && size <= c.budget-c.reserved {
			c.lru.Remove(key) // a Remove/Purge race may have left one; its callback fixes bytes
			c.lru.Add(key, entry{v, size})
			c.bytes += size
			c.fit()
		}
		cl.v, cl.err = v, err
		c.mu.Unlock()
		close(cl.done)
	}()
	return c.wait(ctx, key, cl)
}

// safeLoad runs load, turning a panic into a *PanicError: on the cache's
// goroutine nothing else could recover it, and every waiter must be told.
func safeLoad(ctx context.Context, load func(ctx context.Context) (any, int64, error)) (v any, size int64, err error) {
	defer func() {
		if r := recover(); r != nil {
			v, size, err = nil, 0, NewPanicError(r)
		}
	}()
	return load(ctx)
}

func (c *Cache) wait(ctx context.Context, key string, cl *call) (any, error) {
	select {
	case <-cl.done:
		return cl.v, cl.err
	case <-ctx.Done():
		c.mu.Lock()
		cl.waiters--
		if cl.waiters == 0 {
			// Nobody waits any more: stop the load, and let the next caller
			// start a fresh one instead of joining a cancelled load.
			cl.cancel()
			if c.inflight[key] == cl {
				delete(c.inflight, key)
			}
		}
		c.mu.Unlock()
		return nil, ctx.Err()
	}
}

// fit evicts the oldest values until values and reservations fit the
// budget; c.mu is held.
func (c *Cache) fit() {
	for c.bytes > 0 && c.bytes+c.reserved > c.budget {
		if _, _, ok := c.lru.RemoveOldest(); !ok {
			break
		}
		c.evictions.Add(1)
	}
}

// Reserve counts n bytes held outside the cache against its budget (a
// negative n releases them): cached values are evicted, oldest first,
// until they fit beside all that is reserved, and while reservations fill
// the budget no loaded value is kept. Reservations may exceed the budget;
// callers that must bound them wait for Room first.
func (c *Cache) Reserve(n int64) {
	if c == nil || n == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reserved += n
	if n > 0 {
		c.fit()
		return
	}
	if c.room != nil {
		close(c.room)
		c.room = nil
	}
}

// Room returns nil while less than limit bytes are reserved, and otherwise
// a channel that is closed at the next release (the caller then asks
// again).
func (c *Cache) Room(limit int64) <-chan struct{} {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reserved < limit {
		return nil
	}
	if c.room == nil {
		c.room = make(chan struct{})
	}
	return c.room
}

// Remove drops key.
func (c *Cache) Remove(key string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.lru.Remove(key)
	c.mu.Unlock()
}

// Peek returns a cached value without loading, counting a hit when it is
// there. Hot paths use it to skip building a load closure (and, in the
// reader, a goroutine) for data already in memory.
func (c *Cache) Peek(key string) (any, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	e, ok := c.lru.Get(key)
	c.mu.Unlock()
	if ok {
		c.hits.Add(1)
	}
	return e.v, ok
}

// RemovePrefix drops every key that starts with prefix and reports how
// many went: a reopened store's old generation is unreachable, and its
// bytes should not wait for the LRU to age them out.
func (c *Cache) RemovePrefix(prefix string) int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, k := range c.lru.Keys() {
		if strings.HasPrefix(k, prefix) {
			c.lru.Remove(k)
			n++
		}
	}
	return n
}

// Purge drops everything.
func (c *Cache) Purge() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.lru.Purge()
	c.mu.Unlock()
}

// Stats reports counters and occupancy.
func (c *Cache) Stats() Stats {
	if c == nil {
		return Stats{}
	}
	c.mu.Lock()
	b, n, r := c.bytes, int64(c.lru.Len()), c.reserved
	c.mu.Unlock()
	return Stats{Hits: c.hits.Load(), Misses: c.misses.Load(), Evictions: c.evictions.Load(), Deduped: c.deduped.Load(),
		Bytes: b, Items: n, Budget: c.budget, Reserved: r}
}
