package storage

import (
	"sync/atomic"
	"time"
)

// Workers runs functions on goroutines that, done with one, wait up to
// a linger time for the next before they end. A burst of short calls (a
// cold query's file reads, two a chunk) then reuses a few goroutines,
// and the stacks they have grown, instead of starting and growing one a
// call. No call ever waits for another: one that finds no idle goroutine
// starts its own, as a plain go statement would, so a call that blocks
// (a hung network file system) holds only its goroutine.
type Workers struct {
	linger time.Duration
	work   chan func()
	// idle counts the goroutines waiting for work that no caller has
	// claimed: a caller that claims one (takes the count down) hands it
	// its function, and a goroutine whose linger ends leaves only by
	// taking the count down itself; when it cannot, a caller has claimed
	// it and its function is on the way.
	idle atomic.Int64
	live atomic.Int64 // goroutines started and not ended
}

// NewWorkers is a Workers whose idle goroutines end after linger.
func NewWorkers(linger time.Duration) *Workers {
	return &Workers{linger: linger, work: make(chan func())}
}

// Go runs f on an idle goroutine, or on a new one if none is idle. f must
// not panic (as for a go statement, nothing recovers it).
func (w *Workers) Go(f func()) {
	for {
		n := w.idle.Load()
		if n == 0 {
			w.live.Add(1)
			go w.run(f)
			return
		}
		if w.idle.CompareAndSwap(n, n-1) {
			w.work <- f // a waiting goroutine is claimed: it receives
			return
		}
	}
}

func (w *Workers) run(f func()) {
	defer w.live.Add(-1)
	t := time.NewTimer(w.linger)
	defer t.Stop()
	for {
		f()
		f = nil // not held while waiting
		t.Reset(w.linger)
		w.idle.Add(1)
		select {
		case f = <-w.work:
			continue
		case <-t.C:
		}
		for {
			n := w.idle.Load()
			if n == 0 {
				// Every waiting goroutine is claimed, this one too.
				f = <-w.work
				break
			}
			if w.idle.CompareAndSwap(n, n-1) {
				return
			}
		}
	}
}
