// Package neuroglancer serves ZVF stores as Neuroglancer "precomputed"
// sources under /ng/{store}/: annotations (points, polylines, lines) with a
// spatial index built from the store's pyramid, skeletons with segment
// properties, and meshes (legacy, and multi-resolution Draco: multilod.go).
// docs/neuroglancer.md describes the
// routes and how ZVF levels become Neuroglancer's levels of detail.
//
// The package reads stores through zvf only; the HTTP layer that mounts it
// (api) gives it the request's store, turns its errors into problem
// documents, and sets validators, through Options.
package neuroglancer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/zvfserve/zvfserve/api/problem"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
)

// Options connect the routes to the server that mounts them.
type Options struct {
	// Store returns the request's store (the {store} route parameter) as
	// served now, or the error that keeps it from being served.
	Store func(*http.Request) (*zvf.Store, error)
	// Serve turns a handler into an http.HandlerFunc that writes its error
	// as a problem document (and may retry it on a newer store version).
	Serve func(func(http.ResponseWriter, *http.Request) error) http.HandlerFunc
	// NotModified sets an answer's ETag (given) and Cache-Control (unless
	// the handler set one), and reports whether the client's copy is
	// current (a 304 has then been written).
	NotModified func(w http.ResponseWriter, r *http.Request, etag string) bool
	// NotModifiedFound is NotModified for a handler that has found what
	// it answers (a cell of the grid, an annotation id below the count):
	// an If-Match naming none of etag is answered 412 now, before any
	// of the answer's chunks is read. nil: NotModified.
	NotModifiedFound func(w http.ResponseWriter, r *http.Request, etag string) bool
	// OtherVersion checks the store now for a request whose path names
	// another version than st's (an info's versioned key): an error
	// (matching zvf.ErrChanged when a newer version opened, which Serve
	// retries on it), or nil when st is still the version served; nil:
	// no check.
	OtherVersion func(r *http.Request, st *zvf.Store) error
	// ContentCoding picks "zstd", "gzip" or "" (identity) from an
	// Accept-Encoding header, as the server does for its own answers;
	// nil: always identity.
	ContentCoding func(acceptEncoding string) string
	// Cache holds plans and encoded answers, under each store's own keys
	// (zvf.Store.CacheKey); nil: nothing is kept.
	Cache zvf.Cache
	// MaxAnnotations bounds the annotations of a cell and the vertices of
	// a skeleton, mesh or cell of polylines (0: no bound).
	MaxAnnotations int64
	// Sharded says when annotation and skeleton sources are served as
	// shard files (sharded.go); "" is ShardAuto.
	Sharded ShardMode
	// ShardAbove is ShardAuto's threshold in keys (0: AutoShardKeys).
	ShardAbove int64
	// MaxShardBytes bounds what one shard build holds (0:
	// DefaultMaxShardBytes); a larger shard is read from its layout, and
	// only a single chunk larger is a too-large problem.
	MaxShardBytes int64
	Now           func() time.Time
	// Logger tells the operator what only they can fix (a spatial index
	// larger than the cache, whose source is refused); nil: nothing is
	// logged.
	Logger *slog.Logger
}

// Server serves the Neuroglancer routes.
type Server struct {
	o    Options
	zstd *zstd.Encoder
	// shardScale multiplies the byte estimates that size shards: 1, but
	// in tests (export_test.go), which want small stores in many shards.
	shardScale int64
	// tooBig holds, per store and annotation kind, the last plan found
	// larger than the cache (tooBigPlan): its source is refused.
	tooBig sync.Map
	// notKept holds, per store, source and shard, the cache key of the
	// last shard built that the cache did not keep: its Range reads are
	// answered from its layout (shardRange).
	notKept sync.Map
	// zeroLabels is the largest segments chunk's bytes, all background,
	// made on first use and only ever read: every chunk is a prefix, so
	// a request allocates no 256 KiB of zeros.
	zeroLabels func() []byte
	// overBound holds, per store, source and shard, the cache key of the
	// last shard whose build passed MaxShardBytes: every read of it is
	// answered from its layout.
	overBound sync.Map
	// chunksBuilt counts the shard chunks built: for whole shards, for
	// layouts, for Range reads (tests read it: ChunksBuilt).
	chunksBuilt atomic.Int64
	// cellVariant is what a spatial cell's ETag covers beside its path:
	// the cell bound, which aims the coarse levels (plan.fillForViews),
	// so that a cell kept from a server of another bound is not vouched
	// for by a 304.
	cellVariant string
	// shapedBy names the options that shape what the cache holds (see
	// cacheKey).
	shapedBy string
}

// New builds a Server.
func New(o Options) *Server {
	if o.Now == nil {
		o.Now = time.Now
	}
	// EncodeAll is safe for concurrent use; answers are compressed once
	// and cached, so the default level is worth its time.
	z, _ := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(1<<20))
	zeros := sync.OnceValue(func() []byte { return make([]byte, 8*labelChunk*labelChunk*labelChunk) })
	s := &Server{o: o, zstd: z, shardScale: 1, zeroLabels: zeros, cellVariant: fmt.Sprintf("cells<=%d", o.MaxAnnotations)}
	s.shapedBy = s.cacheVariant()
	return s
}

