package api

import (
	"bufio"
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

	"github.com/zvfserve/zvfserve/zvf"
)

// etag is a strong validator: the store's version + path + query +
// representation (format and content coding, each a different body). A
// store's version changes whenever its objects do, so equal inputs give
// equal bytes.
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
	for _, p := range [...]string{st.Revision(), r.URL.Path, r.URL.RawQuery, rep.codec.format(), rep.encoding, variant} {
		b = append(append(b, p...), 0)
	}
	sum := sha256.Sum256(b)
	var out [2 + 24]byte
	out[0], out[len(out)-1] = '"', '"'
	hex.Encode(out[1:25], sum[:12])
	return string(out[:])
}

// notModified sets caching headers and reports whether the client's copy
// is current (then a 304 has been written).
func (s *Server) notModified(w http.ResponseWriter, r *http.Request, etag string) bool {
	h := w.Header()
	setHeader(w, "ETag", etag)
	setHeader(w, "Cache-Control", s.cacheControl)
	if len(h["Vary"]) == 0 {
		setHeader(w, "Vary", s.vary)
	} else {
		h.Add("Vary", s.vary)
	}
	// "*" is not answered here: it matches only a resource that exists,
	// which the handler finds out later (statusWriter turns its 200 into
	// the 304).
	for tag := range strings.SplitSeq(r.Header.Get("If-None-Match"), ",") {
		if t := strings.TrimSpace(tag); t == etag || strings.TrimPrefix(t, "W/") == etag {
			w.WriteHeader(http.StatusNotModified)
			return true
		}
	}
	return false
}

// lazyWriter holds the first bytes of a response so that an error found
// early (the common case: a bad chunk in the first window) can still
// become a problem response; past the threshold it commits and streams.
type lazyWriter struct {
	w         http.ResponseWriter
	buf       []byte
	limit     int
	committed bool
	// timing: at commit, Server-Timing says how long since start the
	// first byte took (streamed), or the whole answer (whole).
	timing bool
	now    func() time.Time
	start  time.Time
	// trailers are headers known only at the end (a count, the next
	// cursor): sent as headers when the answer fits the buffer, else
	// declared at commit and sent as HTTP trailers.
	trailers []string
}

func (l *lazyWriter) Write(p []byte) (int, error) {
	if l.committed {
		return l.w.Write(p)
	}
	if len(l.buf)+len(p) <= l.limit {
		l.buf = append(l.buf, p...)
		return len(p), nil
	}
	if err := l.commit(false); err != nil {
		return 0, err
	}
	return l.w.Write(p)
}

// commit sends the status, the headers and what is held. whole: the
// answer is complete (sent with its Content-Length), so every header its
// end decides is known, and one not set is not sent at all: no trailers
// are declared.
func (l *lazyWriter) commit(whole bool) error {
	if l.committed {
		return nil
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
			setHeader(l.w, "Content-Length", strconv.Itoa(len(l.buf)))
		}
	}
	var late []string
	for _, k := range l.trailers {
		if l.w.Header().Get(k) == "" { // already known: sent as a header
			late = append(late, k)
		}
	}
	if len(late) > 0 && !whole {
		l.w.Header().Set("Trailer", strings.Join(late, ", "))
	}
	l.w.WriteHeader(http.StatusOK)
	_, err := l.w.Write(l.buf)
	l.buf = nil
	return err
}

// bodyWriter assembles the response writer chain: bufio → (compression)
// → lazyWriter → ResponseWriter. Its buffers and compressors come from the
// server's pools; release returns them. mem is the answer's reservation
// against the memory budget (see budget.go): the body's buffers, and what
// the encoder writing through it holds.
type bodyWriter struct {
	*bufio.Writer
	lazy    lazyWriter
	comp    io.WriteCloser
	dense   bool    // comp came from the zstdDense pool
	lazyBuf []byte  // the pooled buffer behind lazy.buf
	lazyBox *[]byte // what the pool handed it out in, put back in release (a new box would be an allocation)
	s       *Server
	mem     answerMem
}

