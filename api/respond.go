package api

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/zvfserve/zvfserve/api/problem"
	"github.com/zvfserve/zvfserve/cache/freelist"
	"github.com/zvfserve/zvfserve/zvf"
)

// etag is a strong validator: the store's version + path + query +
// representation (format and content coding, each a different body). A
// store's version changes whenever its objects do, so equal inputs give
// equal bytes. The query is taken without its cursor (found by its
// decoded key, as the handlers find it) and with its keys decoded
// (appendTagQuery): every page of a paged walk has the first page's tag
// (RFC 9110 8.8.3 asks a tag to tell apart one URL's representations, and
// each page's URL still has one body a version), so If-Match: <first page's tag> pins the whole walk, and a
// page under another tag tells the client the store changed mid-walk.
func (s *Server) etag(st *zvf.Store, r *http.Request, rep representation) string {
	return s.etagOf(st, r, rep, "")
}

// etagOf is etag for an answer that also depends on variant (the base
// URL a descriptor's links are built on).
func (s *Server) etagOf(st *zvf.Store, r *http.Request, rep representation, variant string) string {
	// The parts, each ended by a zero byte, hashed at once from a buffer
	// on the stack (a digest written part by part allocates per part).
	var mem [512]byte
	b := mem[:0]
	b = append(append(append(b, st.Revision()...), 0), r.URL.Path...)
	b = appendTagQuery(append(b, 0), r.URL.RawQuery)
	// Without its last '&', a query with no cursor (nor anything to
	// escape) is hashed as it was before cursors were left out: the tags
	// CDNs hold stay valid across the upgrade.
	b = bytes.TrimSuffix(b, []byte{'&'})
	for _, p := range [...]string{rep.codec.format(), rep.encoding, variant} {
		b = append(append(b, 0), p...)
	}
	b = append(b, 0)
	sum := sha256.Sum256(b)
	var out [2 + 24]byte
	out[0], out[len(out)-1] = '"', '"'
	hex.Encode(out[1:25], sum[:12])
	return string(out[:])
}

// notModified sets caching headers and reports whether the client's copy
// is current (then a 304 has been written). An If-Match that names none
// of etag is answered when the handler's answer starts: a resource the
// handler then finds missing is its 404 (RFC 9110 13.2.1).
func (s *Server) notModified(w http.ResponseWriter, r *http.Request, etag string) bool {
	return s.preconditions(w, r, etag, false)
}

// notModifiedFound is notModified for a handler that has found what it
// answers (its store, level and query are valid), so that what is left
// is the work of the answer: an If-Match that names none of etag is
// answered 412 now (then it reports true), before any chunk is read or
// any of the body is held back (RFC 9110 13.2.1: a failure found only
// by that work does not come first).
func (s *Server) notModifiedFound(w http.ResponseWriter, r *http.Request, etag string) bool {
	return s.preconditions(w, r, etag, true)
}

func (s *Server) preconditions(w http.ResponseWriter, r *http.Request, etag string, found bool) bool {
	h := w.Header()
	setHeader(w, "ETag", etag)
	// The server's Cache-Control unless the handler chose its own
	// (Neuroglancer's infos are always revalidated).
	if len(h["Cache-Control"]) == 0 {
		setHeader(w, "Cache-Control", s.cacheControl)
	}
	if len(h["Vary"]) == 0 {
		setHeader(w, "Vary", s.vary)
	} else {
		h.Add("Vary", s.vary)
	}
	// If-Match first (RFC 9110 13.2.2): a client that pinned its copy to
	// one version is not sent another's answer, and If-None-Match is not
	// looked at. Judged again for each attempt (wrap retries an answer on
	// the store's new version, under its new ETag).
	sw, _ := w.(*statusWriter)
	if sw != nil {
		sw.unmatched, sw.unmatchedReq = nil, nil
	}
	if p := unmatched(r, etag); p != nil {
		if sw == nil || found {
			writeProblem(w, r, p)
			return true
		}
		// Only the handler knows whether the resource exists: a missing
		// one's 404 goes out as it is (RFC 9110 13.2.1), its 200 as this.
		sw.unmatched, sw.unmatchedReq = p, r
		return false
	}
	// "*" is not answered here: it matches only a resource that exists,
	// which the handler finds out later (statusWriter turns its 200 into
	// the 304).
	for tag := range strings.SplitSeq(reqHeader(r, "If-None-Match"), ",") {
		if t := strings.TrimSpace(tag); t != etag && strings.TrimPrefix(t, "W/") != etag {
			continue
		}
		if a, ok := r.Context().Value(attemptKey).(*attempt); ok && a.h != nil && a.h.Pending(a.st) {
			// The store has changed since this version opened, and its new
			// version has not: the client's copy may be of objects
			// rewritten since, which a 304 would vouch for unread, and a
			// 200 of what this version holds would break RFC 9110's rule
			// that a matching If-None-Match gets a 304. Until the new
			// version opens, such a request is told the store is changing.
			writeProblem(w, r, changing(time.Second))
			return true
		}
		w.WriteHeader(http.StatusNotModified)
		return true
	}
	return false
}

