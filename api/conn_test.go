package api_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
)

// smallBuffers makes the kernel hold little of a response, so a client
// that does not read blocks the server's writes after a few kilobytes
// (loopback buffers otherwise grow to megabytes).
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(8 << 10)
	}
	return c, err
}

// dialSmall connects with a small receive buffer (set before connecting,
// so the window never grows) and sends one GET.
func dialSmall(t *testing.T, addr, path string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4<<10) })
		return errors.Join(err, serr)
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: zvf\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestStalledClientsAreCut: clients that ask for a large answer and never
// read it are cut at the stall timeout (a visibly incomplete body) and
// counted as stalled; meanwhile they hold no work slot, so a well-behaved
// client is served.
func TestStalledClientsAreCut(t *testing.T) {
	t.Parallel()
	const slots = 4
	for _, proto := range []string{"HTTP/1.1", "HTTP/2.0"} {
		t.Run(proto, func(t *testing.T) {
			// Each protocol has its own server: their stall timeouts run
			// side by side.
			t.Parallel()
			srv, _, logs := pointsServer(t, api.Options{MaxConcurrent: slots, StallTimeout: time.Second, QueueWait: 10 * time.Second})
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ts := startHTTPOn(t, srv, smallBuffers{ln}, proto == "HTTP/2.0")
			var stalled []net.Conn
			var heads [][]byte // what each stalled HTTP/1.1 client read before it stopped
			for i := 0; i < slots; i++ {
				// The response's head arrives once the answer has started
				// (past the 256 KiB held back): the request holds a slot.
				if proto == "HTTP/2.0" {
					stallH2(t, ts, wholeBox)
					continue
				}
				c := dialSmall(t, ts.Listener.Addr().String(), wholeBox)
				stalled = append(stalled, c)
				heads = append(heads, readStatusLine(t, c))
			}
			start := time.Now()
			resp, body, err := fetch(t, ts.Client(), ts.URL+"/api/v1/stores/points")
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("a reading client behind %d stalled ones: %d after %v (%v) %.200s", slots, resp.StatusCode, time.Since(start), err, body)
			}
			for _, l := range logs.awaitRequests(t, slots, "/api/v1/stores/{store}/bbox") {
				if l["outcome"] != "stalled" {
					t.Errorf("access log: %v", l)
				}
			}
			if v := metric(t, srv, `zvfserve_http_requests_total\{code="200",outcome="stalled",route="/api/v1/stores/\{store\}/bbox"\}`); v != slots {
				t.Errorf("requests_total{outcome=stalled} = %v, want %d", v, slots)
			}
			for i, c := range stalled {
				// What the client finally reads ends without the chunked
				// body's terminator: the cut is visible.
				_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
				rest, err := io.ReadAll(c)
				b := append(heads[i], rest...)
				if (err != nil && !errors.Is(err, syscall.ECONNRESET)) || bytes.HasSuffix(b, []byte("\r\n0\r\n\r\n")) || !bytes.HasPrefix(b, []byte("HTTP/1.1 200")) {
					t.Errorf("stalled client read %d bytes ending %q: %v", len(b), b[max(0, len(b)-16):], err)
				}
			}
		})
	}
}

// TestSlowReadersLeaveSlots: a response blocked on a client that does not
// read holds its connection, not a work slot. The case: 8 clients
// that never read a large answer at MaxConcurrent 8 kept every other
// request at 503 for the whole stall timeout. Here the stall timeout is
// far longer than the test and the queue wait shorter: a small box must
// be answered while the 8 are stuck, and each must still be whole-or-cut
// (they are cut when the test ends). No sleeps: the stuck answers are
// known started from their status lines.
func TestSlowReadersLeaveSlots(t *testing.T) {
	t.Parallel()
	const slots = 8
	for _, proto := range []string{"HTTP/1.1", "HTTP/2.0"} {
		t.Run(proto, func(t *testing.T) {
			t.Parallel()
			srv, _, _ := pointsServer(t, api.Options{MaxConcurrent: slots, StallTimeout: 10 * time.Minute, QueueWait: 4 * time.Second})
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ts := startHTTPOn(t, srv, smallBuffers{ln}, proto == "HTTP/2.0")
			for i := 0; i < slots; i++ {
				if proto == "HTTP/2.0" {
					stallH2(t, ts, wholeBox+"&f=ndjson&attributes=*")
					continue
				}
				c := dialSmall(t, ts.Listener.Addr().String(), wholeBox+"&f=ndjson&attributes=*")
				readStatusLine(t, c)
			}
			start := time.Now()
			resp, body, err := fetch(t, ts.Client(), ts.URL+"/api/v1/stores/points/bbox?min=0,0,0&max=100,100,100")
			took := time.Since(start)
			if err != nil || resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`"next":null`)) {
				t.Fatalf("a small box behind %d stuck answers: %d after %v (%v) %.200s", slots, resp.StatusCode, took, err, body)
			}
			if took > 5*time.Second {
				t.Fatalf("a small box behind %d stuck answers took %v", slots, took)
			}
		})
	}
}