// cacheVariant names the options that shape what the cache holds: the
// cell bound (--max-vertices), which aims a plan's spatial levels
// (plan.fillForViews) and so every cell, shard and info made from it,
// and is what a skeleton, mesh or object's answer is refused over before
// it is kept; and the byte scale that sizes shard specs. Servers of
// other options may share one cache (one process's API and a test's
// second server, or a cache handed to several): each keeps its own
// entries. Before, a plan built under one bound was served by a server
// of another, whose info then listed levels its cells refused as too
// large. The sharding mode and MaxShardBytes are not here: the first
// decides only whether the entries are asked for (infos name their mode
// in their keys), the second only when a build stops, which is not kept.
func (s *Server) cacheVariant() string {
	return fmt.Sprintf("%s;scale=%d", s.cellVariant, s.shardScale)
}

// cacheKey is the cache key of key's entry of st under s's options.
func (s *Server) cacheKey(st *zvf.Store, key string) string {
	return st.CacheKey("neuroglancer", s.shapedBy, key)
}

// Routes adds the routes, relative to /ng/{store}, to r. Every route
// answers GET and HEAD.
func (s *Server) Routes(r chi.Router) {
	get := func(pattern string, h func(http.ResponseWriter, *http.Request) error) {
		f := s.o.Serve(h)
		r.Get(pattern, f)
		r.Head(pattern, f)
	}
	// What an info names by a key (see versioned) is also answered
	// without the version, as it was before keys had one.
	keyed := func(dir, rest string, h func(http.ResponseWriter, *http.Request) error) {
		get(dir+"/"+rest, h)
		get(dir+"/v{"+versionParam+"}/"+rest, func(w http.ResponseWriter, r *http.Request) error {
			if v := chi.URLParam(r, versionParam); !versionForm(v) {
				return s.notAVersion(r, v)
			}
			return h(w, r)
		})
	}
	for _, route := range []string{"annotations", "lines"} {
		get("/"+route+"/info", s.annotationInfo(route))
		keyed("/"+route, "spatial{level}/{cell}", s.cell(route))
		keyed("/"+route, "by_id/{id}", s.byID(route))
		keyed("/"+route, relationshipKey+"/{id}", s.related(route))
	}
	// Skeletons and multilod meshes are also answered under a version: the
	// segments source's info names them there (segments.go).
	keyed("/skeletons", "info", s.skeletonInfo)
	keyed("/skeletons", "seg_props/info", s.segProps("skeletons"))
	keyed("/skeletons", "{id}", s.skeleton)
	get("/meshes/info", s.meshInfo)
	keyed("/meshes", "seg_props/info", s.segProps("meshes"))
	get("/meshes/{id}:0", s.meshManifest)
	get("/meshes/frag/{id}", s.meshFragment)
	keyed("/multilod", "info", s.multilodInfo)
	keyed("/multilod", "seg_props/info", s.segProps("multilod"))
	keyed("/multilod", "{id}.index", s.multilodFile(true))
	keyed("/multilod", "{id}", s.multilodFile(false))
	get("/segments/info", s.segmentsInfo)
	keyed("/segments", labelsKey+"/{scale}/{chunk}", s.segmentsChunk)
	get("/density/info", s.densityInfo)
	keyed("/density", "{key}/{chunk}", s.densityChunk)
}

// versionParam is the route parameter of a versioned key's version.
const versionParam = "version"

// versioned is key as an info of st names it: under the store's version
// ("v<revision>/spatial0"). Neuroglancer reads an info once and then
// fetches what its keys name, relative to it and without validators; a
// viewer holding the info of a version before a change then names that
// version, and source answers it 410 store-changed instead of the new
// version's bytes, which it would decode with the old layout (another
// sharding, grid or set of scales) and draw wrongly without a word.
func versioned(st *zvf.Store, key string) string { return "v" + keyVersion(st) + "/" + key }

// notAVersion is the 404 of a versioned key's path whose version v no
// info names (see versionForm). An empty one ("v/") would be answered as
// the unversioned path, from whatever version is current, which is what
// a versioned key exists to prevent; another would be a 410 saying the
// store changed or an earlier release named it, neither of which is so.
func (s *Server) notAVersion(r *http.Request, v string) error {
	st, err := s.o.Store(r)
	if err != nil {
		return err
	}
	if v == "" {
		return notFoundf("store %q: the path's version is empty (\"v/\"): a versioned key names the version its source's info was read at, v%s/… for the version served now; read the source's info for its keys",
			st.Name(), keyVersion(st))
	}
	return notFoundf("store %q: %q is not a version a Neuroglancer info names (v<revision>.<layout>: v%s/… for the version served now); read the source's info for its keys",
		st.Name(), "v"+v, keyVersion(st))
}

