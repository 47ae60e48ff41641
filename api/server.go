// Package api is zvfserve's HTTP layer: chi routes over the zvf reader,
// one encoder per output format (JSON, NDJSON, binary), RFC 9457 errors
// from one place, and the behaviour tile servers are expected to have
// (ETags, Cache-Control, compression for text, CORS, limits, metrics).
package api

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/zvfserve/zvfserve"
	"github.com/zvfserve/zvfserve/api/neuroglancer"
	"github.com/zvfserve/zvfserve/api/problem"
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
	StreamTimeout  time.Duration // hard cap on a response's whole time once it streams (each stretch of work between two writes has RequestTimeout); default 10m, never below RequestTimeout
	StallTimeout   time.Duration // a write that moves no data for this long cuts the response; default 10s
	MaxVertices    int64         // per response; default 1,000,000
	MaxConcurrent  int           // requests in flight; default 64 (with several stores, see ownOf)
	QueueWait      time.Duration // how long a request waits for a slot; default 2s
	MaxConnections int           // open connections on a listener from HTTPServer; default 4096
	IdleTimeout    time.Duration // keep-alive connections idle this long are closed; default 60s
	Token          string        // optional bearer token
	PublicURL      string        // absolute base for Link headers and the descriptor's Neuroglancer sources
	UI             http.Handler  // served at /
	Now            func() time.Time
	// NGSharded says when Neuroglancer annotation and skeleton sources
	// are sharded (--ng-sharded); "" is auto.
	NGSharded neuroglancer.ShardMode
	// NGMaxShardBytes bounds what one shard build holds
	// (--ng-max-shard-bytes; 0: neuroglancer.DefaultMaxShardBytes).
	NGMaxShardBytes int64
	// ReadyAny makes /readyz 200 while at least one store serves; by
	// default it is 503 while any store does not (a store that fails to
	// open keeps the replica out of its load balancer until it opens).
	ReadyAny bool
	// JSONPageBytes bounds what a JSON page holds of object ids and
	// attribute values (see jsonCodec.pageRows); default 8 MiB.
	JSONPageBytes int64
	// AnswerBytes is what answers being written may hold in all before
	// new requests wait for room (see budget.go); default the cache's
	// budget, at least 256 MiB. Without a Cache nothing is counted.
	AnswerBytes int64
	// AdminMetrics leaves /metrics to AdminHandler (serve's --admin-addr
	// listener): the public handler answers it 404, so that what is
	// exposed to clients (an Ingress) does not publish it.
	AdminMetrics bool

	// TrustProxyHeaders: without PublicURL, the descriptor's absolute URLs
	// take their scheme and host from Forwarded or X-Forwarded-Proto/-Host
	// (set it only behind a proxy that sets them); else from the request.
	TrustProxyHeaders bool
}

// Server serves the API.
type Server struct {
	o       Options
	log     *slog.Logger
	stores  map[string]*zvf.Handle
	names   []string
	m       *Metrics
	slots   chan struct{}
	mem     int64 // what answers may hold in all before new ones wait (see budget.go)
	ready   atomic.Bool
	handler http.Handler
	mux     *chi.Mux // the router behind observe, which the route-table test walks
	pools   bodyPools
	text    batchers               // the text formats' row buffers
	params  map[string][]paramSpec // every route's query parameters
	reqs    atomic.Uint64          // request ids
	// routeCtxs pools the router's route contexts (see observe).
	routeCtxs sync.Pool
	// clocks pools request clocks' timers (*clockTimer, see
	// requestCtx.arm).
	clocks sync.Pool

	fits atomic.Pointer[map[shape][]codec] // see answerFits

	// own and extra: with more than one store, each store's own tokens
	// and the tokens all share, one of which a request for a store holds
	// with its slot (see ownOf); nil with one store.
	own   map[string]chan struct{}
	extra chan struct{}

	// What every data answer's Cache-Control and Vary say (see
	// notModified), worked out once.
	cacheControl, vary string
}

