// Package api is zvfserve's HTTP layer: chi routes over the zvf reader,
// one encoder per output format (JSON, NDJSON, binary), RFC 9457 errors
// from one place, and the behaviour tile servers are expected to have
// (ETags, Cache-Control, compression for text, CORS, limits, metrics).
package api

import (
	"context"
	"crypto/subtle"
	"embed"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
)

//go:embed openapi.yaml
var specFS embed.FS

// OpenAPI returns the embedded API description.
func OpenAPI() []byte {
	b, _ := specFS.ReadFile("openapi.yaml")
	return b
}

// Options configure a Server.
type Options struct {
	Stores         []*zvf.Store  // served as they are
	Handles        []*zvf.Handle // served as they are refreshed (see Server.Refresh)
	Cache          *cache.Cache
	Metrics        *Metrics // from NewMetrics; nil: a private one
	Logger         *slog.Logger
	CORSOrigins    []string      // default ["*"]
	MaxAge         time.Duration // Cache-Control max-age for data responses
	RequestTimeout time.Duration // default 30s
	MaxVertices    int64         // per response; default 1,000,000
	MaxConcurrent  int           // requests in flight; default 64
	QueueWait      time.Duration // how long a request waits for a slot; default 2s
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
		slots: make(chan struct{}, o.MaxConcurrent)}
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
// whose objects changed are reopened with fresh caches, and stores that
// failed to open are retried. It logs what changed and returns the first
// error after trying them all.
func (s *Server) Refresh(ctx context.Context) error {
	var first error
	for _, n := range s.names {
		changed, err := s.stores[n].Refresh(ctx)
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
	r.Use(s.recoverer, s.requestID, s.observe, s.methods, s.cors, s.limits)
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	r.Get("/readyz", func(w http.ResponseWriter, _ *http.Request) {
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
		r.Get("/metrics", s.m.handler().ServeHTTP)
		r.Get("/openapi.yaml", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/yaml")
			_, _ = w.Write(OpenAPI())
		})
		r.Group(func(r chi.Router) {
			r.Use(s.throttle, s.timeout)
			r.Get("/api/v1/stores", s.wrap(s.listStores))
			r.Route("/api/v1/stores/{store}", func(r chi.Router) {
				r.Get("/", s.wrap(s.describeStore))
				r.Get("/bbox", s.wrap(s.bbox))
				r.Get("/objects/{id}", s.wrap(s.object))
				r.Get("/objects/{id}/manifest", s.wrap(s.manifest))
				r.Get("/objects/{id}/levels", s.wrap(s.objectLevels))
				r.Get("/groups/{id}", s.wrap(s.group))
				r.Get("/levels/{level}/chunks", s.wrap(s.chunks))
				r.Get("/levels/{level}/chunks/{key}", s.wrap(s.chunk))
			})
		})
		if s.o.UI != nil {
			r.Handle("/*", s.o.UI)
		}
	})
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
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("panic serving request", "path", r.URL.Path, "panic", fmt.Sprint(v))
				writeProblem(w, r, classify(fmt.Errorf("panic")))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

var reqCounter atomic.Uint64

func (s *Server) requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := fmt.Sprintf("%x-%x", s.o.Now().UnixNano()&0xffffffff, reqCounter.Add(1))
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
				h.Set("Access-Control-Expose-Headers", "ETag, Link, Server-Timing, X-Request-Id, X-Next-Cursor, X-Vertex-Count, Retry-After")
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
		defer func() { <-s.slots }()
		next.ServeHTTP(w, r)
	})
}

func (s *Server) timeout(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), s.o.RequestTimeout)
		defer cancel()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// observe records metrics and an access log line per request.
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := s.o.Now()
		sw := &statusWriter{ResponseWriter: w, status: 200, private: s.o.Token != ""}
		defer func() {
			route := chi.RouteContext(r.Context())
			pattern := "unmatched"
			if route != nil && route.RoutePattern() != "" {
				pattern = route.RoutePattern()
			}
			d := s.o.Now().Sub(start)
			s.m.observe(pattern, sw.status, d)
			s.log.Info("request", "method", r.Method, "path", r.URL.Path, "route", pattern, "status", sw.status,
				"bytes", sw.bytes, "duration_ms", float64(d.Microseconds())/1000, "request_id", requestID(r.Context()))
		}()
		next.ServeHTTP(sw, r)
	})
}

// statusWriter remembers the status and whether the body has started.
type statusWriter struct {
	http.ResponseWriter
	status  int
	bytes   int64
	started bool
	private bool // token mode: no response may be stored by a shared cache
}

func (w *statusWriter) WriteHeader(code int) {
	w.start(code)
	w.ResponseWriter.WriteHeader(code)
}

// start runs once, as the status line and headers are about to go out.
func (w *statusWriter) start(code int) {
	if w.started {
		return
	}
	w.status = code
	w.started = true
	if w.private {
		makePrivate(w.Header())
	}
}

// makePrivate keeps a response out of shared caches whatever the handler
// that made it chose (the viewer's files, metrics, data): an authorized
// answer stored by a proxy would be served to clients without the token.
func makePrivate(h http.Header) {
	cc := h.Get("Cache-Control")
	switch {
	case cc == "":
		h.Set("Cache-Control", "private")
	case strings.Contains(cc, "no-store"), strings.Contains(cc, "private"):
	case strings.Contains(cc, "public"):
		h.Set("Cache-Control", strings.Replace(cc, "public", "private", 1))
	default:
		h.Set("Cache-Control", "private, "+cc)
	}
	for _, v := range h.Values("Vary") {
		if strings.Contains(v, "Authorization") {
			return
		}
	}
	h.Add("Vary", "Authorization")
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.start(http.StatusOK)
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

func (w *statusWriter) committed() bool { return w.started }

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// ---- metrics ----

// Metrics are the server's Prometheus metrics on a private registry.
type Metrics struct {
	reg       *prometheus.Registry
	requests  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	rejected  prometheus.Counter
	readBytes prometheus.Counter
	readLat   prometheus.Histogram
	cacheSet  atomic.Bool
}

// NewMetrics makes the metric set (and its registry).
func NewMetrics() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "zvfserve_http_requests_total", Help: "HTTP requests by route and status."}, []string{"route", "code"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "zvfserve_http_request_duration_seconds", Help: "HTTP request latency by route.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}}, []string{"route"})
	m.rejected = prometheus.NewCounter(prometheus.CounterOpts{Name: "zvfserve_http_rejected_total", Help: "Requests refused with 503 because every slot was busy."})
	m.readBytes = prometheus.NewCounter(prometheus.CounterOpts{Name: "zvfserve_store_read_bytes_total", Help: "Bytes read from storage."})
	m.readLat = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "zvfserve_store_read_duration_seconds", Help: "Storage read latency.",
		Buckets: []float64{.0001, .0005, .001, .005, .01, .05, .1, .5, 1, 5}})
	m.reg.MustRegister(m.requests, m.latency, m.rejected, m.readBytes, m.readLat,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return m
}

func (m *Metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

func (m *Metrics) observe(route string, code int, d time.Duration) {
	m.requests.WithLabelValues(route, fmt.Sprint(code)).Inc()
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
