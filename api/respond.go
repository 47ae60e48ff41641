package api

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
)

// format picks the output format from f= or Accept.
func format(r *http.Request) (string, error) {
	switch f := r.URL.Query().Get("f"); f {
	case "json", "ndjson", "bin":
		return f, nil
	case "":
	default:
		return "", badRequest(fmt.Sprintf("f=%q: use json, ndjson or bin", f))
	}
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt := strings.TrimSpace(strings.SplitN(part, ";", 2)[0])
		switch mt {
		case mediaBinary:
			return "bin", nil
		case mediaNDJSON:
			return "ndjson", nil
		case mediaJSON:
			return "json", nil
		}
	}
	return "json", nil
}

// etag is a strong validator: the store's version + path + query +
// format. A store's version changes whenever a refresh sees its objects
// change, so equal inputs give equal bytes.
func (s *Server) etag(st *zvf.Store, r *http.Request, format string) string {
	h := sha256.New()
	q := r.URL.Query()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s", st.Version(), r.URL.Path, q.Encode(), format)
	return `"` + hex.EncodeToString(h.Sum(nil)[:12]) + `"`
}

// notModified sets caching headers and reports whether the client's copy
// is current (then a 304 has been written).
func (s *Server) notModified(w http.ResponseWriter, r *http.Request, etag string) bool {
	h := w.Header()
	h.Set("ETag", etag)
	if s.o.MaxAge > 0 {
		h.Set("Cache-Control", "public, max-age="+strconv.Itoa(int(s.o.MaxAge.Seconds())))
	} else {
		h.Set("Cache-Control", "no-cache")
	}
	h.Add("Vary", "Accept, Accept-Encoding")
	for _, tag := range strings.Split(r.Header.Get("If-None-Match"), ",") {
		if t := strings.TrimSpace(tag); t == etag || t == "*" || strings.TrimPrefix(t, "W/") == etag {
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
	onCommit  func()
}

func (l *lazyWriter) Write(p []byte) (int, error) {
	if l.committed {
		return l.w.Write(p)
	}
	if len(l.buf)+len(p) <= l.limit {
		l.buf = append(l.buf, p...)
		return len(p), nil
	}
	if err := l.commit(); err != nil {
		return 0, err
	}
	return l.w.Write(p)
}

func (l *lazyWriter) commit() error {
	if l.committed {
		return nil
	}
	l.committed = true
	if l.onCommit != nil {
		l.onCommit()
	}
	l.w.WriteHeader(http.StatusOK)
	_, err := l.w.Write(l.buf)
	l.buf = nil
	return err
}

// bodyWriter assembles the response writer chain: bufio → (compression)
// → lazyWriter → ResponseWriter.
type bodyWriter struct {
	*bufio.Writer
	lazy *lazyWriter
	comp io.WriteCloser
}

func (s *Server) newBody(w http.ResponseWriter, r *http.Request, contentType string, text bool, start time.Time) (*bodyWriter, error) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	lw := &lazyWriter{w: w, limit: 256 << 10}
	lw.onCommit = func() {
		h.Set("Server-Timing", fmt.Sprintf("first-byte;dur=%.3f", float64(s.o.Now().Sub(start).Microseconds())/1000))
	}
	b := &bodyWriter{lazy: lw}
	var sink io.Writer = lw
	if text {
		enc := r.Header.Get("Accept-Encoding")
		switch {
		case strings.Contains(enc, "zstd"):
			zw, err := zstd.NewWriter(lw, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
			if err != nil {
				return nil, err
			}
			h.Set("Content-Encoding", "zstd")
			b.comp, sink = zw, zw
		case strings.Contains(enc, "gzip"):
			gw, err := gzip.NewWriterLevel(lw, gzip.BestSpeed)
			if err != nil {
				return nil, err
			}
			h.Set("Content-Encoding", "gzip")
			b.comp, sink = gw, gw
		}
	}
	b.Writer = bufio.NewWriterSize(sink, 64<<10)
	return b, nil
}

// finish flushes everything; Server-Timing reports the total when the
// response was small enough to hold until now.
func (b *bodyWriter) finish(s *Server, start time.Time) error {
	if err := b.Flush(); err != nil {
		return err
	}
	if b.comp != nil {
		if err := b.comp.Close(); err != nil {
			return err
		}
	}
	if !b.lazy.committed {
		b.lazy.onCommit = func() {
			b.lazy.w.Header().Set("Server-Timing", fmt.Sprintf("total;dur=%.3f", float64(s.o.Now().Sub(start).Microseconds())/1000))
			b.lazy.w.Header().Set("Content-Length", strconv.Itoa(len(b.lazy.buf)))
		}
	}
	return b.lazy.commit()
}

// writeJSON sends a small JSON document with ETag support.
func (s *Server) writeJSON(w http.ResponseWriter, r *http.Request, st *zvf.Store, v any) error {
	start := s.o.Now()
	if st != nil && s.notModified(w, r, s.etag(st, r, "json")) {
		return nil
	}
	body, err := s.newBody(w, r, mediaJSON, true, start)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(body)
	if err := enc.Encode(v); err != nil {
		return err
	}
	return body.finish(s, start)
}

// Storage wraps st so that reads are counted in the metrics.
func (m *Metrics) Storage(st storage.Store) storage.Store { return &meteredStore{Store: st, m: m} }

type meteredStore struct {
	storage.Store
	m *Metrics
}

func (s *meteredStore) Get(ctx context.Context, key string) ([]byte, error) {
	t := time.Now()
	b, err := s.Store.Get(ctx, key)
	s.m.readLat.Observe(time.Since(t).Seconds())
	s.m.readBytes.Add(float64(len(b)))
	return b, err
}

func (s *meteredStore) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	t := time.Now()
	b, err := s.Store.GetRange(ctx, key, off, n)
	s.m.readLat.Observe(time.Since(t).Seconds())
	s.m.readBytes.Add(float64(len(b)))
	return b, err
}