// ValidStoreName reports whether s can name a store in URLs: a letter or
// digit, then up to 127 letters, digits, '.', '_' or '-'. (Checked by hand:
// a regexp with a {0,127} repeat cost every process start ~0.5 ms and 1,700
// allocations to compile.)
func ValidStoreName(s string) bool {
	if len(s) == 0 || len(s) > 128 || !isAlnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// isAlnum reports whether c is an ASCII letter or digit.
func isAlnum(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

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
	if o.JSONPageBytes <= 0 {
		o.JSONPageBytes = jsonPageHold
	}
	if o.AnswerBytes <= 0 {
		o.AnswerBytes = answerLimit(o.Cache)
	}
	s := &Server{o: o, log: o.Logger, stores: map[string]*zvf.Handle{}, m: o.Metrics,
		slots: make(chan struct{}, o.MaxConcurrent), mem: o.AnswerBytes, params: routeParams(), text: batchers{now: o.Now, pageHold: o.JSONPageBytes}}
	s.pools.init()
	// With a token, answers are for the token's holders only: browsers may
	// keep them, shared caches may not (and must key on Authorization).
	scope := "public"
	s.vary = "Accept, Accept-Encoding"
	if o.Token != "" {
		scope, s.vary = "private", "Accept, Accept-Encoding, Authorization"
	}
	s.cacheControl = "no-cache"
	if o.MaxAge > 0 {
		s.cacheControl = scope + ", max-age=" + strconv.Itoa(int(o.MaxAge.Seconds()))
	}
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
	// A quarter of the slots is kept from the shared tokens; each store
	// has an eighth of that (at least one) of its own.
	if kept := max(1, o.MaxConcurrent/4); len(s.names) > 1 && o.MaxConcurrent > kept {
		s.extra = make(chan struct{}, o.MaxConcurrent-kept)
		s.own = make(map[string]chan struct{}, len(s.names))
		for _, name := range s.names {
			s.own[name] = make(chan struct{}, max(1, kept/8))
		}
	}
	s.m.watchCache(o.Cache)
	s.routeCtxs.New = func() any { return chi.NewRouteContext() }
	s.handler = s.routes()
	s.ready.Store(true)
	return s, nil
}

// Refresh refreshes every store handle (see zvf.Handle.Refresh): stores
// whose metadata changed, or whose reads found them changed, are reopened
// with fresh caches once they have settled, and stores that failed to open
// are retried. It logs what changed and returns the first error after
// trying them all. A server checks its stores with Revalidate.
func (s *Server) Refresh(ctx context.Context) error {
	return s.refresh(ctx, false)
}

// RefreshDeep is Refresh with a walk of every object of every store (see
// zvf.Handle.RefreshDeep), for operators who rewrite data in place.
func (s *Server) RefreshDeep(ctx context.Context) error {
	return s.refresh(ctx, true)
}

func (s *Server) refresh(ctx context.Context, deep bool) error {
	var first error
	for _, n := range s.names {
		if err := s.check(ctx, n, deep); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// healthz answers that the process serves.
func healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok\n"))
}

// readyz answers whether this replica should get traffic: 503 while it
// drains, and while a store it was configured with does not serve (its
// open failed: every one of its routes answers that error), naming those
// stores; with ReadyAny one serving store is enough.
func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if !s.ready.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("draining\n"))
		return
	}
	var down []string
	for _, n := range s.names {
		if _, err := s.stores[n].Current(); err != nil {
			down = append(down, n)
		}
	}
	ready := len(down) == 0 || (s.o.ReadyAny && len(down) < len(s.names))
	msg := "ready\n"
	if len(down) > 0 {
		const most = 20 // a folder of stores may hold thousands
		names := strings.Join(down[:min(len(down), most)], ", ")
		if len(down) > most {
			names += fmt.Sprintf(" and %d more", len(down)-most)
		}
		msg = fmt.Sprintf("%d of %d stores not serving: %s\n", len(down), len(s.names), names)
		if ready {
			msg = "ready; " + msg
		}
	}
	if !ready {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_, _ = w.Write([]byte(msg))
}

// check refreshes one store and logs what came of it.
func (s *Server) check(ctx context.Context, n string, deep bool) (err error) {
	// A check runs on Revalidate's goroutine, below no request's
	// recoverer: a panic in it (a driver, a parser of the new version's
	// metadata) fails this check, never the process. The handle's lock
	// is released by its own defer; what it served, it serves still.
	defer func() {
		if v := recover(); v != nil {
			pe := cache.NewPanicError(v)
			s.log.Error("store check panicked; serving what was open", "store", n, "panic", v, "stack", string(pe.Stack))
			err = pe
		}
	}()
	f := (*zvf.Handle).Refresh
	if deep {
		f = (*zvf.Handle).RefreshDeep
	}
	// A store that did not serve is retried by each check: that it still
	// fails, or now opens, is what happened — not a change to the store.
	_, failing := s.stores[n].Current()
	changed, err := f(s.stores[n], ctx)
	switch {
	case failing != nil && err != nil:
		s.log.Warn("store does not open; serving its error", "store", n, "err", err)
	case failing != nil && changed:
		s.log.Info("store opens; serving it", "store", n)
	case err != nil:
		s.log.Warn("store check failed, or its new version does not open; serving what was open", "store", n, "err", err)
	case changed:
		s.log.Info("store changed; reopened with a fresh cache", "store", n)
	}
	return err
}

