package zvf

import (
	"context"
	"sync"
	"sync/atomic"
)

// builds runs a store's background work (the level tables' builds) off
// the request path. Its work ends with its context, which stop cancels
// (the store's version retired, or Close), and close waits for it: no
// goroutine of it outlives Close.
type builds struct {
	mu     sync.Mutex
	ctx    context.Context
	cancel context.CancelFunc
	closed bool
	wg     sync.WaitGroup
	// running counts the work under way (a retired version's store is
	// kept for Close only while it has some).
	running atomic.Int64
}

func (b *builds) init() { b.ctx, b.cancel = context.WithCancel(context.Background()) }

// start runs f on a goroutine of its own under b's context, unless b is
// stopped (then it reports false and f never runs).
func (b *builds) start(f func(ctx context.Context)) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.wg.Add(1)
	b.running.Add(1)
	go func() {
		defer b.wg.Done()
		defer b.running.Add(-1)
		f(b.ctx)
	}()
	return true
}

// stop ends the running work's context and starts no more; it does not
// wait (a retirement runs under the handle's lock, in a request).
func (b *builds) stop() {
	b.mu.Lock()
	b.closed = true
	b.cancel()
	b.mu.Unlock()
}

// close is stop, then waits for the work to end.
func (b *builds) close() {
	b.stop()
	b.wg.Wait()
}

// Close ends the store's background work (level-table builds under way)
// and waits for it. The store still answers after Close, from its chunks
// (no table is built any more); Close may be called more than once.
func (s *Store) Close() error {
	s.builds.close()
	return nil
}
