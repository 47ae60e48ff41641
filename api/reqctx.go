package api

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
)

// The values a request's context carries, each under a key of its own type
// (two keys of one integer type once collided): the request's state (its
// id among it), the mark of a connection whose write deadlines are
// progress deadlines (a limitedConn), the mark of a connection on a probe
// slot (see ProbeConnections), and wrap's attempt.
type (
	reqStateKeyType     struct{}
	progressConnKeyType struct{}
	probeConnKeyType    struct{}
	attemptKeyType      struct{}
)

var (
	reqStateKey     reqStateKeyType
	progressConnKey progressConnKeyType
	probeConnKey    probeConnKeyType
	attemptKey      attemptKeyType
)

// reqState is what the middleware keeps for one request, in one
// allocation rather than one per layer: the id, the outermost writer, the
// request's context and clock, and wrap's attempt. observe makes it and
// makes ctx the request's context, once.
type reqState struct {
	id  string
	sw  statusWriter
	rc  http.ResponseController
	ctx requestCtx // started by observe; its clock armed by timeout (routes without it have none)
	// att is wrap's attempt, found through ctx rather than a context
	// value of its own (which cost a context and a request copy per
	// request); wrapped says wrap has taken it.
	att     attempt
	wrapped bool
	// route is chi's routing context, answered by ctx for chi.RouteCtxKey
	// (see observe). It comes from Server.routes, a pool, as chi's own
	// would, and goes back when observe returns, as chi's would: its
	// parameters' slices keep their room.
	route *chi.Context
	// req is the request as the handlers see it, with ctx as its context
	// (observe's copy, made here rather than by Request.WithContext).
	req http.Request
	// parts are a first answer's pieces (see answerParts).
	parts answerParts
}

// answerParts are what an answer of a request needs once, made with its
// state rather than one allocation each. Each is handed out at most once
// (a second answer of the request, as a retried handler's, allocates its
// own), and a state is never reused: nothing handed out is ever given to
// another request, however long what holds it lives.
type answerParts struct {
	box                           [2 * inlineDims]float64
	trailer                       trailer
	binary                        binaryEncoder
	body                          bodyWriter
	meta                          payloadMeta
	boxUsed, trailerUsed, binUsed bool
	bodyUsed, metaUsed            bool
}

// inlineDims is the most axes whose box corners a request's state holds.
const inlineDims = 4

// partsOf is the answer parts of the request whose context is ctx, nil
// when it has no state (a handler called without observe).
func partsOf(ctx context.Context) *answerParts {
	if st := stateOf(ctx); st != nil {
		return &st.parts
	}
	return nil
}

// boxCorners is room for a box's two corners of dims axes each.
func (p *answerParts) boxCorners(dims int) []float64 {
	if p == nil || p.boxUsed || dims > inlineDims {
		return make([]float64, 2*dims)
	}
	p.boxUsed = true
	return p.box[: 2*dims : 2*dims]
}

// newTrailer is a zero trailer.
func (p *answerParts) newTrailer() *trailer {
	if p == nil || p.trailerUsed {
		return &trailer{}
	}
	p.trailerUsed = true
	return &p.trailer
}

// newEncoder is codec's encoder.
func (p *answerParts) newEncoder(codec codec) encoder {
	if c, ok := codec.(binaryCodec); ok && p != nil && !p.binUsed {
		p.binUsed = true
		p.binary = binaryEncoder{precision: c.precision}
		return &p.binary
	}
	return codec.newEncoder()
}

// newMeta is a zero payloadMeta.
func (p *answerParts) newMeta() *payloadMeta {
	if p == nil || p.metaUsed {
		return &payloadMeta{}
	}
	p.metaUsed = true
	return &p.meta
}

// newBodyWriter is a zero bodyWriter.
func (p *answerParts) newBodyWriter() *bodyWriter {
	if p == nil || p.bodyUsed {
		return &bodyWriter{}
	}
	p.bodyUsed = true
	return &p.body
}