// versionForm reports whether v is a version as infos name them: a
// store revision (hexadecimal), then a dot and the layout's number —
// or the revision alone, as infos named it before layouts.
func versionForm(v string) bool {
	rev, layout, dotted := strings.Cut(v, ".")
	hex := func(s string) bool {
		return s != "" && strings.IndexFunc(s, func(c rune) bool { return !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') }) < 0
	}
	digits := func(s string) bool {
		return s != "" && strings.IndexFunc(s, func(c rune) bool { return c < '0' || c > '9' }) < 0
	}
	return hex(rev) && (!dotted || digits(layout))
}

// keyFor is key as the info r asks for names it: under the version, or,
// for an info itself read under a version (the segments source names
// skeletons and multilod meshes there), relative to it as it is.
func keyFor(r *http.Request, st *zvf.Store, key string) string {
	if chi.URLParam(r, versionParam) != "" {
		return key
	}
	return versioned(st, key)
}

// keyVersion is what a versioned key names: the store's revision and the
// encoding of what the key holds (recordLayout), "<revision>.<layout>".
func keyVersion(st *zvf.Store) string { return st.Revision() + "." + recordLayout }

// recordLayout numbers how the sources encode what they send — an
// annotation's record and its properties, cells, infos — and is bumped
// when an upgrade changes that. It is in every versioned key and every
// validator, so a viewer holding an info (or cells) of an earlier
// zvfserve for the same store version is not sent records it would
// decode with the old property list: 2, line annotations carry their
// edges' link attributes; 3, coarse spatial levels hold what a view of
// their cells draws (plan.fillForViews), so cells under the same key
// hold other annotations; 4, that fill counts a polyline's vertices, so
// a polyline source's coarse cells hold fewer.
const recordLayout = "4"

// geometry is the store's primary geometry.
func geometry(info *zvf.Info) string {
	if len(info.GeometryTypes) == 0 {
		return "point_cloud"
	}
	return info.GeometryTypes[0]
}

// RoutesOf lists the Neuroglancer sources a store has ("annotations",
// "lines", "skeletons", "meshes", "multilod", "segments", "density"), in
// that order: a store with skeletons or multilod meshes also has them as
// segments (segments.go), and a store of three axes its density volume.
func RoutesOf(st *zvf.Store) []string {
	routes := objectRoutes(st)
	if has(routes, "skeletons") || has(routes, "multilod") {
		routes = append(routes, "segments")
	}
	if len(densityScales(st)) > 0 {
		routes = append(routes, "density")
	}
	return routes
}

// objectRoutes are the sources that draw a store's vertices and objects.
func objectRoutes(st *zvf.Store) []string {
	info := st.Info()
	objects := len(info.Levels) > 0 && info.Levels[0].ObjectCount > 0
	switch geometry(info) {
	case "point_cloud":
		return []string{"annotations"}
	case "line", "polyline", "streamline", "graph", "skeleton":
		if !objects {
			return nil
		}
		if info.Dims != 3 {
			return []string{"annotations", "lines"}
		}
		return []string{"annotations", "lines", "skeletons"}
	case "mesh":
		if objects && info.Dims == 3 {
			return []string{"meshes", "multilod"}
		}
	}
	return nil
}

// kindOf is what one annotation of a route stands for in st.
func kindOf(st *zvf.Store, route string) kind {
	switch {
	case route == "lines":
		return kindLine
	case geometry(st.Info()) == "point_cloud":
		return kindPoint
	case geometry(st.Info()) == "graph" || geometry(st.Info()) == "skeleton":
		return kindLine
	}
	return kindPolyline
}

// source returns the request's store if it has the route, else a 404 that
// names the routes it has.
func (s *Server) source(r *http.Request, route string) (*zvf.Store, error) {
	st, err := s.o.Store(r)
	if err != nil {
		return nil, err
	}
	if v := chi.URLParam(r, versionParam); v != "" && v != keyVersion(st) {
		if rev, layout, _ := strings.Cut(v, "."); rev == st.Revision() {
			// In a fleet being upgraded the info may come from a replica
			// of the later release, and its keys reach one of the earlier.
			ours, _ := strconv.Atoi(recordLayout)
			if n, err := strconv.Atoi(layout); err == nil && n > ours {
				return nil, problem.Newf(problem.StoreChanged, "this path was named by the Neuroglancer info of a later zvfserve, which encodes store %q's sources otherwise (layout %s; this server's is %s): replicas of two releases serve this store; reload the source's info once they all run one (in Neuroglancer, reload the page or add the layer again)",
					st.Name(), layout, recordLayout)
			}
			return nil, problem.Newf(problem.StoreChanged, "this path was named by the Neuroglancer info of an earlier zvfserve, which encoded store %q's sources otherwise (layout %s; this server's is %s): reload the source's info (in Neuroglancer, reload the page or add the layer again)",
				st.Name(), layout, recordLayout)
		}
		// Behind a load balancer the info may come from a replica that
		// saw the store's next version first.
		if s.o.OtherVersion != nil {
			if err := s.o.OtherVersion(r, st); err != nil {
				return nil, err
			}
		}
		return nil, problem.Newf(problem.StoreChanged, "store %q is not at version %s, which the Neuroglancer info that named this path describes: the store has changed since (it is at version %s); reload the source's info (in Neuroglancer, reload the page or add the layer again)",
			st.Name(), v, st.Revision())
	}
	has := RoutesOf(st)
	for _, h := range has {
		if h == route {
			return st, nil
		}
	}
	paths := make([]string, len(has))
	for i, h := range has {
		paths[i] = "/ng/" + st.Name() + "/" + h
	}
	what := "no Neuroglancer sources"
	if len(paths) > 0 {
		what = "these Neuroglancer sources: " + strings.Join(paths, ", ")
	}
	return nil, notFoundf("store %q (%s, %d axes) has no %s source; it has %s", st.Name(), geometry(st.Info()), st.Info().Dims, route, what)
}

// cached loads key of st's answers through the cache.
func (s *Server) cached(ctx context.Context, st *zvf.Store, key string, load func(ctx context.Context) (any, int64, error)) (any, error) {
	if s.o.Cache == nil {
		v, _, err := load(ctx)
		return v, err
	}
	// A source's index, shards and segment lists are built from many
	// objects, which can take longer than one request may wait: built
	// apart from the requests (see cache.Cache.GetDetached), a build goes
	// on while any request waits for it, and each request still ends by
	// its own deadline.
	if d, ok := s.o.Cache.(detachedCache); ok {
		return d.GetDetached(ctx, s.cacheKey(st, key), load)
	}
	return s.o.Cache.Get(ctx, s.cacheKey(st, key), load)
}

// detachedCache is a cache that can build a value apart from its callers
// (*cache.Cache).
type detachedCache interface {
	GetDetached(ctx context.Context, key string, load func(ctx context.Context) (any, int64, error)) (any, error)
}

func (s *Server) cachedBytes(ctx context.Context, st *zvf.Store, key string, build func(ctx context.Context) ([]byte, error)) ([]byte, error) {
	v, err := s.cached(ctx, st, key, func(ctx context.Context) (any, int64, error) {
		b, err := build(ctx)
		return b, int64(len(b)) + 64, err
	})
	if err != nil {
		return nil, err
	}
	return v.([]byte), nil
}

func (s *Server) plan(ctx context.Context, st *zvf.Store, k kind) (*plan, error) {
	key := "plan\x00" + k.annotationType()
	full := s.cacheKey(st, key)
	tag := st.Name() + "\x00" + k.annotationType()
	if v, ok := s.tooBig.Load(tag); ok && v.(tooBigPlan).key == full {
		return nil, v.(tooBigPlan).refusal(st, k, s.budget())
	}
	v, err := s.cached(ctx, st, key, func(ctx context.Context) (any, int64, error) {
		p, err := buildPlan(ctx, st, k, s.o.MaxAnnotations)
		if err != nil {
			return nil, 0, err
		}
		return p, p.cacheBytes(), nil
	})
	if err != nil {
		return nil, err
	}
	// Every request that shared the build is refused, not only the one
	// whose load ran.
	p := v.(*plan)
	if b := s.budget(); b > 0 && p.cacheBytes() > b {
		return nil, s.refusePlan(st, k, tag, tooBigPlan{key: full, size: p.cacheBytes()})
	}
	return p, nil
}

// cacheBytes is what the plan is counted as in the cache.
func (p *plan) cacheBytes() int64 { return p.size + 1024 }

// tooBigPlan is a plan found larger than the whole cache: its cache key
// (the store version and kind) and its size.
type tooBigPlan struct {
	key  string
	size int64
}

// refusal is the problem a request of the plan's source is answered.
func (t tooBigPlan) refusal(st *zvf.Store, k kind, budget int64) error {
	return tooLargef("store %q: the Neuroglancer %s annotations' spatial index takes %d bytes, more than the whole cache holds (--cache-bytes %d), so it could not be kept and every request of the source would build it again from all of level 0; raise --cache-bytes above %d to serve this source",
		st.Name(), k.annotationType(), t.size, budget, t.size)
}

// refusePlan records a plan just built that no cache of this budget can
// keep, logs it once per store version and kind (only the operator can
// fix it), and returns the refusal. Every request of the source is then
// refused at once, until the store version changes: before, each built
// the whole index again from level 0's manifests (half a second and 50 MB
// a request for 50,000 polylines), and keeping it outside the cache would
// be memory the byte budget does not see.
func (s *Server) refusePlan(st *zvf.Store, k kind, tag string, t tooBigPlan) error {
	prev, loaded := s.tooBig.Swap(tag, t)
	if s.o.Logger != nil && (!loaded || prev.(tooBigPlan).key != t.key) {
		s.o.Logger.Warn("a Neuroglancer spatial index is larger than the cache, so its source is refused; raise --cache-bytes",
			"store", st.Name(), "source", k.annotationType(), "index_bytes", t.size, "cache_bytes", s.budget())
	}
	return t.refusal(st, k, s.budget())
}

// budget is the cache's byte budget (0: unknown, or no cache).
func (s *Server) budget() int64 {
	if b, ok := s.o.Cache.(interface{ Stats() cache.Stats }); ok {
		return b.Stats().Budget
	}
	return 0
}

const (
	mediaJSON   = "application/json"
	mediaBinary = "application/octet-stream"
)

// notModified sets the answer's validators — a strong ETag from the store
// version, the path and the content coding the answer will have — and
// reports whether the client's copy is current (a 304 is then written).
func (s *Server) notModified(w http.ResponseWriter, r *http.Request, st *zvf.Store) bool {
	return s.notModifiedAs(w, r, st, "")
}

// notModifiedAs is notModified for an answer that also depends on
// variant, which the ETag then covers.
func (s *Server) notModifiedAs(w http.ResponseWriter, r *http.Request, st *zvf.Store, variant string) bool {
	return s.o.NotModified(w, r, s.etag(r, st, variant))
}

// notModifiedFound is notModified for a handler that has found what it
// answers without reading it (see Options.NotModifiedFound).
func (s *Server) notModifiedFound(w http.ResponseWriter, r *http.Request, st *zvf.Store) bool {
	return s.notModifiedFoundAs(w, r, st, "")
}

// notModifiedFoundAs is notModifiedFound for an answer that also depends
// on variant, which the ETag then covers.
func (s *Server) notModifiedFoundAs(w http.ResponseWriter, r *http.Request, st *zvf.Store, variant string) bool {
	if s.o.NotModifiedFound == nil {
		return s.notModifiedAs(w, r, st, variant)
	}
	return s.o.NotModifiedFound(w, r, s.etag(r, st, variant))
}

// etag is the strong ETag of r's answer from st: the store version, the
// path, the content coding the answer will have, and variant.
func (s *Server) etag(r *http.Request, st *zvf.Store, variant string) string {
	h := sha256.New()
	for _, p := range [...]string{st.Revision(), recordLayout, r.URL.Path, s.coding(r), variant} {
		_, _ = io.WriteString(h, p)
		_, _ = h.Write([]byte{0})
	}
	return `"` + hex.EncodeToString(h.Sum(nil)[:12]) + `"`
}

// coding is the content coding an answer to r gets: none for a Range
// request, else zstd or gzip when the client takes it (an answer under
// minCompressed bytes goes out as it is whatever its coding).
func (s *Server) coding(r *http.Request) string {
	if r.Header.Get("Range") != "" || s.o.ContentCoding == nil {
		return ""
	}
	return s.o.ContentCoding(r.Header.Get("Accept-Encoding"))
}

// minCompressed is the smallest answer worth compressing.
const minCompressed = 512

// sendCached sends the store's answer under key, built by build when the
// cache does not hold it.
func (s *Server) sendCached(w http.ResponseWriter, r *http.Request, st *zvf.Store, key, contentType string, start time.Time, build func(ctx context.Context) ([]byte, error)) error {
	body, err := s.cachedBytes(r.Context(), st, key, build)
	if err != nil {
		return err
	}
	return s.send(w, r, st, key, contentType, body, start)
}

// send writes an answer: a Range request gets the bytes it names (206,
// never encoded); otherwise the answer is compressed with zstd or gzip
// when the client takes it (each encoding made once and cached).
func (s *Server) send(w http.ResponseWriter, r *http.Request, st *zvf.Store, key, contentType string, body []byte, start time.Time) error {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Accept-Ranges", "bytes")
	timing := func() string {
		return fmt.Sprintf("total;dur=%.3f", float64(s.o.Now().Sub(start).Microseconds())/1000)
	}
	if r.Header.Get("Range") != "" {
		return s.sendRange(w, r, bytes.NewReader(body), int64(len(body)), start)
	}
	if enc := s.coding(r); enc != "" && len(body) >= minCompressed {
		z, err := s.cachedBytes(r.Context(), st, key+"\x00"+enc, func(context.Context) ([]byte, error) { return s.compress(enc, body) })
		if err != nil {
			return err
		}
		body = z
		h.Set("Content-Encoding", enc)
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Server-Timing", timing())
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(body)
	return err
}

// sendRange answers a Range request with the bytes of content (size
// bytes) it names: 206, never encoded; the caller has set the headers
// but Server-Timing.
func (s *Server) sendRange(w http.ResponseWriter, r *http.Request, content io.ReadSeeker, size int64, start time.Time) error {
	asked := r.Header.Get("Range")
	w.Header().Set("Server-Timing", fmt.Sprintf("total;dur=%.3f", float64(s.o.Now().Sub(start).Microseconds())/1000))
	rw := &rangeWriter{ResponseWriter: w}
	if kept, ok := withoutEmptySuffixes(asked); ok {
		if kept == "" {
			r.Header.Del("Range") // not in bytes: the whole answer, as it is
		} else {
			r.Header.Set("Range", kept)
		}
		http.ServeContent(rw, r, "", time.Time{}, content)
	} else {
		rw.unsatisfiable = true
	}
	if rw.unsatisfiable {
		w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", size))
		return unsatisfiable(fmt.Sprintf("the range %q lies outside the answer's %d bytes", asked, size))
	}
	return nil
}

// withoutEmptySuffixes drops the suffix ranges of length zero ("-0")
// from a Range header: they select nothing, so alone they are
// unsatisfiable (RFC 9110 14.1.1; ok is false) and beside other ranges
// they are ignored. http.ServeContent takes one for a range of no bytes
// and answers 206 with the invalid Content-Range "bytes N-(N-1)/N".
// A Range in another unit, or not of the form unit=set, is ignored (kept
// is "", ok true): RFC 9110 14.2 has an origin server ignore a range unit
// it does not understand, where http.ServeContent answers 416.
func withoutEmptySuffixes(v string) (kept string, ok bool) {
	unit, set, found := strings.Cut(v, "=")
	if !found || !strings.EqualFold(strings.TrimSpace(unit), "bytes") {
		return "", true
	}
	var out []string
	for spec := range strings.SplitSeq(set, ",") {
		t := strings.TrimSpace(spec)
		if n, isSuffix := strings.CutPrefix(t, "-"); isSuffix && n != "" && strings.Trim(n, "0") == "" {
			continue
		}
		out = append(out, spec)
	}
	if len(out) == 0 {
		return "", false
	}
	return unit + "=" + strings.Join(out, ","), true
}

// rangeWriter lets http.ServeContent answer a Range request (one range or
// several, If-Range) but keeps its plain-text 416: the caller answers
// that as a problem, like every other error.
type rangeWriter struct {
	http.ResponseWriter
	unsatisfiable bool
}

func (w *rangeWriter) WriteHeader(code int) {
	if code == http.StatusRequestedRangeNotSatisfiable {
		w.unsatisfiable = true
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *rangeWriter) Write(p []byte) (int, error) {
	if w.unsatisfiable {
		return len(p), nil
	}
	return w.ResponseWriter.Write(p)
}

func (s *Server) compress(enc string, body []byte) ([]byte, error) {
	if enc == "zstd" {
		return s.zstd.EncodeAll(body, make([]byte, 0, len(body)/2)), nil
	}
	var b bytes.Buffer
	zw, err := gzip.NewWriterLevel(&b, gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(body); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// parseID reads the {id} route parameter: a uint64 in decimal, as
// Neuroglancer writes segment and annotation ids. A ZVF id is an int64
// with the same bits (the answers name object -1 as 18446744073709551615,
// as a relationship's uint64 does).
func parseID(r *http.Request) (int64, error) {
	v := chi.URLParam(r, "id")
	id, err := strconv.ParseUint(v, 10, 64)
	if err != nil || strconv.FormatUint(id, 10) != v {
		return 0, badParam(fmt.Sprintf("id %q is not a decimal integer", v))
	}
	return int64(id), nil
}

// ---- annotations ----

func (s *Server) annotationInfo(route string) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		start := s.o.Now()
		st, done, err := s.sourceRequest(w, r, route)
		if err != nil || done {
			return err
		}
		k := kindOf(st, route)
		p, err := s.plan(r.Context(), st, k)
		if err != nil {
			return err
		}
		sh, err := s.shards(r.Context(), st, p)
		if err != nil {
			return err
		}
		key := "info\x00" + k.annotationType()
		if sh != nil {
			key += "\x00sharded" // a cache may be shared by servers of both modes
		}
		return s.sendCached(w, r, st, key, mediaJSON, start, func(context.Context) ([]byte, error) { return p.infoJSON(st, sh) })
	}
}

// annotationSource is the annotation data routes' common start: the
// route's store, its annotation kind and the store's plan for that kind.
func (s *Server) annotationSource(r *http.Request, route string) (*zvf.Store, kind, *plan, error) {
	st, err := s.source(r, route)
	if err != nil {
		return nil, 0, nil, err
	}
	k := kindOf(st, route)
	p, err := s.plan(r.Context(), st, k)
	if err != nil {
		return nil, 0, nil, err
	}
	return st, k, p, nil
}

// annotationOf is annotationSource for a route naming one object id; the
// id is checked first, so a malformed one is a 400 whatever the store.
func (s *Server) annotationOf(r *http.Request, route string) (*zvf.Store, kind, *plan, int64, error) {
	id, err := parseID(r)
	if err != nil {
		return nil, 0, nil, 0, err
	}
	st, k, p, err := s.annotationSource(r, route)
	if err != nil {
		return nil, 0, nil, 0, err
	}
	return st, k, p, id, nil
}

func (s *Server) cell(route string) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		start := s.o.Now()
		st, k, p, err := s.annotationSource(r, route)
		if err != nil {
			return err
		}
		n, sl, ok := p.level(chi.URLParam(r, "level"))
		if !ok {
			return notFoundf("store %q: no spatial level %q (the %s source has spatial0 to spatial%d)", st.Name(), chi.URLParam(r, "level"), route, len(p.levels)-1)
		}
		if name := chi.URLParam(r, "cell"); isShardFile(name) {
			sh, err := s.shards(r.Context(), st, p)
			if err != nil {
				return err
			}
			if sh == nil {
				return notFoundf("store %q: the %s source is not sharded (%d annotations), so it has no shard file %s", st.Name(), route, p.total, name)
			}
			source := fmt.Sprintf("%s/spatial%d", route, n)
			holds := func(_ context.Context, shard uint64) (bool, error) {
				return p.spatialHolds(n, sh.spatial[n], shard, s.o.MaxAnnotations)
			}
			return s.shardFile(w, r, st, sh.spatial[n], source, name, start, holds,
				func(b *shardBuild) (int64, error) { return p.leastSpatialShard(n, b) }, func(ctx context.Context, b *shardBuild) error {
					return p.spatialShard(ctx, n, s.o.MaxAnnotations, b)
				})
		}
		key, err := p.cellKey(sl, chi.URLParam(r, "cell"))
		if err != nil {
			return err
		}
		if cl := sl.cells[key]; cl != nil {
			if err := p.checkSize(n, key, cl, s.o.MaxAnnotations); err != nil {
				return err
			}
		}
		if s.notModifiedFoundAs(w, r, st, s.cellVariant) { // every cell of the grid is one, empty or not
			return nil
		}
		ckey := fmt.Sprintf("cell\x00%s\x00%d\x00%s", k.annotationType(), n, key)
		return s.sendCached(w, r, st, ckey, mediaBinary, start, func(ctx context.Context) ([]byte, error) { return p.cellBytes(ctx, n, key) })
	}
}

func (s *Server) byID(route string) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		start := s.o.Now()
		if name := chi.URLParam(r, "id"); isShardFile(name) {
			st, _, p, err := s.annotationSource(r, route)
			if err != nil {
				return err
			}
			sh, err := s.shards(r.Context(), st, p)
			if err != nil {
				return err
			}
			if sh == nil {
				return notFoundf("store %q: the %s source is not sharded (%d annotations), so it has no shard file %s", st.Name(), route, p.total, name)
			}
			limit := s.o.MaxAnnotations
			holds := func(_ context.Context, shard uint64) (bool, error) { return p.byIDHolds(sh.byID, shard, limit), nil }
			return s.shardFile(w, r, st, sh.byID, route+"/by_id", name, start, holds,
				func(b *shardBuild) (int64, error) { return p.leastByIDShard(limit, b) },
				func(ctx context.Context, b *shardBuild) error { return p.byIDShard(ctx, limit, b) })
		}
		st, k, p, id, err := s.annotationOf(r, route)
		if err != nil {
			return err
		}
		if !p.hasID(id) {
			return p.noID(id)
		}
		// A polyline's record is the whole polyline: over the bound, it is
		// refused as its cells are, from the plan, before the If-Match.
		if p.kind == kindPolyline { // a point's or an edge's record is one
			if err := p.checkObjectSize(id, s.o.MaxAnnotations); err != nil {
				return err
			}
		}
		if s.notModifiedFound(w, r, st) {
			return nil
		}
		body, err := p.byID(r.Context(), id)
		if err != nil {
			return err
		}
		return s.send(w, r, st, fmt.Sprintf("by_id\x00%s\x00%d", k.annotationType(), id), mediaBinary, body, start)
	}
}

