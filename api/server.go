// Package api is zvfserve's HTTP layer: chi routes over the zvf reader,
// one encoder per output format (JSON, NDJSON, binary), RFC 9457 errors
// from one place, and the behaviour tile servers are expected to have
// (ETags, Cache-Control, compression for text, CORS, limits, metrics).
package api

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/zvfserve/zvfserve"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
)

// OpenAPI returns the API description (openapi.yaml at the repository
// root), served at /openapi.yaml.
func OpenAPI() []byte { return zvfserve.OpenAPI() }

// Options configure a Server.
type Options struct {
	Stores         []*zvf.Store  // served as they are
	Handles        []*zvf.Handle // served as they are refreshed (see Server.Refresh)
	Cache          *cache.Cache
	Metrics        *Metrics // from NewMetrics; nil: a private one
	Logger         *slog.Logger
	CORSOrigins    []string      // default ["*"]
	MaxAge         time.Duration // Cache-Control max-age for data responses
	RequestTimeout time.Duration // work before an answer starts (then 504); default 30s
	StreamTimeout  time.Duration // hard cap on a response's whole time once it streams; default 10m, never below RequestTimeout
	StallTimeout   time.Duration // a write that moves no data for this long cuts the response; default 10s
	MaxVertices    int64         // per response; default 1,000,000
	MaxConcurrent  int           // requests in flight; default 64
	QueueWait      time.Duration // how long a request waits for a slot; default 2s
	MaxConnections int           // open connections on a listener from HTTPServer; default 4096
	IdleTimeout    time.Duration // keep-alive connections idle this long are closed; default 60s
	Token          string        // optional bearer token
	PublicURL      string        // absolute base for Link headers
	UI             http.Handler  // served at /
	Now            func() time.Time
}

// Server serves the API.
type Server struct {
	o       Options
	log     *slog.Logger
	stores  map[string]*zvf.Handle
	names   []string
	m       *Metrics
	slots   chan struct{}
	ready   atomic.Bool
	handler http.Handler
	pools   bodyPools
	text    batchers               // the text formats' row buffers
	params  map[string][]paramSpec // every route's query parameters
	reqs    atomic.Uint64          // request ids
}

var storeName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// ValidStoreName reports whether s can name a store in URLs.
func ValidStoreName(s string) bool { return storeName.MatchString(s) }

// New builds a Server.
func New(o Options) (*Server, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if len(o.CORSOrigins) == 0 {
		o.CORSOrigins = []string{"*"}
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 30 * time.Second
	}
	if o.StreamTimeout <= 0 {
		o.StreamTimeout = 10 * time.Minute
	}
	o.StreamTimeout = max(o.StreamTimeout, o.RequestTimeout)
	if o.StallTimeout <= 0 {
		o.StallTimeout = 10 * time.Second
	}
	if o.MaxConnections <= 0 {
		o.MaxConnections = 4096
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = time.Minute
	}
	if o.MaxVertices <= 0 {
		o.MaxVertices = 1_000_000
	}
	if o.MaxConcurrent <= 0 {
		o.MaxConcurrent = 64
	}
	if o.QueueWait <= 0 {
		o.QueueWait = 2 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics()
	}
	s := &Server{o: o, log: o.Logger, stores: map[string]*zvf.Handle{}, m: o.Metrics,
		slots: make(chan struct{}, o.MaxConcurrent), params: routeParams(), text: batchers{now: o.Now}}
	handles := append([]*zvf.Handle(nil), o.Handles...)
	for _, st := range o.Stores {
		handles = append(handles, zvf.StaticHandle(st))
	}
	for _, h := range handles {
		n := h.Name()
		if !ValidStoreName(n) {
			return nil, fmt.Errorf("store name %q: use letters, digits, '.', '_' and '-'", n)
		}
		if _, dup := s.stores[n]; dup {
			return nil, fmt.Errorf("two stores are named %q", n)
		}
		s.stores[n] = h
		s.names = append(s.names, n)
	}
	sort.Strings(s.names)
	s.m.watchCache(o.Cache)
	s.handler = s.routes()
	s.ready.Store(true)
	return s, nil
}