// newReqState makes a request's state; seq numbers the request.
func newReqState(now time.Time, seq uint64) *reqState {
	st := &reqState{}
	st.ctx.st = st
	// The same text fmt's "%x-%x" gave, without its boxing.
	var b [40]byte
	id := strconv.AppendUint(b[:0], uint64(now.UnixNano())&0xffffffff, 16)
	id = strconv.AppendUint(append(id, '-'), seq, 16)
	st.id = string(id)
	return st
}

// request is r with the state's context, copied into the state: what
// Request.WithContext does, without an allocation of its own (inlined
// here, its copy stays on the stack).
func (st *reqState) request(r *http.Request) *http.Request {
	st.req = *r.WithContext(&st.ctx)
	return &st.req
}

func stateOf(ctx context.Context) *reqState {
	st, _ := ctx.Value(reqStateKey).(*reqState)
	return st
}

func requestID(ctx context.Context) string {
	if st := stateOf(ctx); st != nil {
		return st.id
	}
	return ""
}

// requestCtx is a request's context with a deadline that moves when the
// answer starts, and then around each write (see statusWriter.working). A context.WithDeadline cannot be extended, and a
// cancel-with-cause context would report context.Canceled, not the
// timeout, to everything below; this one reports DeadlineExceeded (so a
// timeout is a 504 wherever it surfaces). It implements AfterFunc so that
// contexts derived from it need no goroutine each.
type requestCtx struct {
	context.Context // the request's own: values, and cancellation when the client goes
	timer           *time.Timer
	// clock is where timer came from when it came from a pool (see
	// clockTimer); release puts it back.
	clock *clockTimer
	pool  *sync.Pool
	// cut is the response the clock cuts if the deadline passes (set by
	// setCut before the handler runs; a pointer, not a method value, so
	// that setting it costs no allocation).
	cut *statusWriter
	// st is the request state this context is part of (nil for one of
	// its own): the context answers its values (reqStateKey, and
	// attemptKey once wrap has taken the attempt), with no
	// context.WithValue for each.
	st *reqState

	mu       sync.Mutex
	err      error
	deadline time.Time
	// fireAt is when the timer runs, never after deadline: a deadline
	// moved later leaves the timer be (expire finds it moved and runs
	// again at it), so a write's two moves cost no timer change.
	fireAt  time.Time
	stopped bool // release has run: expire re-arms nothing
	afters  map[*func()]struct{}
	// done is made on the first Done; following says the parent's end
	// is this context's too (see follow), and stopParent undoes it.
	done       chan struct{}
	following  bool
	stopParent func() bool
}

func newRequestCtx(parent context.Context, deadline time.Time) *requestCtx {
	c := &requestCtx{}
	c.start(parent)
	c.arm(deadline, nil)
	return c
}

// start sets up a zero requestCtx (one that lives inside a reqState) on
// parent, without a clock: it ends when parent does, or at release. Err
// asks the parent; Done and AfterFunc, whose callers wait for the end,
// follow it (see followLocked). A warm answer asks only Err: it costs
// neither the parent's lock, twice, nor three allocations.
func (c *requestCtx) start(parent context.Context) {
	c.Context = parent
}

// followLocked makes the parent's end this context's, once; c.mu held.
func (c *requestCtx) followLocked() {
	if c.following || c.err != nil {
		return
	}
	c.following = true
	if err := c.Context.Err(); err != nil {
		c.cancelLocked(err)
		return
	}
	// The parent runs parentDone on a goroutine of its own, never under
	// its lock or c.mu.
	c.stopParent = context.AfterFunc(c.Context, c.parentDone)
}

// arm starts the clock: the context ends at deadline (until extend moves
// it). Once only, before the handler runs. Its timer comes from pool
// (of *clockTimer) when pool is not nil.
func (c *requestCtx) arm(deadline time.Time, pool *sync.Pool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deadline, c.fireAt = deadline, deadline
	if pool == nil {
		c.timer = time.AfterFunc(time.Until(deadline), c.expire)
		return
	}
	ct, _ := pool.Get().(*clockTimer)
	c.armClock(deadline, ct, pool)
}

