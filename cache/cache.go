// Package cache is a byte-budgeted LRU with in-flight deduplication: the
// first caller of a missing key loads it, concurrent callers of the same
// key wait for that load, and the value is kept while the sum of declared
// sizes stays within the budget. Load errors are not cached; a load that
// panics fails its callers with a *PanicError, one that ends its goroutine
// (runtime.Goexit) fails them with ErrGoexit, and either leaves the cache
// working.
//
// The budget is the process's memory for data, shared with what its users
// hold outside the cache (a server's answers being written): Reserve
// counts such bytes against it, and the cache keeps only what fits beside
// them.
//
// The recency order comes from hashicorp/golang-lru/v2 (unbounded in
// count); eviction by bytes is done here, oldest first. Hits take no lock
// (see Cache).
package cache

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"

	lru "github.com/hashicorp/golang-lru/v2/simplelru"
)

// ErrPanic is matched (errors.Is) by every *PanicError.
var ErrPanic = errors.New("panic")

// ErrGoexit is what the waiters of a load get when the load ended its
// goroutine without returning or panicking (runtime.Goexit, as
// testing.T.FailNow does): they would otherwise wait for it forever.
var ErrGoexit = errors.New("cache: load ended its goroutine without returning (runtime.Goexit)")

// PanicError is what the callers of a load that panicked get: the load runs
// for every caller waiting on it, so its panic is recovered and delivered
// to each like any other load error.
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

// Stats are cumulative counters and current occupancy. Each Get is
// counted once, when its outcome is known, as exactly one of: a hit (the
// value was stored), a miss (nothing stored nor loading for it: it loaded,
// or its ctx had ended), or Deduped (it was given, or gave up waiting
// for, another caller's load). A waiter whose shared load was abandoned
// and that loads again counts only as what its retry ends as.
type Stats struct {
	Hits, Misses, Evictions, Deduped int64
	Bytes, Items, Budget             int64
	Reserved                         int64 // held outside the cache (see Reserve)
}

// Cache is safe for concurrent use. A nil *Cache loads every time.
//
// A hit takes no lock and, once warm, writes only one of several padded
// hit counters (chosen at random, so cores rarely share one). Values are
// found in a read-mostly index: an immutable map published through an
// atomic pointer, rebuilt from the LRU (under c.mu) once lookups have had
// to take the lock for keys stored since about a quarter as many times as
// the cache holds values. Recency is sampled: a hit stamps its entry with
// the current epoch only when the stamp differs, and the epoch advances
// once per stored value. The recency order itself (the LRU list) changes
// only under c.mu, when a value is stored, removed or evicted: eviction
// takes the oldest entry of the list and, when it was hit since it took
// its place, moves it to the front instead (a second chance). A value not
// hit since it was stored therefore goes before one that was, as in an
// LRU, but all hits between two stores are one moment, and a value moved
// to the front passes those stored between its hit and the move.
type Cache struct {
	budget int64

	read atomic.Pointer[readIndex]

	mu       sync.Mutex
	lru      *lru.LRU[string, *entry] // every value held, in recency order
	room     chan struct{}            // closed at the next release; nil until Room waits
	inflight map[string]*call
	slow     int // lookups that took mu since read was rebuilt
	// retired holds the prefixes retired (see Retire), each with the tick
	// it was retired or last matched a load; retiredLen counts them by
	// length, so that a key is checked with a lookup per length, not a
	// scan of every prefix.
	retired     map[string]uint64
	retiredLen  map[int]int
	retiredTick uint64

	epoch    atomic.Uint64 // advanced each time a value is stored
	bytes    atomic.Int64  // sizes of the values held; written under mu
	reserved atomic.Int64  // see Reserve
	waiting  atomic.Bool   // room != nil: a release must close it

	hits                       [hitStripes]stripe
	misses, evictions, deduped atomic.Int64
}

// readIndex is the lock-free index: m holds the entries the LRU held when
// it was built (those removed since have a nil value), amended says the
// LRU has gained keys since.
type readIndex struct {
	m       map[string]*entry
	amended bool
}

// hitStripes counters spread hits over cache lines, so cores counting
// hits at once do not contend for one.
const hitStripes = 32

type stripe struct {
	n atomic.Int64
	_ [120]byte // a counter per 128 bytes (two cache lines: adjacent-line prefetch)
}

type entry struct {
	// val is the value, nil once the entry left the cache: the read
	// index may still name it, and must not keep the value alive.
	val  atomic.Pointer[any]
	size int64
	used atomic.Uint64 // epoch of the latest hit; 0: none
	// placed is the epoch in which the entry took its place at the front
	// of the order (under mu): used > placed is a hit since. Hits in the
	// epoch of a placement are one moment with it.
	placed uint64
}