// Refresh refreshes every store handle (see zvf.Handle.Refresh): stores
// whose metadata changed, or whose reads found them changed, are reopened
// with fresh caches once they have settled, and stores that failed to open
// are retried. It logs what changed and returns the first error after
// trying them all.
func (s *Server) Refresh(ctx context.Context) error {
	return s.refresh(ctx, (*zvf.Handle).Refresh)
}

// RefreshDeep is Refresh with a walk of every object of every store (see
// zvf.Handle.RefreshDeep), for operators who rewrite data in place.
func (s *Server) RefreshDeep(ctx context.Context) error {
	return s.refresh(ctx, (*zvf.Handle).RefreshDeep)
}

func (s *Server) refresh(ctx context.Context, f func(*zvf.Handle, context.Context) (bool, error)) error {
	var first error
	for _, n := range s.names {
		changed, err := f(s.stores[n], ctx)
		switch {
		case err != nil && changed:
			s.log.Warn("store changed and does not open", "store", n, "err", err)
		case err != nil:
			s.log.Warn("store check failed; serving what was open", "store", n, "err", err)
		case changed:
			s.log.Info("store changed; reopened with a fresh cache", "store", n)
		}
		if err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Handler is the public HTTP handler.
func (s *Server) Handler() http.Handler { return s.handler }

// HTTPServer returns an http.Server for the API, and ln wrapped so that at
// most MaxConnections are open: at the cap the connection idle longest is
// closed to make room, and when none is idle the new one is closed at
// once. Keep-alive connections idle for IdleTimeout are closed. Requests
// need their headers within 10 s; answers are bounded by the request
// clock and the writer's stall deadline (see Options), not by a whole-
// response timeout.
func (s *Server) HTTPServer(ln net.Listener) (*http.Server, net.Listener) {
	lim := &connLimiter{Listener: ln, max: s.o.MaxConnections, m: s.m, idle: map[*limitedConn]time.Time{}}
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		// No ReadTimeout: on HTTP/1.1 it also bounds the connection's
		// background read while the handler runs, and its expiry cancels
		// the request — it would cut every answer that streams longer.
		// WriteTimeout covers only the server's own writes (a 400 for a
		// malformed request); every response sets its own deadlines.
		WriteTimeout:   s.o.StallTimeout,
		IdleTimeout:    s.o.IdleTimeout,
		MaxHeaderBytes: 64 << 10,
		ConnState:      lim.track,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if tc, ok := c.(*tls.Conn); ok {
				c = tc.NetConn()
			}
			if _, ok := c.(*limitedConn); ok {
				ctx = context.WithValue(ctx, progressConnKey, true)
			}
			return ctx
		},
	}
	return hs, lim
}

// progressConnKey marks requests whose connection takes write deadlines
// as progress deadlines (a limitedConn).
const progressConnKey ctxKey = 2

// connLimiter caps the open connections of a listener (see HTTPServer).
type connLimiter struct {
	net.Listener
	max int
	m   *Metrics

	mu   sync.Mutex
	open int
	idle map[*limitedConn]time.Time // since when
}

// limitedConn is a connection of a connLimiter. Its write deadlines are
// progress deadlines: a write that times out having moved some bytes is
// given the same time again, so only a peer that takes nothing for a whole
// deadline's span is cut — however large the write, and without cutting
// writes into small pieces (each a system call and, on HTTP/1.1, a chunk).
type limitedConn struct {
	net.Conn
	l    *connLimiter
	once sync.Once

	mu   sync.Mutex
	span time.Duration // of the write deadline last set; <= 0: none, or one that cuts now
}

func (c *limitedConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.span = 0
	if !t.IsZero() {
		c.span = time.Until(t)
	}
	return c.Conn.SetWriteDeadline(t)
}

