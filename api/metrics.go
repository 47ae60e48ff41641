package api

import (
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/zvfserve/zvfserve/api/problem"
	"github.com/zvfserve/zvfserve/cache"
)

// Metrics are the server's Prometheus metrics on a private registry.
type Metrics struct {
	reg             *prometheus.Registry
	requests        *prometheus.CounterVec
	problems        *prometheus.CounterVec
	latency         *prometheus.HistogramVec
	rejected        prometheus.Counter
	inFlight        prometheus.Gauge
	connOpen        prometheus.Gauge
	connIdleN       prometheus.Gauge
	connIdle        prometheus.Counter
	connSilent      prometheus.Counter
	connRefuse      prometheus.Counter
	connProbe       prometheus.Counter
	connProbeClosed prometheus.Counter
	readBytes       prometheus.Counter
	readLat         prometheus.Histogram
	cacheSet        atomic.Bool
	// series are the request series by seriesKey, looked up once each:
	// the vectors' own lookup hashes the label values and formats the
	// code on every request.
	series sync.Map // seriesKey -> *requestSeries
}

// seriesKey names one request series: a request's route, code and outcome.
type seriesKey struct {
	route   string
	code    int
	outcome string
}

// requestSeries are the series one request is counted in.
type requestSeries struct {
	requests prometheus.Counter
	latency  prometheus.Observer
}

// NewMetrics makes the metric set (and its registry).
func NewMetrics() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "zvfserve_http_requests_total",
		Help: "HTTP requests by route, status and outcome (complete, or how the response was cut: error, stalled, disconnected, timeout)."},
		[]string{"route", "code", "outcome"})
	// By type, which the status does not tell: storage-denied and
	// backend-unavailable are both 502, overloaded and store-changing both
	// 503. Every type is there from the start, at 0, for alerts to watch.
	m.problems = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "zvfserve_http_problems_total",
		Help: "Requests answered with a problem document, by its type (the end of its type URI: backend-unavailable, storage-denied, store-changing, overloaded, timeout, cancelled, not-found, …)."},
		[]string{"type"})
	for _, k := range problem.Kinds() {
		m.problems.WithLabelValues(string(k))
	}
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "zvfserve_http_request_duration_seconds", Help: "HTTP request latency by route.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}}, []string{"route"})
	m.rejected = prometheus.NewCounter(prometheus.CounterOpts{Name: "zvfserve_http_rejected_total", Help: "Requests refused with 503 because every slot was busy, or answers in flight held the memory budget, for the whole queue wait."})
	m.inFlight = prometheus.NewGauge(prometheus.GaugeOpts{Name: "zvfserve_http_requests_in_flight", Help: "Data requests at work, holding one of the --max-concurrent slots (a response waiting on its client holds none)."})
	m.connOpen = prometheus.NewGauge(prometheus.GaugeOpts{Name: "zvfserve_http_connections_open", Help: "Client connections open, those on probe slots past the cap included."})
	m.connIdleN = prometheus.NewGauge(prometheus.GaugeOpts{Name: "zvfserve_http_connections_idle", Help: "Keep-alive connections open and idle between requests."})
	m.connIdle = prometheus.NewCounter(prometheus.CounterOpts{Name: "zvfserve_http_connections_idle_closed_total", Help: "Idle keep-alive connections closed to make room for new ones at the connection cap."})
	m.connSilent = prometheus.NewCounter(prometheus.CounterOpts{Name: "zvfserve_http_connections_silent_closed_total", Help: "Connections that had sent nothing for a second, closed to make room for new ones at the connection cap."})
	m.connRefuse = prometheus.NewCounter(prometheus.CounterOpts{Name: "zvfserve_http_connections_refused_total", Help: "Connections refused on arrival (a 503, then closed): at the cap, with none idle or silent and no probe slot for them."})
	m.connProbe = prometheus.NewCounter(prometheus.CounterOpts{Name: "zvfserve_http_connections_probe_slot_total", Help: "Connections admitted past the cap on a slot that answers only /healthz and /readyz."})
	m.connProbeClosed = prometheus.NewCounter(prometheus.CounterOpts{Name: "zvfserve_http_connections_probe_slot_closed_total", Help: "Connections on a probe slot whose request had not been read, closed to make room for a new one."})
	m.readBytes = prometheus.NewCounter(prometheus.CounterOpts{Name: "zvfserve_store_read_bytes_total", Help: "Bytes read from storage."})
	m.readLat = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "zvfserve_store_read_duration_seconds", Help: "Storage read latency.",
		Buckets: []float64{.0001, .0005, .001, .005, .01, .05, .1, .5, 1, 5}})
	m.reg.MustRegister(m.requests, m.problems, m.latency, m.rejected, m.inFlight, m.connOpen, m.connIdleN, m.connIdle, m.connSilent, m.connRefuse, m.connProbe, m.connProbeClosed, m.readBytes, m.readLat,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfo(ReadBuild()))
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
	k := seriesKey{route, code, outcome}
	v, ok := m.series.Load(k)
	if !ok {
		// Routes, codes and outcomes are few: the map stays small.
		v, _ = m.series.LoadOrStore(k, &requestSeries{requests: m.requests.WithLabelValues(route, strconv.Itoa(code), outcome),
			latency: m.latency.WithLabelValues(route)})
	}
	rs := v.(*requestSeries)
	rs.requests.Inc()
	rs.latency.Observe(d.Seconds())
}

// problem counts a request answered with a problem of kind k.
func (m *Metrics) problem(k problem.Kind) {
	m.problems.WithLabelValues(string(k)).Inc()
}

func (m *Metrics) watchCache(c *cache.Cache) {
	if c == nil || !m.cacheSet.CompareAndSwap(false, true) {
		return
	}
	stat := func(f func(cache.Stats) int64) func() float64 {
		return func() float64 { return float64(f(c.Stats())) }
	}
	m.reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "zvfserve_cache_hits_total", Help: "Cache reads answered from a stored value."}, stat(func(s cache.Stats) int64 { return s.Hits })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "zvfserve_cache_misses_total", Help: "Cache reads that found no stored value nor a load in flight to share: each starts a load, unless its request had already ended."}, stat(func(s cache.Stats) int64 { return s.Misses })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "zvfserve_cache_evictions_total", Help: "Cache evictions."}, stat(func(s cache.Stats) int64 { return s.Evictions })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "zvfserve_cache_deduplicated_total", Help: "Cache reads that shared another read's load in flight (given its result, or gave up waiting for it); each read counts once, as a hit, a miss or this."}, stat(func(s cache.Stats) int64 { return s.Deduped })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "zvfserve_cache_bytes", Help: "Bytes held by the cache."}, stat(func(s cache.Stats) int64 { return s.Bytes })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "zvfserve_cache_items", Help: "Entries held by the cache."}, stat(func(s cache.Stats) int64 { return s.Items })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "zvfserve_cache_budget_bytes", Help: "The cache's byte budget."}, stat(func(s cache.Stats) int64 { return s.Budget })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "zvfserve_answer_bytes", Help: "Bytes answers being written hold (buffers, held JSON members), counted against the cache's budget."},
			stat(func(s cache.Stats) int64 { return s.Reserved })),
	)
}