// refuseFound sends the 412 that notModified left pending (an If-Match
// naming none of the ETag, on a route that finds its resource by
// reading) once check has found the resource without reading its data
// (a chunk key in the level, an object's manifest): then it reports
// true, and the answer's chunks are never read. check runs only when a
// 412 is pending; its error (a missing object's 404) is the answer, as
// RFC 9110 13.2.1 has it.
func refuseFound(w http.ResponseWriter, check func() error) (bool, error) {
	sw, _ := w.(*statusWriter)
	if sw == nil || sw.unmatched == nil {
		return false, nil
	}
	if err := check(); err != nil {
		return false, err
	}
	sw.WriteHeader(http.StatusPreconditionFailed)
	return true, nil
}

// unmatched is the 412 problem for a request whose If-Match names
// neither etag nor "*"; nil when it has none or it matches.
func unmatched(r *http.Request, etag string) *Problem {
	if im := r.Header["If-Match"]; len(im) > 0 && !matchesStrong(im, etag) {
		return problem.New(problem.PreconditionFailed,
			"If-Match names no current ETag of this answer: the store has changed since the tag was issued, or the tag is weak (If-Match compares strongly) or another request's")
	}
	return nil
}

// matchesStrong reports whether the If-Match values list etag or "*",
// comparing strongly: a weak tag (W/"…") never matches (RFC 9110 8.8.3.2).
// "*" stands for any current representation (a missing one is the
// handler's 404 all the same).
func matchesStrong(values []string, etag string) bool {
	for _, v := range values {
		for tag := range strings.SplitSeq(v, ",") {
			if t := strings.TrimSpace(tag); t == "*" || t == etag {
				return true
			}
		}
	}
	return false
}

// lazyWriter holds the first bytes of a response so that an error found
// early (the common case: a bad chunk in the first window) can still
// become a problem response; past the threshold it commits and streams.
// It copies only what it must hold: bytes it is handed past the
// threshold, or as the answer's last (final), go out as they are.
type lazyWriter struct {
	w         http.ResponseWriter
	buf       []byte
	limit     int
	committed bool
	// final: the next write is the answer's last (the body's buffer
	// flushed by finish, with nothing between it and this writer), so
	// it is sent with what is held rather than added to it.
	final bool
	// pool, when set, gives the hold-back buffer at its first use (an
	// answer that never holds anything takes none): mem is that buffer,
	// box what the pool handed it out in; release puts them back.
	pool *freelist.List[*[]byte]
	mem  []byte
	box  *[]byte
	// timing: at commit, Server-Timing says how long since start the
	// first byte took (streamed), or the whole answer (whole).
	timing bool
	now    func() time.Time
	start  time.Time
	// sent counts the bytes written to w, for sendHeld.
	sent int64
	// trailers are headers known only at the end (a count, the next
	// cursor): sent as headers when the answer fits the buffer, else
	// declared at commit and sent as HTTP trailers. Canonical names: they
	// are looked up as they are.
	trailers []string
}

