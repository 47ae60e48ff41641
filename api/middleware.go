package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/zvfserve/zvfserve/api/problem"
)

func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			// The stack says where the bug is; the client is told nothing of it.
			s.log.Error("panic serving request", "path", clip(r.URL.Path, maxPath), "panic", fmt.Sprint(v), "stack", string(debug.Stack()),
				"request_id", requestID(r.Context()))
			if sw, ok := w.(*statusWriter); ok && sw.started {
				// Part of the answer is out; a problem document appended to
				// it would read as data. Cut the connection instead.
				panic(http.ErrAbortHandler)
			}
			writeProblem(w, r, classify(fmt.Errorf("panic")))
		}()
		next.ServeHTTP(w, r)
	})
}

func (s *Server) methods(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			next.ServeHTTP(w, r)
		default:
			w.Header().Set("Allow", "GET, HEAD, OPTIONS")
			writeProblem(w, r, problem.New(problem.MethodNotAllowed, "zvfserve is read-only: use GET, HEAD or OPTIONS"))
		}
	})
}

// exposedHeaders are the response headers a browser script may read
// across origins.
const exposedHeaders = "ETag, Link, Server-Timing, X-Request-Id, X-Next-Cursor, X-Vertex-Count, X-Number-Matched, Retry-After, Content-Range"

var (
	anyOriginValue = []string{"*"}
	exposedValue   = []string{exposedHeaders}
	nosniffValue   = []string{"nosniff"}
)