// stallH2 asks for path over HTTP/2, as a client with a 64 KiB stream
// window that never reads the body: once the answer has started (its
// head has come) the server's writes block when the window is full.
func stallH2(t *testing.T, ts *httptest.Server, path string) {
	t.Helper()
	tr := ts.Client().Transport.(*http.Transport).Clone()
	tr.HTTP2 = &http.HTTP2Config{MaxReceiveBufferPerStream: 64 << 10}
	req, _ := http.NewRequest(http.MethodGet, ts.URL+path, nil)
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ProtoMajor != 2 {
		t.Fatalf("served over %s", resp.Proto)
	}
	t.Cleanup(func() {
		resp.Body.Close()
		tr.CloseIdleConnections()
	})
}

// readStatusLine reads from c up to the end of the response's status line
// and returns what it read.
func readStatusLine(t *testing.T, c net.Conn) []byte {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	defer c.SetReadDeadline(time.Time{})
	var b []byte
	buf := make([]byte, 64)
	for !bytes.Contains(b, []byte("\r\n")) {
		n, err := c.Read(buf)
		b = append(b, buf[:n]...)
		if err != nil {
			t.Fatalf("after %q: %v", b, err)
		}
	}
	return b
}

// keepAlive is a raw HTTP/1.1 client connection that makes requests one
// at a time and keeps the connection open between them.
type keepAlive struct {
	c net.Conn
	r *bufio.Reader
}

func dialKeepAlive(t *testing.T, addr string) *keepAlive {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &keepAlive{c: c, r: bufio.NewReader(c)}
}