func (l *lazyWriter) Write(p []byte) (int, error) {
	if l.committed {
		return l.send(p)
	}
	n := len(l.buf) + len(p)
	if l.final {
		return l.commit(n <= l.limit, p)
	}
	if n <= l.limit {
		if l.buf == nil {
			l.takeBuffer()
		}
		l.buf = append(l.buf, p...)
		return len(p), nil
	}
	return l.commit(false, p)
}

// send writes p to the ResponseWriter, counting it.
func (l *lazyWriter) send(p []byte) (int, error) {
	n, err := l.w.Write(p)
	l.sent += int64(n)
	return n, err
}

func (l *lazyWriter) takeBuffer() {
	if l.pool != nil {
		if b, ok := l.pool.Get(); ok {
			l.box, l.mem = b, (*b)[:0]
		}
	}
	if l.mem == nil {
		l.mem = make([]byte, 0, l.limit)
	}
	l.buf = l.mem
}

// release gives the hold-back buffer back to the pool.
func (l *lazyWriter) release() {
	if l.pool == nil || cap(l.mem) != l.limit {
		return
	}
	box := l.box
	if box == nil {
		box = new([]byte)
	}
	*box = l.mem[:0]
	l.pool.Put(box)
}

// commit sends the status, the headers, what is held and then tail (a
// write that did not fit, or the answer's last), returning what tail's
// write returned. whole: the answer is complete (sent with its
// Content-Length), so every header its end decides is known, and one not
// set is not sent at all: no trailers are declared.
func (l *lazyWriter) commit(whole bool, tail []byte) (int, error) {
	if l.committed {
		if len(tail) == 0 {
			return 0, nil
		}
		return l.send(tail)
	}
	l.committed = true
	if l.timing {
		name := "first-byte;dur="
		if whole {
			name = "total;dur="
		}
		// strconv's 'f' with 3 digits is fmt's %.3f, without the boxing.
		var b [48]byte
		t := strconv.AppendFloat(append(b[:0], name...), float64(l.now().Sub(l.start).Microseconds())/1000, 'f', 3, 64)
		setHeader(l.w, "Server-Timing", string(t))
		if whole {
			setHeader(l.w, "Content-Length", strconv.Itoa(len(l.buf)+len(tail)))
		}
	}
	var late []string
	h := l.w.Header()
	for _, k := range l.trailers {
		if v := h[k]; len(v) == 0 || v[0] == "" { // already known: sent as a header
			late = append(late, k)
		}
	}
	if len(late) > 0 && !whole {
		l.w.Header().Set("Trailer", strings.Join(late, ", "))
	}
	l.w.WriteHeader(http.StatusOK)
	held := l.buf
	l.buf = nil
	if len(held) > 0 || len(tail) == 0 {
		if _, err := l.send(held); err != nil {
			return 0, err
		}
	}
	if len(tail) == 0 {
		return 0, nil
	}
	return l.send(tail)
}

// bodyWriter assembles the response writer chain: bufio → (compression)
// → lazyWriter → ResponseWriter. Its buffers and compressors come from the
// server's pools; release returns them. mem is the answer's reservation
// against the memory budget (see budget.go): the body's buffers, and what
// the encoder writing through it holds.
type bodyWriter struct {
	*bufio.Writer
	lazy  lazyWriter
	comp  io.WriteCloser
	dense bool // comp came from the zstdDense pool
	wide  bool // the bufio.Writer came from the bufwWide pool
	// enc writes the answer's batches through the body (see emit).
	enc encoder
	s   *Server
	mem answerMem
}

// bodyPools recycle what every streamed response needs, so that a warm
// request allocates a constant, small amount however large its answer.
// They are free lists that keep a few of each across collections (see
// init), so a server whose heap is small, which collects every query or
// two, does not allocate them for each answer.
type bodyPools struct {
	bufw freelist.List[*bufio.Writer]
	lazy freelist.List[*[]byte]
	zstd freelist.List[*zstd.Encoder]
	gzip freelist.List[*gzip.Writer]
	// bufwWide: the body buffers of uncompressed answers, twice the
	// hold-back's size (see newBody).
	bufwWide  freelist.List[*bufio.Writer]
	zstdDense freelist.List[*zstd.Encoder] // zstd encoders for quantized answers (see denseCoding)
	edges     edgePool
}

