package api_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/api"
)

// startAdmin serves srv's admin listener as serve does with --admin-addr.
func startAdmin(t *testing.T, srv *api.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs, limited := srv.AdminHTTPServer(ln)
	go func() { _ = hs.Serve(limited) }()
	t.Cleanup(func() { _ = hs.Close() })
	return ln.Addr().String()
}

// closedWithin reports whether the server closes c (a read ends in EOF or
// a reset) within d.
func closedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	return !errors.Is(err, os.ErrDeadlineExceeded)
}

// TestAdminListenerBounds: the admin listener (/metrics, /debug/pprof) is
// bounded like the API's: an idle keep-alive connection is closed after
// IdleTimeout, headers over its small limit are refused (431), and past
// its connection cap a new connection is closed at once, so scrapers or a
// leak of connections cannot exhaust the process's descriptors. Before,
// it had no idle timeout, the default 1 MB header limit and no cap.
func TestAdminListenerBounds(t *testing.T) {
	t.Parallel()
	srv, _ := newServer(t, api.Options{Stores: openStores(t, "graph"), AdminMetrics: true, IdleTimeout: 300 * time.Millisecond})
	addr := startAdmin(t, srv)

	t.Run("idle connection closed", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("/metrics: %d", resp.StatusCode)
		}
		if !closedWithin(c, 5*time.Second) {
			t.Error("an idle keep-alive connection is still open 5 s after its answer (IdleTimeout 300ms)")
		}
	})

	t.Run("oversized headers refused", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		go func() {
			_, _ = io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: "+strings.Repeat("a", 256<<10)+"\r\n\r\n")
		}()
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("256 KiB of headers: %d, want 431", resp.StatusCode)
		}
	})

	t.Run("connection cap", func(t *testing.T) {
		// A listener of its own: the connections above may still be
		// closing (net/http lingers after a 431).
		addr := startAdmin(t, srv)
		var open []net.Conn
		defer func() {
			for _, c := range open {
				_ = c.Close()
			}
		}()
		for range api.AdminMaxConnections {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			open = append(open, c)
		}
		time.Sleep(100 * time.Millisecond) // let the server accept them
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if !closedWithin(c, 2*time.Second) {
			t.Errorf("a connection past the cap of %d is still open", api.AdminMaxConnections)
		}
		// Room is made as connections close.
		_ = open[0].Close()
		open = open[1:]
		time.Sleep(100 * time.Millisecond)
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatalf("after one closed: %v", err)
		}
		resp.Body.Close()
	})
}

// TestProbesAnswerOnAdminAtTheCap: with the API's listener at its
// connection cap and none of its connections idle (slow clients sending
// their requests a byte at a time), a new connection there gets at most
// a probe slot (TestProbeSlotsAtTheCap), which a flood may take too —
// but /healthz and /readyz answer on the admin listener, which has its
// own connections, so a flood of slow clients cannot fail a liveness
// probe pointed there and get the replica restarted. Before, the admin
// listener had no probes (404).
func TestProbesAnswerOnAdminAtTheCap(t *testing.T) {
	t.Parallel()
	const limit = 4
	srv, ts, states := capServer(t, api.Options{MaxConnections: limit, Now: newTestClock().now, AdminMetrics: true})
	for range limit {
		c, err := net.Dial("tcp", ts.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		// Part of a request: not silent, not idle; never closed for room.
		if _, err := io.WriteString(c, "GET /api/v1/stores HTTP/1.1\r\nHost: x\r\n"); err != nil {
			t.Fatal(err)
		}
	}
	awaitStates(t, states, http.StateNew, limit)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	// The API's port answers only probes now (TestProbeSlotsAtTheCap).
	if resp, err := client.Get(ts.URL + "/api/v1/stores"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("at the cap the API's listener served data (%d): the test does not flood it", resp.StatusCode)
		}
	}
	admin := startAdmin(t, srv)
	for _, p := range []string{"/healthz", "/readyz"} {
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			req, _ := http.NewRequest(method, "http://"+admin+p, nil)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("admin %s %s: %v", method, p, err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || (p == "/readyz" && resp.Header.Get("Cache-Control") != "no-store") {
				t.Errorf("admin %s %s: %d %v, want 200", method, p, resp.StatusCode, resp.Header)
			}
		}
	}
	// Draining shows there too.
	srv.SetReady(false)
	resp, err := client.Get("http://" + admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("admin /readyz while draining: %d, want 503", resp.StatusCode)
	}
}