// related answers {relationship key}/{object id}: the annotations of one
// object (see plan.objectBytes).
func (s *Server) related(route string) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		start := s.o.Now()
		st, k, p, id, err := s.annotationOf(r, route)
		if err != nil {
			return err
		}
		if !p.relate {
			return notFoundf("store %q has no objects: its %s annotations relate to none", st.Name(), route)
		}
		// A polyline or line object's size is in the plan: over the bound,
		// it is refused before the If-Match, as a cell is.
		if err := p.checkObjectSize(id, s.o.MaxAnnotations); err != nil {
			return err
		}
		// The answer starts with the object's manifest (objectBytes).
		check := func() error { return p.level0.CheckObject(r.Context(), id, zvf.ObjectQuery{}) }
		if done, err := s.notModifiedOnceFound(w, r, st, check); done || err != nil {
			return err
		}
		key := fmt.Sprintf("object\x00%s\x00%d", k.annotationType(), id)
		return s.sendCached(w, r, st, key, mediaBinary, start, func(ctx context.Context) ([]byte, error) { return p.objectBytes(ctx, id, s.o.MaxAnnotations) })
	}
}

// ---- skeletons and meshes ----

func (s *Server) skeletonInfo(w http.ResponseWriter, r *http.Request) error {
	start := s.o.Now()
	st, l0, done, err := s.levelRequest(w, r, "skeletons")
	if err != nil || done {
		return err
	}
	sp := newSkeletonSpec(st, l0)
	spec := s.skeletonShards(l0, sp)
	body, err := sp.infoJSON(keyFor(r, st, "seg_props"), st, spec)
	if err != nil {
		return err
	}
	key := "skeletons\x00info"
	if spec != nil {
		key += "\x00sharded" // a cache may be shared by servers of both modes
	}
	if chi.URLParam(r, versionParam) != "" {
		key += "\x00versioned"
	}
	return s.send(w, r, st, key, mediaJSON, body, start)
}

