package api_test

import (
	"net"
	"net/http/httptest"
	"testing"

	"github.com/zvfserve/zvfserve/api"
)

// startHTTP serves srv as serve does (HTTPServer on a loopback listener),
// over HTTP/2 with TLS or over plain HTTP/1.1.
func startHTTP(t *testing.T, srv *api.Server, h2 bool) *httptest.Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return startHTTPOn(t, srv, ln, h2)
}

func startHTTPOn(t *testing.T, srv *api.Server, ln net.Listener, h2 bool) *httptest.Server {
	t.Helper()
	hs, lim := srv.HTTPServer(ln)
	ts := &httptest.Server{Listener: lim, Config: hs, EnableHTTP2: h2}
	if h2 {
		ts.StartTLS()
	} else {
		ts.Start()
	}
	t.Cleanup(ts.Close)
	return ts
}
