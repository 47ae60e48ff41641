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
		// It is told why, as the API's listener tells a newcomer at its
		// cap (TestRefusedNewcomerIsTold503): before, it was closed
		// without a word, which a scraper reports as a reset.
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("a connection past the cap of %d: %v, want a 503 answer", api.AdminMaxConnections, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" ||
			resp.Header.Get("Content-Type") != "application/problem+json" || resp.Header.Get("Cache-Control") != "no-store" ||
			!strings.Contains(string(body), `"type":"https://zvfserve.dev/problems/overloaded"`) ||
			!strings.Contains(string(body), "admin listener holds its 16 connections") {
			t.Errorf("a connection past the cap: %d, Retry-After %q, Content-Type %q, Cache-Control %q: %s", resp.StatusCode,
				resp.Header.Get("Retry-After"), resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control"), body)
		}
		if !closedWithin(c, 2*time.Second) {
			t.Errorf("a connection past the cap of %d is still open after its 503", api.AdminMaxConnections)
		}
		// Room is made as connections close.
		_ = open[0].Close()
		open = open[1:]
		time.Sleep(100 * time.Millisecond)
		resp, err = (&http.Client{Timeout: 5 * time.Second}).Get("http://" + addr + "/metrics")
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

// TestAdminJudgesIfMatch: the admin listener evaluates If-Match as the
// API's listener does (RFC 9110 13.1.1). None of its answers carries an
// ETag, so any If-Match but "*" is the 412 problem, "*" gets the answer,
// If-None-Match: * turns a 200 into a 304, and a path it does not serve
// is still its 404. Before, the admin listener ignored both headers and
// sent its 200 whatever the client had pinned.
func TestAdminJudgesIfMatch(t *testing.T) {
	t.Parallel()
	srv, _ := newServer(t, api.Options{})
	addr := startAdmin(t, srv)
	get := func(method, path string, hdr ...string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(method, "http://"+addr+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Add(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	const other = `"0123456789abcdef01234567"`
	for _, path := range []string{"/healthz", "/readyz", "/metrics", "/debug/pprof/", "/debug/pprof/cmdline"} {
		plain, full := get(http.MethodGet, path)
		if plain.StatusCode != http.StatusOK || plain.Header.Get("ETag") != "" {
			t.Fatalf("%s: %d, ETag %q (the test wants a 200 without one)", path, plain.StatusCode, plain.Header.Get("ETag"))
		}
		for _, hdr := range [][]string{
			{"If-Match", other},
			{"If-Match", "W/" + other},
			{"If-Match", other, "If-None-Match", "*"},
		} {
			resp, body := get(http.MethodGet, path, hdr...)
			if resp.StatusCode != http.StatusPreconditionFailed || resp.Header.Get("Content-Type") != "application/problem+json" ||
				resp.Header.Get("Cache-Control") != "no-store" || !strings.Contains(body, "precondition-failed") || !strings.Contains(body, "no ETag") {
				t.Errorf("%s, %q: %d %q, Cache-Control %q: %s", path, hdr, resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control"), body)
			}
		}
		if resp, body := get(http.MethodHead, path, "If-Match", other); resp.StatusCode != http.StatusPreconditionFailed || body != "" {
			t.Errorf("HEAD %s, If-Match %s: %d, %d bytes", path, other, resp.StatusCode, len(body))
		}
		if resp, body := get(http.MethodGet, path, "If-Match", "*"); resp.StatusCode != http.StatusOK || (path == "/healthz" && body != full) {
			t.Errorf("%s, If-Match *: %d, %q (want the 200's %q)", path, resp.StatusCode, body, full)
		}
		if resp, body := get(http.MethodGet, path, "If-None-Match", "*"); resp.StatusCode != http.StatusNotModified || body != "" {
			t.Errorf("%s, If-None-Match *: %d, %d bytes (want a 304)", path, resp.StatusCode, len(body))
		}
	}
	_, full := get(http.MethodGet, "/nosuch")
	if resp, body := get(http.MethodGet, "/nosuch", "If-Match", other); resp.StatusCode != http.StatusNotFound || body != full {
		t.Errorf("/nosuch, If-Match %s: %d, want the 404 without it:\n%s\n%s", other, resp.StatusCode, body, full)
	}
}

// TestAdminIfMatchRefusesProfilesFirst: none of the admin listener's
// answers has an ETag, so an If-Match without "*" can only be a 412 — but
// a CPU profile, a trace or a delta profile ran its whole duration first
// (a minute's profile answered 412 after a minute, having profiled the
// server all the while). Their 412 comes at once; a request pprof refuses
// as malformed is still its 400. If-None-Match: * (every answer here
// exists) is its 304 at once in the same way.
func TestAdminIfMatchRefusesProfilesFirst(t *testing.T) {
	t.Parallel()
	srv, _ := newServer(t, api.Options{})
	addr := startAdmin(t, srv)
	const other = `"0123456789abcdef01234567"`
	get := func(path string) (int, string, time.Duration) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("If-Match", other)
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), time.Since(start)
	}
	for _, path := range []string{"/debug/pprof/profile?seconds=10", "/debug/pprof/trace?seconds=10", "/debug/pprof/heap?seconds=10"} {
		code, body, took := get(path)
		if code != http.StatusPreconditionFailed || !strings.Contains(body, "precondition-failed") || !strings.Contains(body, "no ETag") {
			t.Errorf("%s, If-Match %s: %d %s", path, other, code, body)
		}
		if took > 5*time.Second {
			t.Errorf("%s, If-Match %s: the 412 took %v: the profile ran first", path, other, took.Round(time.Millisecond))
		}
	}
	// If-None-Match: * is a 304 (every answer here exists), also at once.
	for _, path := range []string{"/debug/pprof/profile?seconds=10", "/debug/pprof/heap?seconds=10"} {
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("If-None-Match", "*")
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if took := time.Since(start); resp.StatusCode != http.StatusNotModified || len(b) != 0 || took > 5*time.Second {
			t.Errorf("%s, If-None-Match *: %d, %d bytes after %v; want a 304 at once", path, resp.StatusCode, len(b), took.Round(time.Millisecond))
		}
	}
	for path, want := range map[string]string{
		"/debug/pprof/heap?seconds=x":         `invalid value for "seconds"`,
		"/debug/pprof/heap?seconds=2&debug=1": "incompatible",
		"/debug/pprof/nosuch?seconds=2":       "Unknown profile",
	} {
		if code, body, _ := get(path); code/100 != 4 || code == http.StatusPreconditionFailed || !strings.Contains(body, want) {
			t.Errorf("%s, If-Match %s: %d %q, want pprof's refusal saying %q", path, other, code, body, want)
		}
	}
}