func (s *Server) skeleton(w http.ResponseWriter, r *http.Request) error {
	start := s.o.Now()
	if name := chi.URLParam(r, "id"); isShardFile(name) {
		return s.skeletonShardFile(w, r, name, start)
	}
	st, l0, id, done, err := s.objectRequest(w, r, "skeletons")
	if err != nil || done {
		return err
	}
	key := fmt.Sprintf("skeleton\x00%d", id)
	return s.sendCached(w, r, st, key, mediaBinary, start, func(ctx context.Context) ([]byte, error) {
		return newSkeletonSpec(st, l0).skeletonBytes(ctx, st.Name(), l0, id, s.o.MaxAnnotations)
	})
}

// skeletonShardFile answers a shard file of the skeleton source.
func (s *Server) skeletonShardFile(w http.ResponseWriter, r *http.Request, name string, start time.Time) error {
	st, err := s.source(r, "skeletons")
	if err != nil {
		return err
	}
	l0, err := st.Level(0)
	if err != nil {
		return err
	}
	revalidateUnversioned(w, r)
	sp := newSkeletonSpec(st, l0)
	spec := s.skeletonShards(l0, sp)
	if spec == nil {
		return notFoundf("store %q: the skeletons source is not sharded (%d objects), so it has no shard file %s", st.Name(), l0.Info().ObjectCount, name)
	}
	holds := func(ctx context.Context, shard uint64) (bool, error) {
		return s.skeletonHolds(ctx, st, l0, *spec, shard)
	}
	least := func(b *shardBuild) (int64, error) { return s.leastSkeletonShard(r.Context(), st, l0, sp, b) }
	return s.shardFile(w, r, st, *spec, "skeletons", name, start, holds, least, func(ctx context.Context, b *shardBuild) error {
		return s.skeletonShard(ctx, st, l0, sp, b)
	})
}