// bodyPools recycle what every streamed response needs, so that a warm
// request allocates a constant, small amount however large its answer.
type bodyPools struct {
	bufw, lazy, zstd, gzip sync.Pool
	zstdDense              sync.Pool // zstd encoders for quantized answers (see denseCoding)
	edges                  edgePool
}

// edgePool recycles line answers' edge lists (zvf.BBoxQuery.EdgeBuf): a
// 50,000-vertex streamline box's is 800 kB, which each request otherwise
// allocated and zeroed.
type edgePool struct{ p sync.Pool }

// maxPooledEdges: a list longer than this (a whole-store answer's) is left
// to the collector rather than kept for the next small one.
const maxPooledEdges = 4 << 20

func (e *edgePool) get() *[]int64 {
	if b, ok := e.p.Get().(*[]int64); ok {
		return b
	}
	return new([]int64)
}

// put gives b back once nothing reads the answer's edges any more.
func (e *edgePool) put(b *[]int64) {
	if cap(*b) > maxPooledEdges {
		return
	}
	*b = (*b)[:0]
	e.p.Put(b)
}

const lazyLimit = 256 << 10

func (s *Server) newBody(w http.ResponseWriter, rep representation, start time.Time) (*bodyWriter, error) {
	setHeader(w, "Content-Type", rep.codec.contentType())
	b := &bodyWriter{s: s, mem: answerMem{c: s.o.Cache}}
	fixed := int64(bodyBufferBytes)
	dense := rep.encoding == "zstd" && denseCoding(rep)
	switch {
	case dense:
		fixed += denseCompressorBytes
	case rep.encoding != "":
		fixed += compressorBytes
	}
	b.mem.reserve(fixed)
	if p, ok := s.pools.lazy.Get().(*[]byte); ok {
		b.lazyBuf, b.lazyBox = (*p)[:0], p
	} else {
		b.lazyBuf = make([]byte, 0, lazyLimit)
	}
	b.lazy = lazyWriter{w: w, limit: lazyLimit, buf: b.lazyBuf, timing: true, now: s.o.Now, start: start}
	lw := &b.lazy
	var sink io.Writer = lw
	switch rep.encoding {
	case "zstd":
		pool, level := &s.pools.zstd, zstd.SpeedFastest
		if dense {
			pool, level = &s.pools.zstdDense, zstd.SpeedBetterCompression
		}
		zw, ok := pool.Get().(*zstd.Encoder)
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
		gw, ok := s.pools.gzip.Get().(*gzip.Writer)
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
	if bw, ok := s.pools.bufw.Get().(*bufio.Writer); ok {
		bw.Reset(sink)
		b.Writer = bw
	} else {
		b.Writer = bufio.NewWriterSize(sink, 256<<10)
	}
	return b, nil
}

// release returns the pooled parts; the handler defers it, so nothing
// writes through b afterwards.
func (b *bodyWriter) release() {
	b.mem.release()
	p := &b.s.pools
	b.Writer.Reset(nil)
	p.bufw.Put(b.Writer)
	if cap(b.lazyBuf) == lazyLimit {
		box := b.lazyBox
		if box == nil {
			box = new([]byte)
		}
		*box = b.lazyBuf[:0]
		p.lazy.Put(box)
	}
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

// finish flushes everything; Server-Timing reports the total when the
// response was small enough to hold until now.
func (b *bodyWriter) finish() error {
	if err := b.Flush(); err != nil {
		return err
	}
	if b.comp != nil {
		if err := b.comp.Close(); err != nil {
			return err
		}
	}
	return b.lazy.commit(!b.lazy.committed)
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
	if st != nil && s.notModified(w, r, s.etagOf(st, r, rep, variant)) {
		return nil
	}
	body, err := s.newBody(w, rep, start)
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
