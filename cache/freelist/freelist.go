// Package freelist keeps a few large, reusable values across garbage
// collections. A sync.Pool alone is emptied by every other collection, so
// a server whose live heap is small (its cache just emptied) collects
// every query or two and allocates, zeroes and page-faults its answer
// buffers again each time. A List holds a fixed number of values that no
// collection takes, and passes the rest to a sync.Pool as before.
package freelist

import "sync"

// List is a free list of at most n values (Init) kept whatever the
// collector does, in front of a sync.Pool for those it has no room for.
// Its zero value keeps none of its own: it is the sync.Pool alone.
//
// It is a stack: Get hands back the value put last, the one most likely
// still in a core's cache (a 512 KiB body buffer taken in turn from a
// queue of four would be cold in the cache every time).
//
// A value is handed out to one caller at a time as long as each value got
// is put back at most once, by the caller that got it, when nothing reads
// or writes it any more: the List cannot see a value put back twice.
// What a value may hold when put back (the "too large to keep" rules)
// is the caller's to check: the List bounds the count, not the size.
type List[T any] struct {
	mu    sync.Mutex
	stack []T // len ≤ cap, the most kept
	pool  sync.Pool
}

// Init makes l keep up to n values of its own. Call it before l is used
// (it is not safe beside Get or Put).
func (l *List[T]) Init(n int) {
	l.stack = make([]T, 0, n)
}

// Get takes a value from the list, ok false when it holds none.
func (l *List[T]) Get() (v T, ok bool) {
	l.mu.Lock()
	if n := len(l.stack); n > 0 {
		v = l.stack[n-1]
		var zero T
		l.stack[n-1] = zero // the slot no longer keeps it
		l.stack = l.stack[:n-1]
		l.mu.Unlock()
		return v, true
	}
	l.mu.Unlock()
	v, ok = l.pool.Get().(T)
	return v, ok
}

// Put gives v back: kept by the list while it has room, else left to the
// sync.Pool (which the collector empties).
func (l *List[T]) Put(v T) {
	l.mu.Lock()
	if len(l.stack) < cap(l.stack) {
		l.stack = append(l.stack, v)
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	l.pool.Put(v)
}

// PutPooled gives v to the sync.Pool alone: a value worth reusing until
// the next collection but too large to keep longer.
func (l *List[T]) PutPooled(v T) {
	l.pool.Put(v)
}