// levelRequest is the prologue of the routes that answer from a whole
// source (its info): the store behind the route and level 0; done when the
// client's copy is current.
func (s *Server) levelRequest(w http.ResponseWriter, r *http.Request, route string) (st *zvf.Store, l0 *zvf.Level, done bool, err error) {
	if st, done, err = s.sourceRequest(w, r, route); err != nil || done {
		return nil, nil, done, err
	}
	if l0, err = st.Level(0); err != nil {
		return nil, nil, false, err
	}
	return st, l0, false, nil
}

// sourceRequest is the prologue of the info routes, which answer from a source's
// store without level 0: the store behind the route; done when the
// client's copy is current.
func (s *Server) sourceRequest(w http.ResponseWriter, r *http.Request, route string) (st *zvf.Store, done bool, err error) {
	if st, err = s.source(r, route); err != nil {
		return nil, false, err
	}
	// An info names the store version its keys are under, and once the
	// store changes those keys answer 410, "reload the info": a reload
	// must then read it again, not a copy a browser or proxy keeps for
	// --max-age. Asked again each time, it costs a 304 while the version
	// stands.
	w.Header().Set("Cache-Control", "no-cache")
	variant := ""
	switch route {
	case "annotations", "lines", "skeletons":
		variant = s.shardVariant()
	}
	return st, s.notModifiedAs(w, r, st, variant), nil
}