func (c *limitedConn) SetDeadline(t time.Time) error {
	if err := c.SetWriteDeadline(t); err != nil {
		return err
	}
	return c.Conn.SetReadDeadline(t)
}

func (c *limitedConn) Write(p []byte) (int, error) {
	done := 0
	for {
		n, err := c.Conn.Write(p[done:])
		done += n
		if err == nil || n == 0 || !errors.Is(err, os.ErrDeadlineExceeded) || !c.extend() {
			return done, err
		}
	}
}

// extend renews the write deadline after a write that made progress; it
// holds mu so that a deadline set meanwhile (one that cuts) wins.
func (c *limitedConn) extend() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.span > 0 && c.Conn.SetWriteDeadline(time.Now().Add(c.span)) == nil
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.closed(c) })
	return err
}

// CloseWrite lets the server half-close a connection before closing it
// (so a client still sending gets the answer rather than a reset).
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// Accept returns the next connection there is room for.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if lc := l.admit(c); lc != nil {
			return lc, nil
		}
	}
}

func (l *connLimiter) admit(c net.Conn) net.Conn {
	l.mu.Lock()
	var victim *limitedConn
	if l.open >= l.max {
		var since time.Time
		for ic, t := range l.idle {
			if victim == nil || t.Before(since) {
				victim, since = ic, t
			}
		}
		if victim == nil {
			l.mu.Unlock()
			_ = c.Close()
			l.m.connRefuse.Inc()
			return nil
		}
		l.unidle(victim)
	}
	l.mu.Unlock()
	if victim != nil {
		// Idle keep-alive connections may be closed at any time; clients
		// reconnect. Closing it counts it out before the new one counts in.
		_ = victim.Close()
		l.m.connIdle.Inc()
	}
	l.mu.Lock()
	l.open++
	l.mu.Unlock()
	l.m.connOpen.Inc()
	return &limitedConn{Conn: c, l: l}
}

func (l *connLimiter) closed(c *limitedConn) {
	l.mu.Lock()
	l.open--
	l.unidle(c)
	l.mu.Unlock()
	l.m.connOpen.Dec()
}

// track is the server's ConnState hook: it keeps the set of idle
// keep-alive connections, the first to go at the cap.
func (l *connLimiter) track(c net.Conn, st http.ConnState) {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if st != http.StateIdle {
		l.unidle(lc)
		return
	}
	if _, ok := l.idle[lc]; !ok {
		l.idle[lc] = time.Now()
		l.m.connIdleN.Inc()
	}
}

// unidle takes c out of the idle set; l.mu is held.
func (l *connLimiter) unidle(c *limitedConn) {
	if _, ok := l.idle[c]; ok {
		delete(l.idle, c)
		l.m.connIdleN.Dec()
	}
}

// SetReady flips /readyz (false while draining).
func (s *Server) SetReady(v bool) { s.ready.Store(v) }

// AdminHandler serves /metrics and /debug/pprof for the admin listener.
func (s *Server) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", s.m.handler())
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", s.cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// cmdline is pprof's cmdline endpoint with secrets redacted: the token,
// wherever it appears among the arguments, and the query string of any
// URL argument (store URLs may carry credentials there).
func (s *Server) cmdline(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	args := make([]string, len(os.Args))
	for i, a := range os.Args {
		args[i] = redactArg(a, s.o.Token)
	}
	_, _ = io.WriteString(w, strings.Join(args, "\x00"))
}

func redactArg(a, token string) string {
	const redacted = "[redacted]"
	if token != "" {
		a = strings.ReplaceAll(a, token, redacted)
	}
	if i := strings.Index(a, "://"); i >= 0 {
		if j := strings.IndexByte(a[i:], '?'); j >= 0 {
			a = a[:i+j] + "?" + redacted
		}
	}
	return a
}