// cors answers every request the same way whatever its Origin, so that a
// shared cache may hand any browser what it stored for another: with the
// default "*" every response allows any origin (a response stored from a
// request without Origin still works for a browser); with a list of
// origins the allowance depends on Origin, so every response says Vary:
// Origin (statusWriter keeps it however the handler rewrites its
// headers).
func (s *Server) cors(next http.Handler) http.Handler {
	anyOrigin := slices.Contains(s.o.CORSOrigins, "*")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		if s.allowOrigin(w, r, anyOrigin) {
			if r.Method == http.MethodOptions && reqHeader(r, "Origin") != "" {
				h.Set("Access-Control-Allow-Methods", "GET, HEAD, OPTIONS")
				h.Set("Access-Control-Allow-Headers", "Authorization, Accept, Accept-Encoding, If-Match, If-None-Match, Range")
				h.Set("Access-Control-Max-Age", "600")
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
		if r.Method == http.MethodOptions {
			h.Set("Allow", "GET, HEAD, OPTIONS")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// allowOrigin sets the CORS headers of every response to r (see cors;
// anyOrigin: the origins allowed include "*") and reports whether r's
// origin is allowed.
func (s *Server) allowOrigin(w http.ResponseWriter, r *http.Request, anyOrigin bool) bool {
	h := w.Header()
	origin := reqHeader(r, "Origin")
	allowed := ""
	switch {
	case anyOrigin:
		allowed = "*"
	case origin != "" && slices.Contains(s.o.CORSOrigins, origin):
		allowed = origin
	}
	if !anyOrigin {
		if sw, ok := w.(*statusWriter); ok {
			sw.vary = append(sw.vary, "Origin")
		}
		addVary(h, "Origin")
	}
	if allowed == "" {
		return false
	}
	if anyOrigin {
		// Every response carries these: shared, never mutated values (a
		// full slice: an Add copies it), no allocation.
		h["Access-Control-Allow-Origin"] = anyOriginValue
	} else {
		h.Set("Access-Control-Allow-Origin", allowed)
	}
	h["Access-Control-Expose-Headers"] = exposedValue
	return true
}

// maxQuery and maxPath bound the raw query string and the path.
const (
	maxQuery = 4096
	maxPath  = 1024
)

// cursorParamLen is the length of raw's cursor parameter with its
// separator, when it is one of a cursor's length at most: a page's next
// request is its query plus a cursor (the Link says so), so the bound on
// a query does not count the cursor, which has its own (maxCursor).
func cursorParamLen(raw string) int {
	n := 0
	for p := range strings.SplitSeq(raw, "&") {
		if v, ok := strings.CutPrefix(p, "cursor="); ok && len(v) <= maxCursor {
			n += len(p) + 1
		}
	}
	return n
}

func (s *Server) limits(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The problem says which part is too long and the bound, as every
		// other refusal says what to change.
		if n := len(r.URL.RawQuery); n > maxQuery && n-cursorParamLen(r.URL.RawQuery) > maxQuery {
			writeProblem(w, r, problem.New(problem.URITooLong, fmt.Sprintf("query string of %d bytes; at most %d", n, maxQuery)))
			return
		}
		if n := len(r.URL.Path); n > maxPath {
			writeProblem(w, r, problem.New(problem.URITooLong, fmt.Sprintf("path of %d bytes; at most %d", n, maxPath)))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// throttle bounds the requests at work: a request waits up to QueueWait
// for a slot, and for answers in flight to leave room in the memory
// budget (see budget.go), then gets 503 with Retry-After. A slot is for
// work — reading,
// matching, encoding —, not for waiting on a client: while a response is
// blocked in a write to its client the slot is given back (see slot), so
// clients that read slowly or not at all hold connections (which the
// stall timeout and the connection cap govern) and the memory their
// answers were admitted with (see newBody), never the slots others need.
func (s *Server) throttle(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		own := s.ownOf(r.URL.Path)
		tok, ok := s.takeSlot(own)
		if !ok {
			if tok, ok = s.waitSlot(w, r, own); !ok {
				return
			}
		}
		s.m.inFlight.Inc()
		sw, _ := w.(*statusWriter)
		if sw == nil {
			defer (&slot{s: s, held: true, own: own, tok: tok}).release()
			next.ServeHTTP(w, r)
			return
		}
		sw.work = slot{s: s, held: true, ctx: r.Context(), own: own, tok: tok}
		sw.slot = &sw.work
		defer func() {
			sw.slot = nil
			sw.work.release()
		}()
		next.ServeHTTP(w, r)
	})
}

// ownOf is the pool of slots of its own that the store a path names
// (/api/v1/stores/{store}…, /ng/{store}/…) has, or nil: a server of one
// store, a path that names none, or a store it does not serve.
//
// Serving several stores, a request for a store needs, besides a work
// slot, a token: one of its store's own (Server.own, a few each) or one of
// the tokens all stores share (Server.extra, a quarter fewer than the
// slots). Requests waiting on a backend that hangs hold their slots until
// their deadline; with tokens, any number of stores hold at most the
// shared tokens and their own, so a quarter of the slots, less the own
// tokens of the stores that hang, stays for the other stores.
func (s *Server) ownOf(path string) chan struct{} {
	if s.own == nil {
		return nil
	}
	var rest string
	switch {
	case strings.HasPrefix(path, "/api/v1/stores/"):
		rest = path[len("/api/v1/stores/"):]
	case strings.HasPrefix(path, "/ng/"):
		rest = path[len("/ng/"):]
	default:
		return nil
	}
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		rest = rest[:i]
	}
	return s.own[rest]
}

// takeSlot takes a work slot (and, when own is not nil, a token: one of
// own's, else a shared one; see ownOf) if one is free and the memory
// budget has room, without waiting: the common case, which needs no
// timer. tok is the token's pool (nil without one).
func (s *Server) takeSlot(own chan struct{}) (tok chan struct{}, ok bool) {
	if s.o.Cache.Room(s.mem) != nil {
		return nil, false
	}
	if own != nil {
		select {
		case own <- struct{}{}:
			tok = own
		case s.extra <- struct{}{}:
			tok = s.extra
		default:
			return nil, false
		}
	}
	select {
	case s.slots <- struct{}{}:
		return tok, true
	default:
		if tok != nil {
			<-tok
		}
		return nil, false
	}
}

// waitSlot waits up to QueueWait for a token (when own is not nil), room
// and a slot; false when it gave up (then the 503 is written) or the
// client went.
func (s *Server) waitSlot(w http.ResponseWriter, r *http.Request, own chan struct{}) (tok chan struct{}, ok bool) {
	t := time.NewTimer(s.o.QueueWait)
	defer t.Stop()
	// A token first, then room in the memory budget, then a slot: a
	// request waiting for a token or for memory must not hold a slot
	// another request needs to go on. One select serves every wait: a nil
	// channel's case never fires, so only the wait at hand is live.
	for {
		var ownCh, extraCh, slots chan struct{}
		var room <-chan struct{}
		if own != nil && tok == nil {
			ownCh, extraCh = own, s.extra
		} else if room = s.o.Cache.Room(s.mem); room == nil {
			slots = s.slots
		}
		select {
		case ownCh <- struct{}{}:
			tok = own
		case extraCh <- struct{}{}:
			tok = s.extra
		case <-room:
		case slots <- struct{}{}:
			return tok, true
		case <-t.C:
			if tok != nil {
				<-tok
			}
			s.m.rejected.Inc()
			writeProblem(w, r, overloaded())
			return nil, false
		case <-r.Context().Done():
			if tok != nil {
				<-tok
			}
			return nil, false
		}
	}
}

// slot is a request's hold on one of the MaxConcurrent work slots (and on
// a token, see ownOf), which its statusWriter gives back for each write to
// the client and takes again after it. Only the request's goroutine uses
// it.
type slot struct {
	s    *Server
	held bool
	ctx  context.Context // the request's clock: a wait for a slot stops when it ends
	own  chan struct{}   // the store's own tokens, or nil: no token needed
	tok  chan struct{}   // the pool of the token held (own or s.extra)
}

func (sl *slot) release() {
	if sl.held {
		sl.held = false
		sl.s.m.inFlight.Dec()
		<-sl.s.slots
		if sl.tok != nil {
			<-sl.tok
			sl.tok = nil
		}
	}
}

// acquire takes a slot again, waiting as long as the request lives (its
// answer has started: it is never refused, only queued): until its client
// goes or its clock (see timeout) runs out. A token is taken first, as
// throttle takes it.
func (sl *slot) acquire() error {
	if sl.held {
		return nil
	}
	// The common case, a token and a slot free, takes them without the
	// clock's Done (which makes the clock follow the client's context:
	// see requestCtx.start).
	if sl.own != nil {
		select {
		case sl.own <- struct{}{}:
			sl.tok = sl.own
		case sl.s.extra <- struct{}{}:
			sl.tok = sl.s.extra
		default:
		}
	}
	if sl.own == nil || sl.tok != nil {
		select {
		case sl.s.slots <- struct{}{}:
			sl.held = true
			sl.s.m.inFlight.Inc()
			return nil
		default:
		}
	}
	return sl.wait()
}

// wait is acquire's wait, for a token (unless one is held) and a slot.
func (sl *slot) wait() error {
	var done <-chan struct{} // nil without a clock: the wait is the request's
	if sl.ctx != nil {
		done = sl.ctx.Done()
	}
	if sl.own != nil && sl.tok == nil {
		select {
		case sl.own <- struct{}{}:
			sl.tok = sl.own
		case sl.s.extra <- struct{}{}:
			sl.tok = sl.s.extra
		case <-done:
			return sl.ended()
		}
	}
	select {
	case sl.s.slots <- struct{}{}:
	case <-done:
		if sl.tok != nil {
			<-sl.tok
			sl.tok = nil
		}
		return sl.ended()
	}
	sl.held = true
	sl.s.m.inFlight.Inc()
	return nil
}

// errSlotWait: the request ended while its answer waited for a slot.
var errSlotWait = errors.New("the request ended while its answer waited for a work slot")

// ended is errSlotWait with why the request ended — its client left
// (context.Canceled) or its time ran out — so that it is classified and
// logged as that, not as the server's own failure.
func (sl *slot) ended() error { return fmt.Errorf("%w: %w", errSlotWait, sl.ctx.Err()) }

// timeout gives the request its clock (see requestCtx): RequestTimeout
// until the answer starts, then StreamTimeout from the request's start,
// and while the answer streams RequestTimeout again for each stretch of
// work between two writes (see statusWriter.working). A client that stops
// reading is cut by the writer's stall deadline, not by this clock.
func (s *Server) timeout(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		// The clock is the one observe made the request's context, when
		// it still is (nothing derived another) and has none yet: armed,
		// it needs no context or request copy of its own.
		ctx, ok := r.Context().(*requestCtx)
		if ok && ctx.st != nil && ctx.timer == nil {
			ctx.arm(start.Add(s.o.RequestTimeout), &s.clocks)
		} else {
			ctx = newRequestCtx(r.Context(), start.Add(s.o.RequestTimeout))
			r = r.WithContext(ctx)
		}
		defer ctx.release()
		if sw, ok := w.(*statusWriter); ok {
			if sw.slot != nil {
				// The request's clock ends a wait for a slot too (its
				// expiry cuts the response, then ends ctx).
				sw.slot.ctx = ctx
			}
			sw.clock, sw.streamEnd, sw.workLimit = ctx, start.Add(s.o.StreamTimeout), s.o.RequestTimeout
			// Once streaming, the handler may be blocked in a write to a
			// client reading slowly but steadily: the cap cuts that too.
			ctx.setCut(sw)
		}
		next.ServeHTTP(w, r)
	})
}

// observe gives the request its id (X-Request-Id) and its state (see
// reqState; its route context is the one router, next, fills), and records metrics and an access log line per request, with
// how the response ended: complete, or cut (see statusWriter.outcome).
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := s.o.Now()
		st := newReqState(start, s.reqs.Add(1))
		st.route = s.routeCtx(next)
		// The request's context from here on is the one in its state (its
		// clock, armed by timeout on the routes that have one); parent is
		// the server's, which says whether the client went.
		parent := r.Context()
		st.ctx.start(parent)
		r = st.request(r)
		sw := &st.sw
		sw.init(w, &st.rc, r, s.o.StallTimeout, s.o.Token != "")
		setHeader(sw, "X-Request-Id", st.id)
		// No answer is for a browser to sniff: a CSV, OBJ or problem that
		// echoes a query must never be taken for HTML or script.
		sw.Header()["X-Content-Type-Options"] = nosniffValue
		if r.ContentLength != 0 {
			// No handler reads a body, and the server discards it after the
			// answer; a client that never sends it must not hold the
			// connection forever.
			_ = sw.rc.SetReadDeadline(time.Now().Add(bodyTimeout))
		}
		defer func() {
			v := recover()
			route := chi.RouteContext(r.Context())
			pattern := "unmatched"
			if route != nil && route.RoutePattern() != "" {
				pattern = route.RoutePattern()
			}
			outcome := sw.outcome(parent, v != nil)
			d := s.o.Now().Sub(start)
			s.m.observe(pattern, sw.status, outcome, d)
			if sw.problem != "" {
				s.m.problem(sw.problem)
			}
			level := slog.LevelInfo
			if outcome != outcomeComplete {
				level = slog.LevelWarn
			}
			// Attributes, not key-value pairs: those box every number,
			// and a disabled level builds nothing.
			if s.log.Enabled(r.Context(), level) {
				s.log.LogAttrs(r.Context(), level, "request", slog.String("method", clip(r.Method, maxLogMethod)), slog.String("path", clip(r.URL.Path, maxPath)),
					slog.String("route", pattern), slog.Int("status", sw.status), slog.String("outcome", outcome),
					slog.Int64("bytes", sw.bytes), slog.Float64("duration_ms", float64(d.Microseconds())/1000), slog.String("request_id", st.id))
			}
			st.ctx.release()
			s.routeCtxs.Put(st.route)
			if v != nil {
				panic(v)
			}
		}()
		next.ServeHTTP(sw, r)
		sw.finish()
	})
}

// routeCtx is a route context for a request to router, from the pool
// (chi's Mux.ServeHTTP does the same with its own).
func (s *Server) routeCtx(router http.Handler) *chi.Context {
	rc := s.routeCtxs.Get().(*chi.Context)
	rc.Reset()
	rc.Routes, _ = router.(chi.Routes)
	return rc
}

// maxLogMethod bounds the method a log line repeats: the server takes
// any token as a method (then refuses it), up to its header limit.
const maxLogMethod = 16

// clip is s cut to at most n bytes, marked when cut, so that a log line's
// length is not the client's to choose (a path or method is refused past
// its bound, but logged before). It allocates only for what it cuts.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// bodyTimeout bounds reading a request body nobody asked for.
const bodyTimeout = 10 * time.Second