// edgePool recycles line answers' edge lists (zvf.BBoxQuery.EdgeBuf and
// WireBuf): a 50,000-vertex streamline box's is 800 kB as int64 (400 kB
// in the wire's uint32), which each request otherwise allocated and
// zeroed.
type edgePool struct{ p sync.Pool }

// edgeBufs are the two forms of a line answer's edge list.
type edgeBufs struct {
	i64  []int64
	wire []byte
}

// maxPooledEdges: a list longer than this many bytes (a whole-store
// answer's) is left to the collector rather than kept for the next small
// one.
const maxPooledEdges = 32 << 20

// What bodyPools keep across collections, a server: bodyBuffersKept body
// buffers of each size and hold-backs, at most 4 × 512 KiB (bufwWide) +
// 4 × 256 KiB (bufw) + 4 × 256 KiB (lazy) = 4 MiB; compressorsKept zstd
// and gzip encoders (about 1.2 MB and less each, see compressorBytes)
// and one dense zstd encoder (about 4.7 MB): some 12 MiB in all. Each
// has a fixed size (buffers of lazyLimit or twice that, encoders with
// their fixed window), so none is too large to keep; more answers at
// once than this take the rest from the sync.Pools behind them.
const (
	bodyBuffersKept = 4
	compressorsKept = 2
)

// init makes the pools keep what they keep across collections.
func (p *bodyPools) init() {
	p.bufw.Init(bodyBuffersKept)
	p.bufwWide.Init(bodyBuffersKept)
	p.lazy.Init(bodyBuffersKept)
	p.zstd.Init(compressorsKept)
	p.gzip.Init(compressorsKept)
	p.zstdDense.Init(1)
}

func (e *edgePool) get() *edgeBufs {
	if b, ok := e.p.Get().(*edgeBufs); ok {
		return b
	}
	return new(edgeBufs)
}

// put gives b back once nothing reads the answer's edges any more.
func (e *edgePool) put(b *edgeBufs) {
	if 8*cap(b.i64) > maxPooledEdges {
		b.i64 = nil
	}
	if cap(b.wire) > maxPooledEdges {
		b.wire = nil
	}
	b.i64, b.wire = b.i64[:0], b.wire[:0]
	e.p.Put(b)
}

const lazyLimit = 256 << 10