func (s *Server) routes() http.Handler {
	r := chi.NewRouter()
	// Every GET route answers HEAD with the same handler (net/http drops
	// the body), so health checks and caches that probe with HEAD see
	// what GET says.
	get := func(r chi.Router, pattern string, h http.HandlerFunc) {
		r.Get(pattern, h)
		r.Head(pattern, h)
	}
	// observe sits outside recoverer so that a response cut by a panic is
	// still logged and counted, as what it was.
	r.Use(s.requestID, s.observe, s.recoverer, s.methods, s.cors, s.limits)
	get(r, "/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	get(r, "/readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !s.ready.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("draining\n"))
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	r.Group(func(r chi.Router) {
		r.Use(s.auth)
		get(r, "/metrics", s.m.handler().ServeHTTP)
		get(r, "/openapi.yaml", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/yaml")
			_, _ = w.Write(OpenAPI())
		})
		r.Group(func(r chi.Router) {
			r.Use(s.throttle, s.timeout)
			get(r, "/api/v1/stores", s.wrap(s.listStores))
			r.Route("/api/v1/stores/{store}", func(r chi.Router) {
				get(r, "/", s.wrap(s.describeStore))
				get(r, "/bbox", s.wrap(s.bbox))
				get(r, "/objects/{id}", s.wrap(s.object))
				get(r, "/objects/{id}/manifest", s.wrap(s.manifest))
				get(r, "/objects/{id}/levels", s.wrap(s.objectLevels))
				get(r, "/groups/{id}", s.wrap(s.group))
				get(r, "/levels/{level}/chunks", s.wrap(s.chunks))
				get(r, "/levels/{level}/chunks/{key}", s.wrap(s.chunk))
			})
			r.Route("/ng/{store}", s.neuroglancerRoutes().Routes)
		})
	})
	if s.o.UI != nil {
		// The viewer's static files hold no data; open, so that a browser
		// can load the page that asks for the token its data requests send.
		get(r, "/*", func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.URL.Path, "/api/") {
				// A mistyped API path is still an API answer, not the
				// viewer's plain-text 404.
				writeProblem(w, r, notFound("no such route"))
				return
			}
			s.o.UI.ServeHTTP(w, r)
		})
	}
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, r, notFound("no such route"))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", "GET, HEAD, OPTIONS")
		writeProblem(w, r, &Problem{Type: typeBase + "method-not-allowed", Title: "Method not allowed", Status: http.StatusMethodNotAllowed})
	})
	return r
}

// ---- middleware ----

type ctxKey int

const requestIDKey ctxKey = 1

func requestID(ctx context.Context) string {
	v, _ := ctx.Value(requestIDKey).(string)
	return v
}

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
			s.log.Error("panic serving request", "path", r.URL.Path, "panic", fmt.Sprint(v), "request_id", requestID(r.Context()))
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

func (s *Server) requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := fmt.Sprintf("%x-%x", s.o.Now().UnixNano()&0xffffffff, s.reqs.Add(1))
		w.Header().Set("X-Request-Id", id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestIDKey, id)))
	})
}

func (s *Server) methods(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			next.ServeHTTP(w, r)
		default:
			w.Header().Set("Allow", "GET, HEAD, OPTIONS")
			writeProblem(w, r, &Problem{Type: typeBase + "method-not-allowed", Title: "Method not allowed", Status: http.StatusMethodNotAllowed,
				Detail: "zvfserve is read-only: use GET, HEAD or OPTIONS"})
		}
	})
}