type call struct {
	done    chan struct{}
	v       any
	err     error
	waiters int
	cancel  context.CancelFunc
	// abandoned: the load failed after its first caller's ctx ended (see
	// finish); waiters still waiting load again.
	abandoned bool
	// dropped: its key was removed while it loaded (see dropLoads); c.mu
	// guards it.
	dropped bool
}

// touch records a hit: a store only when the epoch moved since the last
// one, so repeated hits read shared memory and write none. A hit after
// the epoch's first reads c.epoch, e.used and a counter stripe, and
// writes only the stripe.
func (c *Cache) touch(e *entry) {
	c.stamp(e)
	c.hits[rand.Uint32()%hitStripes].n.Add(1)
}

// stamp is touch without counting the hit.
func (c *Cache) stamp(e *entry) {
	if t := c.epoch.Load(); e.used.Load() != t {
		e.used.Store(t)
	}
}

// New returns a cache holding at most budget bytes of values.
func New(budget int64) *Cache {
	c := &Cache{budget: budget, inflight: map[string]*call{}}
	l, err := lru.NewLRU[string, *entry](1<<62, func(_ string, e *entry) {
		// Called with c.mu held (from Add/RemoveOldest/Remove/Purge).
		c.bytes.Add(-e.size)
		e.val.Store(nil)
	})
	if err != nil {
		panic(err) // only for a non-positive size, which 1<<62 is not
	}
	c.lru = l
	c.read.Store(&readIndex{})
	return c
}

// lookup finds key without a lock when the read index has it, and
// otherwise, when keys were stored since it was built, under c.mu.
func (c *Cache) lookup(key string) (any, *entry, bool) {
	r := c.read.Load()
	if e := r.m[key]; e != nil {
		if p := e.val.Load(); p != nil {
			c.touch(e)
			return *p, e, true
		}
	}
	if !r.amended {
		return nil, nil, false
	}
	c.mu.Lock()
	v, e, ok := c.lockedLookup(key)
	c.mu.Unlock()
	return v, e, ok
}

// lockedLookup looks key up in the LRU, which holds every value, and
// rebuilds the read index once such lookups have cost enough; c.mu is
// held.
func (c *Cache) lockedLookup(key string) (any, *entry, bool) {
	e, ok := c.lru.Peek(key)
	if c.slow++; c.slow > c.lru.Len()/4+16 {
		c.rebuild()
	}
	if !ok {
		return nil, nil, false
	}
	c.touch(e)
	return *e.val.Load(), e, true
}

// rebuild publishes a read index of every value held; c.mu is held. Its
// cost, one map entry per value, is paid for by the locked lookups that
// triggered it (at least a quarter as many), or by the removal of many.
func (c *Cache) rebuild() {
	keys, vals := c.lru.Keys(), c.lru.Values()
	m := make(map[string]*entry, len(keys))
	for i, k := range keys {
		m[k] = vals[i]
	}
	c.read.Store(&readIndex{m: m})
	c.slow = 0
}

// Get returns the value for key, loading it with load on a miss. Concurrent
// Gets of one key share a single load, which runs on the first caller's
// goroutine under that caller's ctx: a caller never outlives its own
// deadline for the sake of others. A later caller whose ctx ends stops
// waiting at once; when the first caller's ctx ends, its load is cancelled
// and the callers still waiting start it again (one of them loads, the
// others wait for that one), so none is failed by another's cancellation.
func (c *Cache) Get(ctx context.Context, key string, load func(ctx context.Context) (any, int64, error)) (any, error) {
	return c.get(ctx, key, load, false)
}

// GetDetached is Get for a load that may take long (one that reads many
// objects to build one value): it runs on a goroutine of its own, detached
// from every caller, goes on while any caller waits and is cancelled when
// the last leaves. Each caller, the first too, stops waiting when its ctx
// ends, so a build longer than one request's deadline still completes
// while requests keep asking for it, and none is held past its deadline.
func (c *Cache) GetDetached(ctx context.Context, key string, load func(ctx context.Context) (any, int64, error)) (any, error) {
	return c.get(ctx, key, load, true)
}