// objectRequest is the prologue of the routes that answer one object: the
// store behind the route, the object id in the path and level 0; done
// when the client's copy is current.
func (s *Server) objectRequest(w http.ResponseWriter, r *http.Request, route string) (st *zvf.Store, l0 *zvf.Level, id int64, done bool, err error) {
	if st, err = s.source(r, route); err != nil {
		return nil, nil, 0, false, err
	}
	revalidateUnversioned(w, r)
	if id, err = parseID(r); err != nil {
		return nil, nil, 0, false, err
	}
	if l0, err = st.Level(0); err != nil {
		return nil, nil, 0, false, err
	}
	// Each answer starts by finding the object in level 0's index.
	if done, err = s.notModifiedOnceFound(w, r, st, func() error { return checkObject(r.Context(), st.Name(), l0, id) }); done || err != nil {
		return nil, nil, 0, done, err
	}
	return st, l0, id, false, nil
}

// revalidateUnversioned makes an answer on a path without the store
// version revalidated on each use, as the info is (Cache-Control:
// no-cache; a 304 while the version stands). A standalone skeleton or
// mesh source's segments (and skeleton shard files) are read at paths
// Neuroglancer builds from the source's URL and a segment id, where no
// version can be put: kept for --max-age, a viewer would draw the old
// segment for up to an hour after a store replacement that its reloaded
// info already shows. Under a version (the segments source names them
// there) the answer is the version's for good and keeps --max-age.
func revalidateUnversioned(w http.ResponseWriter, r *http.Request) {
	if chi.URLParam(r, versionParam) == "" {
		w.Header().Set("Cache-Control", "no-cache")
	}
}