// Revalidate checks every store every interval (Refresh, or RefreshDeep
// when deep) until ctx ends, each store on its own schedule: a backend
// that hangs delays only its own store's checks, never another's. The
// schedules are spread over the interval (the i-th of n stores is first
// checked (i+1)/n of it after the start), so that many stores in one
// bucket do not send it all their listings at the same instant. Each
// check, with the reopen it may start, ends by timeout. Revalidate returns
// once ctx has ended and every check has returned.
func (s *Server) Revalidate(ctx context.Context, every, timeout time.Duration, deep bool) {
	var wg sync.WaitGroup
	for i, n := range s.names {
		wg.Go(func() {
			first := time.NewTimer(every * time.Duration(i+1) / time.Duration(len(s.names)))
			defer first.Stop()
			select {
			case <-ctx.Done():
				return
			case <-first.C:
			}
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				cctx, cancel := context.WithTimeout(ctx, timeout)
				_ = s.check(cctx, n, deep)
				cancel()
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		})
	}
	wg.Wait()
}

// Close ends the background work (level-table builds) of every store the
// server serves, every version it has opened, and waits for it: call it
// once the HTTP servers have shut down. Answers still work after, without
// building.
func (s *Server) Close() error {
	for _, n := range s.names {
		_ = s.stores[n].Close()
	}
	return nil
}

// Handler is the public HTTP handler.
func (s *Server) Handler() http.Handler { return s.handler }

// SetReady flips /readyz (false while draining).
func (s *Server) SetReady(v bool) { s.ready.Store(v) }

func (s *Server) routes() http.Handler {
	r := chi.NewRouter()
	// Every GET route answers HEAD with the same handler (net/http drops
	// the body), so health checks and caches that probe with HEAD see
	// what GET says.
	get := func(r chi.Router, pattern string, h http.HandlerFunc) {
		r.Get(pattern, h)
		r.Head(pattern, h)
	}
	// observe (see below) sits outside recoverer so that a response cut by
	// a panic is still logged and counted, as what it was.
	r.Use(s.probeOnly, s.recoverer, s.methods, s.cors, s.limits)
	get(r, "/healthz", healthz)
	get(r, "/readyz", s.readyz)
	r.Group(func(r chi.Router) {
		r.Use(s.auth)
		if !s.o.AdminMetrics {
			get(r, "/metrics", s.m.handler().ServeHTTP)
		}
		get(r, "/openapi.yaml", func(w http.ResponseWriter, _ *http.Request) {
			// Sent whole, so with its length (openapi.yaml: "An answer sent
			// whole has a Content-Length"); HEAD says it too.
			doc := OpenAPI()
			w.Header().Set("Content-Type", "application/yaml")
			w.Header().Set("Content-Length", strconv.Itoa(len(doc)))
			_, _ = w.Write(doc)
		})
		r.Group(func(r chi.Router) {
			r.Use(s.throttle, s.timeout)
			for _, rt := range apiRoutes() {
				h := func(w http.ResponseWriter, r *http.Request) error { return rt.handle(s, w, r) }
				get(r, rt.pattern, s.wrap(h))
				if rt.pattern == storeRoutes {
					get(r, rt.pattern+"/", s.wrap(h)) // the descriptor with a slash, as it always answered
				}
			}
			r.Route("/ng/{store}", s.neuroglancerRoutes().Routes)
		})
	})
	if s.o.UI != nil {
		// The viewer's static files hold no data; open, so that a browser
		// can load the page that asks for the token its data requests send.
		get(r, "/*", func(w http.ResponseWriter, r *http.Request) {
			if p := r.URL.Path; p == "/api" || p == "/ng" || strings.HasPrefix(p, "/api/") || strings.HasPrefix(p, "/ng/") {
				// A mistyped API or Neuroglancer path is still an API
				// answer, not the viewer's plain-text 404.
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
		writeProblem(w, r, problem.New(problem.MethodNotAllowed, ""))
	})
	// observe runs before the router: the request's state holds chi's
	// route context, which the router finds in the request's context and
	// uses rather than making its own (a context and a request copy a
	// request).
	s.mux = r
	return s.observe(r)
}