// armClock sets ct (nil: a new one) to run c's expire at deadline; release
// puts it in pool. c.mu held.
func (c *requestCtx) armClock(deadline time.Time, ct *clockTimer, pool *sync.Pool) {
	if ct == nil {
		ct = &clockTimer{}
		ct.c.Store(c)
		ct.t = time.AfterFunc(time.Until(deadline), ct.fire)
	} else {
		ct.c.Store(c)
		ct.t.Reset(time.Until(deadline))
	}
	c.timer, c.clock, c.pool = ct.t, ct, pool
}

// clockTimer is a request clock's timer that outlives its request, for
// the next (a timer and its callback are two allocations a request). It
// runs expire of the context it serves now. A run that began for an
// earlier request may find the next one there: expire then finds the
// deadline not reached and sets the timer again for it, as it does after
// extend, so the early run costs nothing but itself.
type clockTimer struct {
	t *time.Timer
	c atomic.Pointer[requestCtx]
}

func (ct *clockTimer) fire() {
	if c := ct.c.Load(); c != nil {
		c.expire()
	}
}

func (c *requestCtx) Value(key any) any {
	if c.st != nil {
		switch key.(type) {
		case reqStateKeyType:
			return c.st
		case attemptKeyType:
			if c.st.wrapped {
				return &c.st.att
			}
		}
		if key == any(chi.RouteCtxKey) && c.st.route != nil {
			return c.st.route
		}
	}
	return c.Context.Value(key)
}

func (c *requestCtx) parentDone() { c.cancel(c.Context.Err()) }

// Deadline reports the parent's: this context's own deadline moves, and a
// caller that planned by the earlier one would cut work short.
func (c *requestCtx) Deadline() (time.Time, bool) { return c.Context.Deadline() }

func (c *requestCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
		if c.err != nil {
			close(c.done)
		}
	}
	c.followLocked()
	return c.done
}

func (c *requestCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil && !c.following {
		if err := c.Context.Err(); err != nil {
			c.cancelLocked(err)
		}
	}
	return c.err
}

// AfterFunc is what context.AfterFunc and derived contexts use.
func (c *requestCtx) AfterFunc(f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.followLocked()
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

// extend moves the deadline (the answer has started, or a write begins or ends).
func (c *requestCtx) extend(deadline time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil && !c.stopped {
		c.deadline = deadline
		if deadline.Before(c.fireAt) {
			c.fireAt = deadline
			c.timer.Reset(time.Until(deadline))
		}
	}
}

// setCut sets cut under mu: the timer runs from init on, so an unguarded
// write would race with expire (the race detector saw it on every request
// that reached its deadline).
func (c *requestCtx) setCut(w *statusWriter) {
	c.mu.Lock()
	c.cut = w
	c.mu.Unlock()
}

// expire runs on the timer. It holds mu throughout, so that once release
// has returned the clock can no longer touch the response.
func (c *requestCtx) expire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil || c.stopped {
		return
	}
	// A run before a deadline extend moved later waits again, for it.
	if now := time.Now(); now.Before(c.deadline) {
		c.fireAt = c.deadline
		c.timer.Reset(c.deadline.Sub(now))
		return
	}
	if c.cut != nil {
		c.cut.cut()
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
	if c.done != nil {
		close(c.done)
	}
	for f := range c.afters {
		go (*f)()
	}
	clear(c.afters)
}

// release ends the context when the handler returns (as a CancelFunc
// would), so that nothing started for the request outlives it.
func (c *requestCtx) release() {
	c.mu.Lock()
	c.stopped = true
	if c.timer != nil {
		c.timer.Stop()
	}
	if c.clock != nil {
		// Under mu, after stopped: nothing of this context touches the
		// timer from here on (extend and expire look at stopped first).
		c.clock.c.Store(nil)
		c.pool.Put(c.clock)
		c.timer, c.clock, c.pool = nil, nil, nil
	}
	stop := c.stopParent
	c.mu.Unlock()
	if stop != nil {
		stop()
	}
	c.cancel(context.Canceled)
}