// notModifiedOnceFound is notModified for an answer whose resource check
// finds without reading its data (an object in the index): with an
// If-Match, check runs first, so that a missing one is its 404 and one
// found is refused 412 before its data is read (notModifiedFound). Without
// one nothing is checked twice.
func (s *Server) notModifiedOnceFound(w http.ResponseWriter, r *http.Request, st *zvf.Store, check func() error) (bool, error) {
	return s.notModifiedOnceFoundAs(w, r, st, "", check)
}

// notModifiedOnceFoundAs is notModifiedOnceFound for an answer that also
// depends on variant, which the ETag then covers.
func (s *Server) notModifiedOnceFoundAs(w http.ResponseWriter, r *http.Request, st *zvf.Store, variant string, check func() error) (bool, error) {
	if len(r.Header.Values("If-Match")) == 0 || s.o.NotModifiedFound == nil {
		return s.notModifiedAs(w, r, st, variant), nil
	}
	if err := check(); err != nil {
		return false, err
	}
	return s.notModifiedFoundAs(w, r, st, variant), nil
}

func (s *Server) segProps(route string) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		start := s.o.Now()
		st, err := s.source(r, route)
		if err != nil {
			return err
		}
		l0, err := st.Level(0)
		if err != nil {
			return err
		}
		if l0.Info().ObjectCount > maxSegmentIDs {
			return notFoundf("store %q has %d objects, more than a segment property list holds (%d)", st.Name(), l0.Info().ObjectCount, maxSegmentIDs)
		}
		if s.notModified(w, r, st) {
			return nil
		}
		key := "seg_props"
		return s.sendCached(w, r, st, key, mediaJSON, start, func(ctx context.Context) ([]byte, error) { return segmentProperties(ctx, l0) })
	}
}

func (s *Server) meshInfo(w http.ResponseWriter, r *http.Request) error {
	start := s.o.Now()
	st, l0, done, err := s.levelRequest(w, r, "meshes")
	if err != nil || done {
		return err
	}
	dims, axisNotes := dimensions(st.Info().Axes)
	inf := map[string]any{"@type": "neuroglancer_legacy_mesh",
		"zvfserve": map[string]any{"store": st.Name(), "level": 0, "attributes": []note{}, "axes": append([]string{}, axisNotes...),
			"nanometres_per_unit": nanometresPer(dims)}}
	if l0.Info().ObjectCount <= maxSegmentIDs {
		inf["segment_properties"] = versioned(st, "seg_props")
	}
	body, err := json.Marshal(inf)
	if err != nil {
		return err
	}
	return s.send(w, r, st, "meshes\x00info", mediaJSON, body, start)
}

func (s *Server) meshManifest(w http.ResponseWriter, r *http.Request) error {
	start := s.o.Now()
	st, err := s.source(r, "meshes")
	if err != nil {
		return err
	}
	id, err := parseID(r)
	if err != nil {
		return err
	}
	l0, err := st.Level(0)
	if err != nil {
		return err
	}
	if err := checkObject(r.Context(), st.Name(), l0, id); err != nil {
		return err
	}
	revalidateUnversioned(w, r)
	if s.notModified(w, r, st) {
		return nil
	}
	body, err := json.Marshal(map[string][]string{"fragments": {fmt.Sprintf("frag/%d", id)}})
	if err != nil {
		return err
	}
	return s.send(w, r, st, fmt.Sprintf("mesh-manifest\x00%d", id), mediaJSON, body, start)
}

func (s *Server) meshFragment(w http.ResponseWriter, r *http.Request) error {
	start := s.o.Now()
	st, l0, id, done, err := s.objectRequest(w, r, "meshes")
	if err != nil || done {
		return err
	}
	dims, _ := dimensions(st.Info().Axes)
	key := fmt.Sprintf("mesh\x00%d", id)
	return s.sendCached(w, r, st, key, mediaBinary, start, func(ctx context.Context) ([]byte, error) {
		return meshBytes(ctx, st.Name(), l0, nanometresPer(dims), id, s.o.MaxAnnotations)
	})
}