func (c *Cache) get(ctx context.Context, key string, load func(ctx context.Context) (any, int64, error), detached bool) (any, error) {
	if c == nil {
		v, _, err := safeLoad(ctx, load)
		return v, err
	}
	for {
		if v, _, ok := c.lookup(key); ok {
			return v, nil
		}
		c.mu.Lock()
		if v, _, ok := c.lockedLookup(key); ok { // stored since the lookup
			c.mu.Unlock()
			return v, nil
		}
		if cl, ok := c.inflight[key]; ok {
			cl.waiters++
			c.mu.Unlock()
			v, again, err := c.wait(ctx, key, cl)
			if again {
				// Its first caller left: load it afresh. Counted by what
				// this pass ends as (a hit, a miss or a dedup), not twice.
				continue
			}
			c.deduped.Add(1)
			return v, err
		}
		// A miss, whether this call loads or its ctx has already ended.
		c.misses.Add(1)
		if err := ctx.Err(); err != nil {
			c.mu.Unlock()
			return nil, err // nobody would wait for the load
		}
		if detached {
			lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
			cl := &call{done: make(chan struct{}), waiters: 1, cancel: cancel}
			c.inflight[key] = cl
			c.mu.Unlock()
			go c.finish(key, cl, context.Background(), lctx, load)
			v, _, err := c.wait(ctx, key, cl) // never abandoned: nothing to load again
			return v, err
		}
		// The load runs on this goroutine (a goroutine of its own would be
		// a hand-off each way, each waiting for a core), under this
		// caller's ctx: this goroutine returns when the load does, so a
		// load that outlived ctx (other waiters keeping it alive, a backend
		// that hangs) would hold this caller past its deadline.
		lctx, cancel := context.WithCancel(ctx)
		cl := &call{done: make(chan struct{}), waiters: 1, cancel: cancel}
		c.inflight[key] = cl
		c.mu.Unlock()
		left := context.AfterFunc(ctx, func() { c.leave(key, cl) })
		c.finish(key, cl, ctx, lctx, load)
		if !left() {
			// This caller left while the load ran, as a waiter whose ctx
			// ends does: its answer is ctx's error (a value found after a
			// cancellation would be an answer the caller's reads should
			// not have reached).
			return nil, ctx.Err()
		}
		return cl.v, cl.err
	}
}

// finish runs the first asker's load, stores its value and hands it to
// every waiter.
func (c *Cache) finish(key string, cl *call, ctx, lctx context.Context, load func(ctx context.Context) (any, int64, error)) {
	returned := false
	defer func() {
		if returned {
			return
		}
		// The load ended this goroutine (runtime.Goexit): nothing
		// recovers that, so its waiters are told here, as the goroutine
		// unwinds, and the key is free to load again.
		cl.cancel()
		c.mu.Lock()
		if c.inflight[key] == cl {
			delete(c.inflight, key)
		}
		cl.err = ErrGoexit
		c.mu.Unlock()
		close(cl.done)
	}()
	v, size, err := safeLoad(lctx, load)
	returned = true
	cl.cancel()
	// A load that failed once its first caller had left (its ctx ended)
	// failed for that caller alone: the others load it again.
	abandoned := err != nil && ctx.Err() != nil
	c.mu.Lock()
	if c.inflight[key] == cl {
		delete(c.inflight, key)
	}
	// A negative size (a bug in its computation) would count as room
	// made, letting the cache outgrow its budget: such a value is
	// handed out but not kept.
	if err == nil && !cl.dropped && size >= 0 && size <= c.budget-c.reserved.Load() && !c.isRetired(key) {
		c.store(key, v, size)
	}
	cl.v, cl.err, cl.abandoned = v, err, abandoned
	c.mu.Unlock()
	close(cl.done)
}

// store adds a loaded value at the front of the order, in a new epoch,
// after evicting what would no longer fit; c.mu is held.
func (c *Cache) store(key string, v any, size int64) {
	c.lru.Remove(key) // a Remove/Purge race may have left one; its callback fixes bytes
	c.fit(size)
	t := c.epoch.Load() + 1
	e := &entry{size: size, placed: t}
	e.val.Store(&v)
	c.lru.Add(key, e)
	c.epoch.Store(t)
	if r := c.read.Load(); !r.amended {
		c.read.Store(&readIndex{m: r.m, amended: true})
	}
	c.bytes.Add(size)
}

// safeLoad runs load, turning a panic into a *PanicError: every waiter
// must be told, not only the caller that ran it.
func safeLoad(ctx context.Context, load func(ctx context.Context) (any, int64, error)) (v any, size int64, err error) {
	defer func() {
		if r := recover(); r != nil {
			v, size, err = nil, 0, NewPanicError(r)
		}
	}()
	return load(ctx)
}