// get makes one request; the error says the server closed the connection.
func (k *keepAlive) get(path string) (int, error) {
	_ = k.c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(k.c, "GET "+path+" HTTP/1.1\r\nHost: zvf\r\n\r\n"); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(k.r, nil)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// closed reports whether the server has closed the connection (an open,
// quiet one makes it wait 2 s).
func (k *keepAlive) closed() bool {
	_ = k.c.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, err := k.r.ReadByte()
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// TestConnectionCap: at most MaxConnections are open. At the cap the
// connection idle longest is closed to make room for a new one; with none
// idle a new connection is closed at once (and counted). Keep-alive
// connections idle past IdleTimeout are closed.
func TestConnectionCap(t *testing.T) {
	t.Parallel()
	const limit = 20
	open := func(srv *api.Server) float64 { return metric(t, srv, `zvfserve_http_connections_open`) }

	t.Run("idle connections go first", func(t *testing.T) {
		srv, ts, states := capServer(t, api.Options{MaxConnections: limit})
		var conns []*keepAlive
		for i := 0; i < limit+10; i++ {
			k := dialKeepAlive(t, ts.Listener.Addr().String())
			if code, err := k.get("/healthz"); err != nil || code != 200 {
				t.Fatalf("connection %d: %d %v", i, code, err)
			}
			conns = append(conns, k)
			// Each is idle before the next arrives (the server marks it
			// idle just after sending the answer).
			awaitStates(t, states, http.StateIdle, 1)
			if n := metric(t, srv, `zvfserve_http_connections_idle`); n != float64(min(i+1, limit)) {
				t.Fatalf("after connection %d: %v idle, want %d", i, n, min(i+1, limit))
			}
			if n := open(srv); n > limit {
				t.Fatalf("%v connections open, cap %d", n, limit)
			}
		}
		for i, k := range conns {
			if i < 10 {
				if !k.closed() {
					t.Errorf("connection %d is open: the oldest idle ones go first", i)
				}
			} else if code, err := k.get("/healthz"); err != nil || code != 200 {
				t.Errorf("connection %d: %d %v, want it open", i, code, err)
			}
		}
		if v := metric(t, srv, `zvfserve_http_connections_idle_closed_total`); v != 10 {
			t.Errorf("idle_closed_total %v, want 10", v)
		}
	})

	t.Run("only probes when none is idle", func(t *testing.T) {
		// The server's clock stands still: none of them has been silent
		// for a second, however slow this test runs.
		srv, ts, states := capServer(t, api.Options{MaxConnections: limit, Now: newTestClock().now})
		// Connected but silent for less than a second: not idle keep-alive
		// connections, not evicted.
		for i := 0; i < limit; i++ {
			dialKeepAlive(t, ts.Listener.Addr().String())
		}
		awaitStates(t, states, http.StateNew, limit)
		if n := open(srv); n != limit {
			t.Fatalf("%v open after %d connections, want %d", n, limit, limit)
		}
		// Past the cap only a probe slot (TestProbeSlotsAtTheCap): data
		// is refused there, and the connection closed.
		k := dialKeepAlive(t, ts.Listener.Addr().String())
		if code, err := k.get("/api/v1/stores"); err != nil || code != http.StatusServiceUnavailable || !k.closed() {
			t.Fatalf("a request for data past the cap: %d %v, want 503 and the connection closed", code, err)
		}
		awaitStates(t, states, http.StateClosed, 1)
		if n := open(srv); n != limit {
			t.Errorf("%v open, want %d", n, limit)
		}
	})

	t.Run("silent connections make room after a second", func(t *testing.T) {
		// The case: 200 connections that send nothing, at a cap of
		// 200, locked every other client out. The server's clock is ours:
		// no waiting for the second to pass.
		const silentCap = 200
		clock := newTestClock()
		srv, ts, states := capServer(t, api.Options{MaxConnections: silentCap, Now: clock.now})
		addr := ts.Listener.Addr().String()
		var silent []*keepAlive
		for i := 0; i < silentCap; i++ {
			silent = append(silent, dialKeepAlive(t, addr))
		}
		awaitStates(t, states, http.StateNew, silentCap)
		// Silent for less than a second: they keep their places, and a
		// new connection gets only a probe slot (TestProbeSlotsAtTheCap).
		clock.advance(silentAfter - time.Millisecond)
		past := dialKeepAlive(t, addr)
		if code, err := past.get("/api/v1/stores"); err != nil || code != http.StatusServiceUnavailable || !past.closed() {
			t.Fatalf("a connection past the cap while the others had been silent for less than a second: %d %v, want 503 on a probe slot, closed", code, err)
		}
		clock.advance(time.Millisecond)
		for i := 0; i < 20; i++ {
			if code, err := dialKeepAlive(t, addr).get("/healthz"); err != nil || code != http.StatusOK {
				t.Fatalf("client %d behind %d silent connections: %d %v", i, silentCap, code, err)
			}
		}
		// The oldest silent ones made room, in the order they came.
		for i, k := range silent[:20] {
			if !k.closed() {
				t.Errorf("silent connection %d is still open", i)
			}
		}
		if v := metric(t, srv, `zvfserve_http_connections_silent_closed_total`); v != 20 {
			t.Errorf("silent_closed_total %v, want 20", v)
		}
		if n := open(srv); n != silentCap {
			t.Errorf("%v open, want %d", n, silentCap)
		}
	})

	t.Run("idle timeout", func(t *testing.T) {
		srv, ts, states := capServer(t, api.Options{IdleTimeout: 200 * time.Millisecond})
		k := dialKeepAlive(t, ts.Listener.Addr().String())
		if code, err := k.get("/healthz"); err != nil || code != 200 {
			t.Fatalf("%d %v", code, err)
		}
		if !k.closed() {
			t.Fatal("an idle keep-alive connection outlived IdleTimeout")
		}
		awaitStates(t, states, http.StateClosed, 1)
		if n := open(srv); n != 0 {
			t.Fatalf("%v connections open after the only one closed", n)
		}
	})
}

// silentAfter is how long a connection may send nothing before it may
// make room at the cap (api's own constant, as documented).
const silentAfter = time.Second

// testClock is a server clock a test moves by hand.
type testClock struct {
	base time.Time
	off  atomic.Int64
}

func newTestClock() *testClock { return &testClock{base: time.Now()} }

func (c *testClock) now() time.Time          { return c.base.Add(time.Duration(c.off.Load())) }
func (c *testClock) advance(d time.Duration) { c.off.Add(int64(d)) }

func capServer(t *testing.T, o api.Options) (*api.Server, *httptest.Server, <-chan http.ConnState) {
	t.Helper()
	o.Stores = openStores(t, "graph")
	srv := apitest.New(t, o)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts, states := startHTTPWatched(t, srv, ln)
	return srv, ts, states
}

// TestSlowSteadyClientIsNotCut: the stall timeout cuts a client that
// takes nothing, not one that reads slowly but steadily — here at most
// 4 KiB every 20 ms (200 kB/s) against a 1 s stall timeout, while the
// server writes 256 KiB at a time (each such write takes 1.3 s or more to
// drain).
func TestSlowSteadyClientIsNotCut(t *testing.T) {
	t.Parallel()
	srv, _, logs := pointsServer(t, api.Options{StallTimeout: time.Second})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := startHTTPOn(t, srv, smallBuffers{ln}, false)
	c := dialSmall(t, ts.Listener.Addr().String(), wholeBox+"&f=bin")
	_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
	var got bytes.Buffer
	buf := make([]byte, 4<<10)
	for {
		// A slow client, paced: not a wait for the server.
		time.Sleep(20 * time.Millisecond)
		n, err := c.Read(buf)
		got.Write(buf[:n])
		if chunkedEnd(got.Bytes()) {
			break
		}
		if err != nil {
			t.Fatalf("after %d bytes: %v", got.Len(), err)
		}
	}
	resp, err := http.ReadResponse(bufio.NewReader(&got), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil || len(body) < 700_000 {
		t.Fatalf("%d bytes: %v", len(body), err)
	}
	if l := logs.awaitRequests(t, 1, ""); len(l) != 1 || l[0]["outcome"] != "complete" {
		t.Fatalf("access log: %v", l)
	}
}

// chunkedEnd reports whether b ends a chunked HTTP/1.1 body: the last
// chunk, then trailers (a streamed bbox sends its counts as trailers),
// then an empty line.
func chunkedEnd(b []byte) bool {
	i := bytes.LastIndex(b, []byte("\r\n0\r\n"))
	return i >= 0 && bytes.HasSuffix(b[i+3:], []byte("\r\n\r\n")) || bytes.HasSuffix(b, []byte("\r\n0\r\n\r\n"))
}

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

// probeConnLife is how long a probe slot's connection may live (api's own
// constant, as documented).
const probeConnLife = 2 * time.Second

// fillCap opens n connections that have each sent part of a request: not
// silent, not idle, never closed for room.
func fillCap(t *testing.T, addr string, n int) []net.Conn {
	t.Helper()
	var cs []net.Conn
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		if _, err := io.WriteString(c, "GET /api/v1/stores HTTP/1.1\r\nHost: x\r\n"); err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	return cs
}

// TestProbeSlotsAtTheCap: with every connection under the cap busy (here
// each has sent part of a request), a probe still gets through on one of
// the few slots past the cap; any other request there gets 503 with
// Retry-After, and every answer there closes its connection. With every
// slot held by a slow request a probe still gets through, in the place
// of the oldest; the slots are bounded, and a connection holding one goes
// within probeConnLife. (TestProbeSlotsRefuseWhenAllAnswer: with every
// slot answering, a new connection is refused.)
func TestProbeSlotsAtTheCap(t *testing.T) {
	t.Parallel()
	const limit = 4
	srv, ts, states := capServer(t, api.Options{MaxConnections: limit, Now: newTestClock().now})
	addr := ts.Listener.Addr().String()
	fillCap(t, addr, limit)
	awaitStates(t, states, http.StateNew, limit)

	client := &http.Client{Timeout: 5 * time.Second}
	get := func(method, path string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(method, ts.URL+path, nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s at the cap: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	for _, tc := range []struct{ method, path, body string }{
		{http.MethodGet, "/healthz", "ok\n"}, {http.MethodGet, "/readyz", "ready\n"},
		{http.MethodHead, "/healthz", ""}, {http.MethodHead, "/readyz", ""},
	} {
		resp, body := get(tc.method, tc.path)
		if resp.StatusCode != http.StatusOK || body != tc.body || !resp.Close {
			t.Errorf("%s %s at the cap: %d %q (closes: %v), want 200 %q and the connection closed", tc.method, tc.path, resp.StatusCode, body, resp.Close, tc.body)
		}
	}
	resp, body := get(http.MethodGet, "/api/v1/stores")
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" || !resp.Close ||
		resp.Header.Get("Content-Type") != "application/problem+json" || !strings.Contains(body, "answers only /healthz and /readyz") {
		t.Errorf("a request for data on a probe slot: %d %v %s, want 503 problem+json with Retry-After and the connection closed", resp.StatusCode, resp.Header, body)
	}
	if v := metric(t, srv, `zvfserve_http_connections_probe_slot_total`); v != 5 {
		t.Errorf("probe_slot_total %v, want 5", v)
	}
	if v := metric(t, srv, `zvfserve_http_connections_refused_total`); v != 0 {
		t.Errorf("refused_total %v, want 0", v)
	}

	// Slow clients that take every probe slot cannot keep a probe out:
	// the oldest of them whose request has not been read makes room. The
	// slots stay bounded, and none is held past probeConnLife.
	openNow := func() float64 { return metric(t, srv, `zvfserve_http_connections_open`) }
	awaitOpen := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); openNow() != float64(n); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%v connections open, never %d", openNow(), n)
			}
		}
	}
	awaitOpen(limit) // the probes' connections closed after their answers
	held := fillCap(t, addr, api.ProbeConnections)
	awaitOpen(limit + api.ProbeConnections)
	start := time.Now()
	if resp, body := get(http.MethodGet, "/readyz"); resp.StatusCode != http.StatusOK || body != "ready\n" {
		t.Errorf("probe with every probe slot held by a slow request: %d %q", resp.StatusCode, body)
	}
	if n := openNow(); n > limit+api.ProbeConnections {
		t.Errorf("%v connections open, at most %d", n, limit+api.ProbeConnections)
	}
	if v := metric(t, srv, `zvfserve_http_connections_probe_slot_closed_total`); v != 1 {
		t.Errorf("probe_slot_closed_total %v, want 1", v)
	}
	if v := metric(t, srv, `zvfserve_http_connections_refused_total`); v != 0 {
		t.Errorf("refused_total %v, want 0", v)
	}
	for i, c := range held {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("probe slot %d held by a slow request: read %v, want it closed", i, err)
		}
		if i == 0 && time.Since(start) > probeConnLife/2 {
			t.Errorf("the oldest slow request on a probe slot was not closed for the probe, but after %v", time.Since(start))
		}
	}
	if d := time.Since(start); d > probeConnLife+time.Second {
		t.Errorf("slow requests held the probe slots %v", d)
	}
	if resp, body := get(http.MethodGet, "/healthz"); resp.StatusCode != http.StatusOK || body != "ok\n" {
		t.Errorf("probe once the slots were freed: %d %q", resp.StatusCode, body)
	}
}