func (s *Server) newBody(w http.ResponseWriter, p *answerParts, rep representation, start time.Time) (*bodyWriter, error) {
	setHeader(w, "Content-Type", rep.codec.contentType())
	b := p.newBodyWriter()
	*b = bodyWriter{s: s, mem: answerMem{c: s.o.Cache}}
	fixed := int64(bodyBufferBytes)
	dense := rep.encoding == "zstd" && denseCoding(rep)
	switch {
	case dense:
		fixed += denseCompressorBytes
	case rep.encoding != "":
		fixed += compressorBytes
	}
	b.mem.reserve(fixed)
	b.lazy = lazyWriter{w: w, limit: lazyLimit, pool: &s.pools.lazy, timing: true, now: s.o.Now, start: start}
	lw := &b.lazy
	var sink io.Writer = lw
	switch rep.encoding {
	case "zstd":
		pool, level := &s.pools.zstd, zstd.SpeedFastest
		if dense {
			pool, level = &s.pools.zstdDense, zstd.SpeedBetterCompression
		}
		zw, ok := pool.Get()
		if ok {
			zw.Reset(lw)
		} else {
			var err error
			// A 256 KiB window, not the default 8 MiB: an encoder keeps
			// twice its window, so 64 streams held 1 GB; vertex JSON
			// compresses as well with the small one (0.439 vs 0.440).
			if zw, err = zstd.NewWriter(lw, zstd.WithEncoderLevel(level), zstd.WithEncoderConcurrency(1),
				zstd.WithWindowSize(256<<10), zstd.WithLowerEncoderMem(true)); err != nil {
				b.mem.release()
				return nil, err
			}
		}
		setHeader(w, "Content-Encoding", "zstd")
		b.comp, sink, b.dense = zw, zw, dense
	case "gzip":
		gw, ok := s.pools.gzip.Get()
		if ok {
			gw.Reset(lw)
		} else {
			var err error
			if gw, err = gzip.NewWriterLevel(lw, gzip.BestSpeed); err != nil {
				b.mem.release()
				return nil, err
			}
		}
		setHeader(w, "Content-Encoding", "gzip")
		b.comp, sink = gw, gw
	}
	// An uncompressed answer's body buffer is twice the hold-back: its
	// first flush is either the whole answer (finish) or more than the
	// hold-back keeps, so the lazyWriter passes it on uncopied and needs
	// no buffer of its own. (The answer streams from the same point as
	// when the hold-back copied the first of two 256 KiB flushes, with
	// the same headers.) A compressor's output comes in pieces, which
	// the hold-back gathers.
	pool, size := &s.pools.bufw, lazyLimit
	if b.comp == nil {
		pool, size, b.wide = &s.pools.bufwWide, 2*lazyLimit, true
	}
	if bw, ok := pool.Get(); ok {
		bw.Reset(sink)
		b.Writer = bw
	} else {
		b.Writer = bufio.NewWriterSize(sink, size)
	}
	return b, nil
}

// release returns the pooled parts; the handler defers it, so nothing
// writes through b afterwards.
func (b *bodyWriter) release() {
	b.mem.release()
	p := &b.s.pools
	b.Writer.Reset(nil)
	if b.wide {
		p.bufwWide.Put(b.Writer)
	} else {
		p.bufw.Put(b.Writer)
	}
	b.lazy.release()
	switch c := b.comp.(type) {
	case *zstd.Encoder:
		c.Reset(nil)
		if b.dense {
			p.zstdDense.Put(c)
		} else {
			p.zstd.Put(c)
		}
	case *gzip.Writer:
		c.Reset(nil)
		p.gzip.Put(c)
	}
	*b = bodyWriter{}
}

// sendHeldMin is the least sendHeld passes on once the answer streams:
// an answer that waits for storage before each of its chunks then writes
// tens of kilobytes at a time, not a system call a chunk.
const sendHeldMin = 64 << 10

// sendHeld passes what the body holds on to the client when the answer
// is about to wait for storage (zvf.BBoxQuery.Waiting): a cold answer's
// rows then travel while the rest of the box is read, not when the body's
// buffer fills. Only once the answer has started (committed: its status
// and headers sent), so that where its late headers go (headers or
// trailers) never depends on what was cached; uncompressed, at least
// sendHeldMin at a time. A compressor is fed what the body holds (a few
// appends: it writes nothing until it has a block) but never flushed: its
// output depends on its input alone, not on how that was cut into writes,
// so the answer's bytes stay those of one that never waited (the ETag is
// strong); the blocks it has made go on. An error is left for the
// answer's next write, which meets it again.
func (b *bodyWriter) sendHeld() {
	n := b.Buffered()
	if !b.lazy.committed || n == 0 || b.comp == nil && n < sendHeldMin {
		return
	}
	sent := b.lazy.sent
	if b.Flush() != nil || b.lazy.sent == sent {
		return // (a compressor that made nothing new)
	}
	if f, ok := b.lazy.w.(http.Flusher); ok {
		f.Flush() // past net/http's own buffers, onto the socket
	}
}