// wait waits for cl's load; again: it was abandoned by its first caller
// while this one's ctx lives, which must load it afresh.
func (c *Cache) wait(ctx context.Context, key string, cl *call) (v any, again bool, err error) {
	select {
	case <-cl.done:
		if cl.abandoned && ctx.Err() == nil {
			return nil, true, nil
		}
		return cl.v, false, cl.err
	case <-ctx.Done():
		c.leave(key, cl)
		return nil, false, ctx.Err()
	}
}

// leave stops a caller waiting for cl: when it was the last, the load is
// cancelled and the next caller starts a fresh one instead of joining a
// cancelled load.
func (c *Cache) leave(key string, cl *call) {
	c.mu.Lock()
	cl.waiters--
	if cl.waiters == 0 {
		cl.cancel()
		if c.inflight[key] == cl {
			delete(c.inflight, key)
		}
	}
	c.mu.Unlock()
}

// fit evicts the oldest values until they, need more bytes and the
// reservations fit the budget; c.mu is held. An entry hit since it took
// its place moves to the front instead, in the current epoch (the epoch
// moves only under c.mu, so no hit during fit counts as one since the
// move, and the loop ends).
func (c *Cache) fit(need int64) {
	for c.bytes.Load() > 0 && c.bytes.Load()+need+c.reserved.Load() > c.budget {
		k, e, ok := c.lru.GetOldest()
		if !ok {
			break
		}
		if e.used.Load() > e.placed {
			e.placed = c.epoch.Load()
			c.lru.Get(k) // to the front
			continue
		}
		c.lru.RemoveOldest()
		c.evictions.Add(1)
	}
}

// Reserve counts n bytes held outside the cache against its budget (a
// negative n releases them): cached values are evicted, oldest first,
// until they fit beside all that is reserved, and while reservations fill
// the budget no loaded value is kept. Reservations may exceed the budget;
// callers that must bound them wait for Room first. Answers reserve and
// release as they start, grow and end, so neither takes the lock unless
// something must be evicted or someone waits for room.
func (c *Cache) Reserve(n int64) {
	if c == nil || n == 0 {
		return
	}
	r := c.reserved.Add(n)
	if n > 0 {
		if c.bytes.Load()+r > c.budget {
			c.mu.Lock()
			c.fit(0)
			c.mu.Unlock()
		}
		return
	}
	// A waiter in Room sets waiting before it reads reserved again, so
	// either it sees this release or this sees it waiting.
	if c.waiting.Load() {
		c.mu.Lock()
		if c.room != nil {
			close(c.room)
			c.room = nil
			c.waiting.Store(false)
		}
		c.mu.Unlock()
	}
}

// Room returns nil while less than limit bytes are reserved, and otherwise
// a channel that is closed at the next release (the caller then asks
// again).
func (c *Cache) Room(limit int64) <-chan struct{} {
	if c == nil || c.reserved.Load() < limit {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.room == nil {
		c.room = make(chan struct{})
		c.waiting.Store(true)
	}
	if c.reserved.Load() < limit { // released meanwhile
		return nil
	}
	return c.room
}

// Remove drops key, and a value for it being loaded (see dropLoads).
func (c *Cache) Remove(key string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.lru.Remove(key)
	c.dropLoads(func(k string) bool { return k == key })
	c.mu.Unlock()
}

// dropLoads keeps the loads in flight of the keys that match from storing
// their values, which go to their callers alone, and lets later callers
// of those keys load afresh; c.mu is held. A removal reaches loads in
// flight too: a value stored after its key's removal would be one the
// removal meant to drop (of a reopened store's old generation, nobody
// asks for it again), holding its bytes until it aged out.
func (c *Cache) dropLoads(match func(key string) bool) {
	for k, cl := range c.inflight {
		if match(k) {
			cl.dropped = true
			delete(c.inflight, k)
		}
	}
}

// Peek returns a cached value without loading, counting a hit when it is
// there. Hot paths use it to skip building a load closure (and, in the
// reader, a goroutine) for data already in memory. It takes no lock.
func (c *Cache) Peek(key string) (any, bool) {
	if c == nil {
		return nil, false
	}
	v, _, ok := c.lookup(key)
	return v, ok
}

// Ref names one cached value, so that a hot path that looks the same key
// up on every request finds it again without hashing the key (see
// Deref). It keeps no value alive: once the value leaves the cache, the
// Ref names nothing, and a later Peek of the key gives a new one.
type Ref struct{ e *entry }

// PeekRef is Peek that also returns a Ref to the value found (nil when
// none is).
func (c *Cache) PeekRef(key string) (any, *Ref, bool) {
	if c == nil {
		return nil, nil, false
	}
	v, e, ok := c.lookup(key)
	if !ok {
		return nil, nil, false
	}
	return v, &Ref{e: e}, true
}

// Deref returns the value r names while it is still cached, counting a
// hit as Peek does; r may be nil.
func (c *Cache) Deref(r *Ref) (any, bool) {
	v, ok := c.DerefUncounted(r)
	if ok {
		c.CountHits(1)
	}
	return v, ok
}

// DerefUncounted is Deref that leaves the hit for the caller to count
// (CountHits): a request finding hundreds of small chunks pays for one
// counter write, not one per chunk. Recency is stamped as Deref does.
func (c *Cache) DerefUncounted(r *Ref) (any, bool) {
	if c == nil || r == nil {
		return nil, false
	}
	p := r.e.val.Load()
	if p == nil {
		return nil, false
	}
	c.stamp(r.e)
	return *p, true
}

// CountHits counts n hits that DerefUncounted found.
func (c *Cache) CountHits(n int) {
	if c == nil || n <= 0 {
		return
	}
	c.hits[rand.Uint32()%hitStripes].n.Add(int64(n))
}

// RemovePrefix drops every key that starts with prefix and reports how
// many went: a reopened store's old generation is unreachable, and its
// bytes should not wait for the LRU to age them out. Loads of such keys
// in flight hand their values to their callers without keeping them.
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
	c.dropLoads(func(k string) bool { return strings.HasPrefix(k, prefix) })
	if n > 0 {
		c.rebuild() // the read index would keep the removed keys until the next rebuild
	}
	return n
}