// TestProbeSlotRefusalAllowsTheOrigin: the 503 a probe slot answers to
// anything but a probe carries the CORS headers every answer carries, so
// that a viewer on another origin reads it (and its Retry-After) as the
// overload it is. Before, it had none: the browser reported a CORS
// failure instead, which a viewer cannot tell from the server being gone.
func TestProbeSlotRefusalAllowsTheOrigin(t *testing.T) {
	t.Parallel()
	const origin = "https://viewer.example"
	for _, tc := range []struct {
		name    string
		origins []string
		allow   string
	}{
		{"any origin", []string{"*"}, "*"},
		{"a list", []string{origin}, origin},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const limit = 2
			_, ts, states := capServer(t, api.Options{MaxConnections: limit, CORSOrigins: tc.origins, Now: newTestClock().now})
			fillCap(t, ts.Listener.Addr().String(), limit)
			awaitStates(t, states, http.StateNew, limit)
			req, _ := http.NewRequest(http.MethodGet, ts.URL+"/api/v1/stores", nil)
			req.Header.Set("Origin", origin)
			resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "answers only /healthz and /readyz") {
				t.Fatalf("a request for data on a probe slot: %d %s", resp.StatusCode, body)
			}
			if got := resp.Header.Get("Access-Control-Allow-Origin"); got != tc.allow ||
				!strings.Contains(resp.Header.Get("Access-Control-Expose-Headers"), "Retry-After") {
				t.Errorf("the probe slot's 503: Access-Control-Allow-Origin %q, Expose-Headers %q; want %q and Retry-After exposed",
					got, resp.Header.Get("Access-Control-Expose-Headers"), tc.allow)
			}
		})
	}
}
