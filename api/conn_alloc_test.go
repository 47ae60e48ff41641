package api_test

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/zvf/zvftest/alloctest"
)

// oneShot sends GET path on a new connection to addr, asking it closed
// after the answer, and returns the whole response as read until the
// server closed it.
func oneShot(t *testing.T, addr, path string, buf *bytes.Buffer) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: zvf\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	if _, err := buf.ReadFrom(c); err != nil {
		t.Fatal(err)
	}
}

// maxNewConnExtraAllocs is what a request on a new connection may
// allocate beyond what net/http itself does for the same request and
// answer: the request's state and clock (and the watch on its client),
// routing, the headers every answer carries, the connection's place in
// the limiter, and the access log line. It was 17 while every connection
// also derived a context of its own to mark it as the limiter's.
const maxNewConnExtraAllocs = 16

// TestNewConnectionAllocs pins what a new connection costs the server in
// allocations beyond a bare net/http server's: /healthz, one request a
// connection (as curl or a fresh viewer asks), against a server that
// writes the same three bytes.
func TestNewConnectionAllocs(t *testing.T) {
	alloctest.SkipUnderRace(t)
	srv, _, _ := pointsServer(t, api.Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	zs := startHTTPOn(t, srv, ln, false)
	bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	}))
	defer bare.Close()
	var buf bytes.Buffer
	measure := func(addr string) float64 {
		oneShot(t, addr, "/healthz", &buf)
		if !bytes.HasPrefix(buf.Bytes(), []byte("HTTP/1.1 200 OK\r\n")) || !bytes.HasSuffix(buf.Bytes(), []byte("\r\n\r\nok\n")) {
			t.Fatalf("answer %q", buf.String())
		}
		return testing.AllocsPerRun(100, func() { oneShot(t, addr, "/healthz", &buf) })
	}
	b := measure(bare.Listener.Addr().String())
	z := measure(zs.Listener.Addr().String())
	if z-b > maxNewConnExtraAllocs {
		t.Errorf("a request on a new connection allocates %.0f times, %.0f more than net/http's own %.0f; want at most %d more", z, z-b, b, maxNewConnExtraAllocs)
	}
}