func (s *Server) cors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin != "" {
			allowed := ""
			for _, o := range s.o.CORSOrigins {
				if o == "*" {
					allowed = "*"
					break
				}
				if o == origin {
					allowed = origin
				}
			}
			if allowed != "" {
				h := w.Header()
				h.Set("Access-Control-Allow-Origin", allowed)
				if allowed != "*" {
					h.Add("Vary", "Origin")
				}
				h.Set("Access-Control-Expose-Headers", "ETag, Link, Server-Timing, X-Request-Id, X-Next-Cursor, X-Vertex-Count, Retry-After, Content-Range")
				if r.Method == http.MethodOptions {
					h.Set("Access-Control-Allow-Methods", "GET, HEAD, OPTIONS")
					h.Set("Access-Control-Allow-Headers", "Authorization, Accept, Accept-Encoding, If-None-Match, Range")
					h.Set("Access-Control-Max-Age", "600")
					w.WriteHeader(http.StatusNoContent)
					return
				}
			}
		}
		if r.Method == http.MethodOptions {
			w.Header().Set("Allow", "GET, HEAD, OPTIONS")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// maxQuery bounds the raw query string.
const maxQuery = 4096

func (s *Server) limits(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.URL.RawQuery) > maxQuery || len(r.URL.Path) > 1024 {
			writeProblem(w, r, &Problem{Type: typeBase + "uri-too-long", Title: "URI too long", Status: http.StatusRequestURITooLong})
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) auth(next http.Handler) http.Handler {
	if s.o.Token == "" {
		return next
	}
	want := []byte("Bearer " + s.o.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="zvfserve"`)
			writeProblem(w, r, &Problem{Type: typeBase + "unauthorized", Title: "Unauthorized", Status: http.StatusUnauthorized,
				Detail: "this server needs a bearer token"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// throttle bounds requests in flight: a request waits up to QueueWait for a
// slot, then gets 503 with Retry-After, so load never becomes unbounded
// memory.
func (s *Server) throttle(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := time.NewTimer(s.o.QueueWait)
		defer t.Stop()
		select {
		case s.slots <- struct{}{}:
		case <-t.C:
			s.m.rejected.Inc()
			writeProblem(w, r, overloaded())
			return
		case <-r.Context().Done():
			return
		}
		s.m.inFlight.Inc()
		defer func() {
			s.m.inFlight.Dec()
			<-s.slots
		}()
		next.ServeHTTP(w, r)
	})
}

// timeout gives the request its clock (see requestCtx): RequestTimeout
// until the answer starts, then StreamTimeout from the request's start.
// While the answer streams, a client that stops reading is cut by the
// writer's stall deadline, not by this clock.
func (s *Server) timeout(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ctx := newRequestCtx(r.Context(), start.Add(s.o.RequestTimeout))
		defer ctx.release()
		if sw, ok := w.(*statusWriter); ok {
			sw.onStart = func() { ctx.extend(start.Add(s.o.StreamTimeout)) }
			// Once streaming, the handler may be blocked in a write to a
			// client reading slowly but steadily: the cap cuts that too.
			ctx.onExpire = sw.cut
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
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
	onExpire        func() // set before the handler runs; called once, if the deadline passes

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
func (c *requestCtx) Done() <-chan struct{}       { return c.done }

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

// observe records metrics and an access log line per request, with how
// the response ended: complete, or cut (see statusWriter.outcome).
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := s.o.Now()
		sw := newStatusWriter(w, r, s.o.StallTimeout, s.o.Token != "")
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
			outcome := sw.outcome(r.Context(), v != nil)
			d := s.o.Now().Sub(start)
			s.m.observe(pattern, sw.status, outcome, d)
			level := slog.LevelInfo
			if outcome != outcomeComplete {
				level = slog.LevelWarn
			}
			s.log.Log(r.Context(), level, "request", "method", r.Method, "path", r.URL.Path, "route", pattern, "status", sw.status,
				"outcome", outcome, "bytes", sw.bytes, "duration_ms", float64(d.Microseconds())/1000, "request_id", requestID(r.Context()))
			if v != nil {
				panic(v)
			}
		}()
		next.ServeHTTP(sw, r)
		sw.finish()
	})
}

// bodyTimeout bounds reading a request body nobody asked for.
const bodyTimeout = 10 * time.Second

// ---- metrics ----

// Metrics are the server's Prometheus metrics on a private registry.
type Metrics struct {
	reg        *prometheus.Registry
	requests   *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	rejected   prometheus.Counter
	inFlight   prometheus.Gauge
	connOpen   prometheus.Gauge
	connIdleN  prometheus.Gauge
	connIdle   prometheus.Counter
	connRefuse prometheus.Counter
	readBytes  prometheus.Counter
	readLat    prometheus.Histogram
	cacheSet   atomic.Bool
}

// NewMetrics makes the metric set (and its registry).
func NewMetrics() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "zvfserve_http_requests_total",
		Help: "HTTP requests by route, status and outcome (complete, or how the response was cut: error, stalled, disconnected, timeout)."},
		[]string{"route", "code", "outcome"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "zvfserve_http_request_duration_seconds", Help: "HTTP request latency by route.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}}, []string{"route"})
	m.rejected = prometheus.NewCounter(prometheus.CounterOpts{Name: "zvfserve_http_rejected_total", Help: "Requests refused with 503 because every slot was busy."})
	m.inFlight = prometheus.NewGauge(prometheus.GaugeOpts{Name: "zvfserve_http_requests_in_flight", Help: "Data requests holding one of the --max-concurrent slots."})
	m.connOpen = prometheus.NewGauge(prometheus.GaugeOpts{Name: "zvfserve_http_connections_open", Help: "Client connections open."})
	m.connIdleN = prometheus.NewGauge(prometheus.GaugeOpts{Name: "zvfserve_http_connections_idle", Help: "Keep-alive connections open and idle between requests."})
	m.connIdle = prometheus.NewCounter(prometheus.CounterOpts{Name: "zvfserve_http_connections_idle_closed_total", Help: "Idle keep-alive connections closed to make room for new ones at the connection cap."})
	m.connRefuse = prometheus.NewCounter(prometheus.CounterOpts{Name: "zvfserve_http_connections_refused_total", Help: "Connections closed on arrival: at the cap, with none idle."})
	m.readBytes = prometheus.NewCounter(prometheus.CounterOpts{Name: "zvfserve_store_read_bytes_total", Help: "Bytes read from storage."})
	m.readLat = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "zvfserve_store_read_duration_seconds", Help: "Storage read latency.",
		Buckets: []float64{.0001, .0005, .001, .005, .01, .05, .1, .5, 1, 5}})
	m.reg.MustRegister(m.requests, m.latency, m.rejected, m.inFlight, m.connOpen, m.connIdleN, m.connIdle, m.connRefuse, m.readBytes, m.readLat,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// ObserveRead counts one storage read (see metered.Wrap).
func (m *Metrics) ObserveRead(bytes int, took time.Duration) {
	m.readLat.Observe(took.Seconds())
	m.readBytes.Add(float64(bytes))
}

func (m *Metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

func (m *Metrics) observe(route string, code int, outcome string, d time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(code), outcome).Inc()
	m.latency.WithLabelValues(route).Observe(d.Seconds())
}

func (m *Metrics) watchCache(c *cache.Cache) {
	if c == nil || !m.cacheSet.CompareAndSwap(false, true) {
		return
	}
	stat := func(f func(cache.Stats) int64) func() float64 {
		return func() float64 { return float64(f(c.Stats())) }
	}
	m.reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "zvfserve_cache_hits_total", Help: "Cache hits."}, stat(func(s cache.Stats) int64 { return s.Hits })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "zvfserve_cache_misses_total", Help: "Cache misses."}, stat(func(s cache.Stats) int64 { return s.Misses })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "zvfserve_cache_evictions_total", Help: "Cache evictions."}, stat(func(s cache.Stats) int64 { return s.Evictions })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "zvfserve_cache_deduplicated_total", Help: "Loads shared with an in-flight load."}, stat(func(s cache.Stats) int64 { return s.Deduped })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "zvfserve_cache_bytes", Help: "Bytes held by the cache."}, stat(func(s cache.Stats) int64 { return s.Bytes })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "zvfserve_cache_items", Help: "Entries held by the cache."}, stat(func(s cache.Stats) int64 { return s.Items })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "zvfserve_cache_budget_bytes", Help: "The cache's byte budget."}, stat(func(s cache.Stats) int64 { return s.Budget })),
	)
}