// retiredKept is how many retired prefixes are remembered. The stores of
// a folder share the cache, and a rewrite of the folder reopens them all
// at once, so the bound counts every store's generations together: a
// prefix is forgotten, least recently retired or matched first, only once
// this many others have been since — far more than the stores one
// rewrite reopens while a request runs. Each costs its key's bytes.
const retiredKept = 1024

// Retire is RemovePrefix for a prefix nobody will ask for again once the
// requests still running under it end (a reopened store's old
// generation): besides what is held and being loaded, what those requests
// load later is handed to them without being kept — it would hold bytes,
// and evict live values for them, until it aged out. The latest
// retiredKept prefixes to be retired or to match a load are remembered
// (generations are never reused).
func (c *Cache) Retire(prefix string) int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	if c.retired == nil {
		c.retired, c.retiredLen = map[string]uint64{}, map[int]int{}
	}
	if _, ok := c.retired[prefix]; !ok {
		if len(c.retired) == retiredKept {
			c.forgetRetired()
		}
		c.retiredLen[len(prefix)]++
	}
	c.retiredTick++
	c.retired[prefix] = c.retiredTick
	c.mu.Unlock()
	return c.RemovePrefix(prefix)
}

// forgetRetired forgets the retired prefix least recently retired or
// matched; c.mu is held.
func (c *Cache) forgetRetired() {
	oldest, at := "", uint64(0)
	for p, t := range c.retired {
		if oldest == "" || t < at {
			oldest, at = p, t
		}
	}
	delete(c.retired, oldest)
	if c.retiredLen[len(oldest)]--; c.retiredLen[len(oldest)] == 0 {
		delete(c.retiredLen, len(oldest))
	}
}

// isRetired reports whether key is under a retired prefix, and marks that
// prefix used; c.mu is held.
func (c *Cache) isRetired(key string) bool {
	for n := range c.retiredLen {
		if n > len(key) {
			continue
		}
		if _, ok := c.retired[key[:n]]; ok {
			c.retiredTick++
			c.retired[key[:n]] = c.retiredTick
			return true
		}
	}
	return false
}

// Purge drops everything, loads in flight included (see dropLoads).
func (c *Cache) Purge() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.lru.Purge()
	c.rebuild()
	c.dropLoads(func(string) bool { return true })
	c.mu.Unlock()
}

// Stats reports counters and occupancy.
func (c *Cache) Stats() Stats {
	if c == nil {
		return Stats{}
	}
	c.mu.Lock()
	b, n := c.bytes.Load(), int64(c.lru.Len())
	c.mu.Unlock()
	var hits int64
	for i := range c.hits {
		hits += c.hits[i].n.Load()
	}
	return Stats{Hits: hits, Misses: c.misses.Load(), Evictions: c.evictions.Load(), Deduped: c.deduped.Load(),
		Bytes: b, Items: n, Budget: c.budget, Reserved: c.reserved.Load()}
}
