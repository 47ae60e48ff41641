package api_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/api"
)

// TestRefusedNewcomerIsTold503: at the cap, with every connection under
// it busy and every probe slot held, a client that is not a probe is
// refused — and is told so: a 503 problem+json with Retry-After, then the
// close, rather than a bare close it could not tell from a crash. Before,
// it read EOF ("server closed the connection") and nothing else.
func TestRefusedNewcomerIsTold503(t *testing.T) {
	t.Parallel()
	const limit = 2
	srv, ts, states := capServer(t, api.Options{MaxConnections: limit, Now: newTestClock().now})
	addr := ts.Listener.Addr().String()
	fillCap(t, addr, limit)
	awaitStates(t, states, http.StateNew, limit)
	fillCap(t, addr, api.ProbeConnections) // each on a probe slot, its request not read
	awaitStates(t, states, http.StateNew, api.ProbeConnections)

	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "GET /api/v1/stores HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("a newcomer refused at the cap: %v, want a 503", err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		t.Fatalf("the refusal's body: %v", err)
	}
	var p struct {
		Type, Title, Detail string
		Status              int
	}
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("the refusal's body %q: %v", body, err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" || !resp.Close ||
		resp.Header.Get("Content-Type") != "application/problem+json" ||
		p.Type != "https://zvfserve.dev/problems/overloaded" || p.Status != 503 ||
		!strings.Contains(p.Detail, "--max-connections") || !strings.Contains(p.Detail, "retry") {
		t.Errorf("a newcomer refused at the cap: %d %v %s; want 503 overloaded problem+json with Retry-After 1 and Connection: close", resp.StatusCode, resp.Header, body)
	}
	if n, err := br.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Errorf("after the refusal: %d bytes, %v; want the connection closed", n, err)
	}
	if v := metric(t, srv, `zvfserve_http_connections_refused_total`); v != 1 {
		t.Errorf("refused_total %v, want 1", v)
	}
}
