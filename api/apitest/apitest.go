// Package apitest holds what the tests of the HTTP API share (api,
// api/neuroglancer, web, the commands): stores opened from fixture
// folders, an API server over them, requests that return the whole answer
// and a writer that counts what a server answered. Tests only: no binary
// links it.
package apitest

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
)

// Open opens the store at target (a folder or a blobstore URL) under name,
// reading through ch; the storage is closed when tb ends.
func Open(tb testing.TB, target, name string, ch *cache.Cache) *zvf.Store {
	tb.Helper()
	ctx := context.Background()
	st, err := blobstore.Open(ctx, target)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = st.Close() })
	s, err := zvf.Open(ctx, st, zvf.Options{Name: name, Cache: ch})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// OpenFixtures opens the stores NAME.zarrvectors of the folder dir under
// their names, sharing one 256 MiB cache.
func OpenFixtures(tb testing.TB, dir string, names ...string) []*zvf.Store {
	tb.Helper()
	ch := cache.New(256 << 20)
	out := make([]*zvf.Store, 0, len(names))
	for _, n := range names {
		out = append(out, Open(tb, filepath.Join(dir, n+".zarrvectors"), n, ch))
	}
	return out
}

// New is an API server with options o.
func New(tb testing.TB, o api.Options) *api.Server {
	tb.Helper()
	srv, err := api.New(o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = srv.Close() })
	return srv
}

// Serve starts an API server with options o behind an httptest server;
// both end when tb does.
func Serve(tb testing.TB, o api.Options) (*api.Server, *httptest.Server) {
	tb.Helper()
	srv := New(tb, o)
	ts := httptest.NewServer(srv.Handler())
	tb.Cleanup(ts.Close)
	// Go's client would ask for gzip on every request and inflate every
	// answer: CPU spent compressing bodies no test looks at encoded. The
	// tests of encodings send Accept-Encoding themselves.
	ts.Client().Transport.(*http.Transport).DisableCompression = true
	return srv, ts
}

// Get fetches path from ts with header name/value pairs and returns the
// answer with its whole body (decoded by the client when it asked for no
// encoding).
func Get(tb testing.TB, ts *httptest.Server, path string, hdr ...string) (*http.Response, []byte) {
	tb.Helper()
	return Do(tb, ts, http.MethodGet, path, hdr...)
}

// Do is Get with another method.
func Do(tb testing.TB, ts *httptest.Server, method, path string, hdr ...string) (*http.Response, []byte) {
	tb.Helper()
	req, err := http.NewRequest(method, ts.URL+path, nil)
	if err != nil {
		tb.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return resp, b
}

// MustGet is Get that fails the test unless the answer is 200.
func MustGet(tb testing.TB, ts *httptest.Server, path string, hdr ...string) []byte {
	tb.Helper()
	resp, b := Get(tb, ts, path, hdr...)
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("GET %s: %d %.300s", path, resp.StatusCode, b)
	}
	return b
}

// A CountingWriter passes an answer through to the client and counts
// what it was: its status and its body's bytes (for tests that log what a
// server answered).
type CountingWriter struct {
	http.ResponseWriter
	Status int // 200 until WriteHeader
	N      int64
}

// NewCountingWriter counts what is written to w.
func NewCountingWriter(w http.ResponseWriter) *CountingWriter {
	return &CountingWriter{ResponseWriter: w, Status: http.StatusOK}
}

func (c *CountingWriter) Write(b []byte) (int, error) {
	n, err := c.ResponseWriter.Write(b)
	c.N += int64(n)
	return n, err
}

func (c *CountingWriter) WriteHeader(code int) {
	c.Status = code
	c.ResponseWriter.WriteHeader(code)
}

// Flush flushes the client's writer, for streamed answers.
func (c *CountingWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
