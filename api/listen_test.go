package api_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

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
	return startHTTPServer(t, srv, ln, h2, nil)
}

// startHTTPWatched is startHTTPOn that also reports each connection's
// state changes, once the server's own hook has seen them (its connection
// gauges are then current).
func startHTTPWatched(t *testing.T, srv *api.Server, ln net.Listener) (*httptest.Server, <-chan http.ConnState) {
	t.Helper()
	states := make(chan http.ConnState, 4096)
	return startHTTPServer(t, srv, ln, false, states), states
}

func startHTTPServer(t *testing.T, srv *api.Server, ln net.Listener, h2 bool, states chan<- http.ConnState) *httptest.Server {
	t.Helper()
	hs, lim := srv.HTTPServer(ln)
	if states != nil {
		track := hs.ConnState
		hs.ConnState = func(c net.Conn, st http.ConnState) {
			track(c, st)
			select {
			case states <- st:
			default: // nobody reads them: a wait for one fails on its own
			}
		}
	}
	ts := &httptest.Server{Listener: lim, Config: hs, EnableHTTP2: h2}
	if h2 {
		ts.StartTLS()
	} else {
		ts.Start()
	}
	t.Cleanup(ts.Close)
	return ts
}

// awaitStates waits until n connections have changed to state st (other
// changes are passed over), failing t after 10 s.
func awaitStates(t *testing.T, states <-chan http.ConnState, st http.ConnState, n int) {
	t.Helper()
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for n > 0 {
		select {
		case got := <-states:
			if got == st {
				n--
			}
		case <-timeout.C:
			t.Fatalf("%d more connections never became %v", n, st)
		}
	}
}
