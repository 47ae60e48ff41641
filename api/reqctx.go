package api

import (
	"context"
	"sync"
	"time"
)

// The values a request's context carries, each under a key of its own type
// (two keys of one integer type once collided): the request id, the mark of
// a connection whose write deadlines are progress deadlines (a
// limitedConn), and wrap's attempt.
type (
	requestIDKeyType    struct{}
	progressConnKeyType struct{}
	attemptKeyType      struct{}
)

var (
	requestIDKey    requestIDKeyType
	progressConnKey progressConnKeyType
	attemptKey      attemptKeyType
)

func requestID(ctx context.Context) string {
	v, _ := ctx.Value(requestIDKey).(string)
	return v
}

// requestCtx is a request's context with a deadline that moves once, when
// the answer starts. A context.WithDeadline cannot be extended, and a
// cancel-with-cause context would report context.Canceled, not the
// timeout, to everything below; this one reports DeadlineExceeded (so a
// timeout is a 504 wherever it surfaces). It implements AfterFunc so that
// contexts derived from it need no goroutine each.
type requestCtx struct {
	context.Context // the request's own: values, and cancellation when the client goes
	done            chan struct{}
	stopParent      func() bool
	timer           *time.Timer
	onExpire        func() // set (setOnExpire) before the handler runs; called once, if the deadline passes

	mu       sync.Mutex
	err      error
	deadline time.Time
	afters   map[*func()]struct{}
}

func newRequestCtx(parent context.Context, deadline time.Time) *requestCtx {
	c := &requestCtx{Context: parent, done: make(chan struct{}), deadline: deadline}
	c.stopParent = context.AfterFunc(parent, func() { c.cancel(parent.Err()) })
	c.timer = time.AfterFunc(time.Until(deadline), c.expire)
	return c
}

// Deadline reports the parent's: this context's own deadline moves, and a
// caller that planned by the earlier one would cut work short.
func (c *requestCtx) Deadline() (time.Time, bool) { return c.Context.Deadline() }

func (c *requestCtx) Done() <-chan struct{} { return c.done }

func (c *requestCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// AfterFunc is what context.AfterFunc and derived contexts use.
func (c *requestCtx) AfterFunc(f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		go f()
		return func() bool { return false }
	}
	key := &f
	if c.afters == nil {
		c.afters = map[*func()]struct{}{}
	}
	c.afters[key] = struct{}{}
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		_, ok := c.afters[key]
		delete(c.afters, key)
		return ok
	}
}

// extend moves the deadline (the answer has started).
func (c *requestCtx) extend(deadline time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.deadline = deadline
		c.timer.Reset(time.Until(deadline))
	}
}

// setOnExpire sets onExpire under mu: the timer runs from newRequestCtx
// on, so an unguarded write would race with expire (the race detector saw
// it on every request that reached its deadline).
func (c *requestCtx) setOnExpire(f func()) {
	c.mu.Lock()
	c.onExpire = f
	c.mu.Unlock()
}

// expire runs on the timer. It holds mu throughout, so that once release
// has returned onExpire can no longer touch the response.
func (c *requestCtx) expire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	// A run from before extend moved the deadline finds it in the future.
	if c.err != nil || time.Now().Before(c.deadline) {
		return
	}
	if c.onExpire != nil {
		c.onExpire()
	}
	c.cancelLocked(context.DeadlineExceeded)
}

func (c *requestCtx) cancel(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cancelLocked(err)
}

func (c *requestCtx) cancelLocked(err error) {
	if c.err != nil {
		return
	}
	c.err = err
	close(c.done)
	for f := range c.afters {
		go (*f)()
	}
	clear(c.afters)
}

// release ends the context when the handler returns (as a CancelFunc
// would), so that nothing started for the request outlives it.
func (c *requestCtx) release() {
	c.timer.Stop()
	c.stopParent()
	c.cancel(context.Canceled)
}