// emit writes a batch through the encoder. An uncompressed answer that
// has passed the hold-back starts there, at the batch's end, rather than
// when the body's buffer fills (at twice the hold-back): the client
// receives while the rest is matched, and an answer's late headers (its
// counts, the next cursor) go out as trailers exactly when it is larger
// than the hold-back, whatever was cached and however the body's buffer
// fell (before, one that fit the buffer started at its end, the counts
// known, and sent them as headers). Under zvfbench load, 600 kB answers
// went from 0.45–0.55 of the trivial server's MB/s to 0.54–0.61.
func (b *bodyWriter) emit(batch *zvf.Batch) error {
	if err := b.enc.batch(batch); err != nil {
		return err
	}
	if b.comp == nil && !b.lazy.committed && b.Buffered() > b.lazy.limit {
		return b.Flush()
	}
	return nil
}

// WaitingForStorage implements zvf.StorageWait: sendHeld.
func (b *bodyWriter) WaitingForStorage() { b.sendHeld() }

// finish flushes everything; Server-Timing reports the total when the
// response was small enough to hold until now.
func (b *bodyWriter) finish() error {
	// Without a compressor, the flush is the lazyWriter's last write
	// (a compressor writes its end in pieces, at Close).
	b.lazy.final = b.comp == nil
	if err := b.Flush(); err != nil {
		return err
	}
	if b.comp != nil {
		if err := b.comp.Close(); err != nil {
			return err
		}
	}
	_, err := b.lazy.commit(!b.lazy.committed, nil)
	return err
}

// writeJSON sends a small JSON document with ETag support.
func (s *Server) writeJSON(w http.ResponseWriter, r *http.Request, st *zvf.Store, v any) error {
	return s.writeJSONOf(w, r, st, "", v)
}

// writeJSONOf is writeJSON for a document that also depends on variant
// (see etagOf).
func (s *Server) writeJSONOf(w http.ResponseWriter, r *http.Request, st *zvf.Store, variant string, v any) error {
	start := s.o.Now()
	rep, err := negotiate(r, jsonOnly(&s.text))
	if err != nil {
		return err
	}
	if st != nil && s.notModifiedFound(w, r, s.etagOf(st, r, rep, variant)) {
		return nil
	}
	if st == nil {
		// No ETag and no caching headers of the server's, but the bytes
		// still depend on Accept and Accept-Encoding (and the token): a
		// cache storing it by its own rules must key on them.
		for v := range strings.SplitSeq(s.vary, ",") {
			addVary(w.Header(), strings.TrimSpace(v))
		}
	}
	body, err := s.newBody(w, partsOf(r.Context()), rep, start)
	if err != nil {
		return err
	}
	defer body.release()
	enc := json.NewEncoder(body)
	if err := enc.Encode(v); err != nil {
		return err
	}
	return body.finish()
}

// jsonFound is writeJSON's If-Match for a document built by reading what
// check finds without reading it (an object in the index): with an
// If-Match that names none of the document's ETag, check runs, and the
// 412 is sent (done) before the document is built; a missing resource is
// check's error, as RFC 9110 13.2.1 has it. Without an If-Match it does
// nothing, and writeJSON judges the rest.
func (s *Server) jsonFound(w http.ResponseWriter, r *http.Request, st *zvf.Store, check func() error) (done bool, err error) {
	if len(r.Header.Values("If-Match")) == 0 {
		return false, nil
	}
	rep, err := negotiate(r, jsonOnly(&s.text))
	if err != nil {
		return false, err
	}
	p := unmatched(r, s.etagOf(st, r, rep, ""))
	if p == nil {
		return false, nil
	}
	if err := check(); err != nil {
		return false, err
	}
	writeProblem(w, r, p)
	return true, nil
}

// denseCoding reports whether an answer's zstd should spend more CPU for
// fewer bytes: a quantized binary answer (precision=), whose client asked
// for fewer bytes. Its 16-bit planes are half random low bytes and half
// high bytes of a few values; zstd's fastest and default levels store such
// blocks as they are (6.02 bytes a vertex on the bench's random points),
// its better level codes them (5.14) at about 100 MB/s of input, under
// what the saved bytes take on a 100 Mbit/s link (docs/performance.md).
func denseCoding(rep representation) bool {
	c, ok := rep.codec.(binaryCodec)
	return ok && c.precision > 0
}
