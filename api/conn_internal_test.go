package api

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestProbeSlotsRefuseWhenAllAnswer: past the cap, a new connection takes
// a free probe slot, else the place of the oldest probe slot connection
// whose request has not been read (closed for it), and is refused when
// every one is answering; the slots never number more than
// ProbeConnections.
func TestProbeSlotsRefuseWhenAllAnswer(t *testing.T) {
	now := time.Now()
	l := newConnLimiter(nil, 1, NewMetrics(), func() time.Time { return now })
	conn := func() net.Conn {
		a, b := net.Pipe()
		t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
		return a
	}
	if l.admit(conn()) == nil { // the cap: silent for less than silentAfter, kept
		t.Fatal("the first connection was refused")
	}
	var slots []*limitedConn
	for i := range ProbeConnections {
		c, _ := l.admit(conn()).(*limitedConn)
		if c == nil || !c.probe {
			t.Fatalf("connection %d past the cap: %v, want a probe slot", i, c)
		}
		slots = append(slots, c)
	}
	for _, c := range slots[1:] {
		l.probeServing(c)
	}
	c, _ := l.admit(conn()).(*limitedConn)
	if c == nil || !c.probe {
		t.Fatal("with a probe slot whose request was not read, a new connection was refused")
	}
	if _, err := slots[0].Read(make([]byte, 1)); err == nil {
		t.Fatal("the probe slot's connection whose request was not read is still open")
	}
	if v := testutil.ToFloat64(l.m.connProbeClosed); v != 1 {
		t.Fatalf("probe_slot_closed_total %v, want 1", v)
	}
	l.probeServing(c)
	if l.admit(conn()) != nil {
		t.Fatal("with every probe slot answering, a new connection was admitted")
	}
	if v := testutil.ToFloat64(l.m.connRefuse); v != 1 {
		t.Fatalf("refused_total %v, want 1", v)
	}
	l.mu.Lock()
	probes := l.probes
	l.mu.Unlock()
	if probes != ProbeConnections {
		t.Fatalf("%d probe slots taken, want %d", probes, ProbeConnections)
	}
}

// TestRefusalHoldsNoAccept: a newcomer refused at the cap is answered a
// 503 apart from the accept loop, so a client that reads nothing (here a
// pipe no one reads, which takes no byte) holds up no other admit; it
// reads the 503 when it does read. At most refusalAnswers are answered at
// once; past that one is closed without a word.
func TestRefusalHoldsNoAccept(t *testing.T) {
	now := time.Now()
	l := newConnLimiter(nil, 1, NewMetrics(), func() time.Time { return now })
	var peers []net.Conn
	conn := func() net.Conn {
		a, b := net.Pipe()
		t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
		peers = append(peers, b)
		return a
	}
	if l.admit(conn()) == nil {
		t.Fatal("the first connection was refused")
	}
	for range ProbeConnections {
		c, _ := l.admit(conn()).(*limitedConn)
		if c == nil {
			t.Fatal("a probe slot was refused")
		}
		l.probeServing(c)
	}
	start := time.Now()
	const refused = 3
	for range refused {
		if l.admit(conn()) != nil {
			t.Fatal("with every probe slot answering, a new connection was admitted")
		}
	}
	if d := time.Since(start); d > refusalWrite/2 {
		t.Errorf("%d refusals to clients that read nothing took %v: they held up the accept loop", refused, d)
	}
	for _, p := range peers[len(peers)-refused:] {
		_ = p.SetReadDeadline(time.Now().Add(5 * time.Second))
		b, err := io.ReadAll(p)
		if !strings.HasPrefix(string(b), "HTTP/1.1 503 Service Unavailable\r\n") || !strings.Contains(string(b), "Retry-After: 1\r\n") {
			t.Errorf("a refused client read %q (%v), want a 503 with Retry-After", b, err)
		}
	}
}

// TestProbeVerdict: what a connection's first bytes say of it, as the
// probe slots judge a newcomer once all are taken: a probe's request line
// (GET or HEAD of /healthz or /readyz, the path ended by a space or a
// query), too few bytes to tell, or anything else.
func TestProbeVerdict(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{"", probeMaybe},
		{"G", probeMaybe},
		{"GET /heal", probeMaybe},
		{"GET /healthz", probeMaybe}, // /healthzz would not be one
		{"GET /healthz ", probeYes},
		{"GET /healthz HTTP/1.1\r\n", probeYes},
		{"GET /readyz?verbose=1 HTTP/1.1", probeYes},
		{"HEAD /readyz HTTP/1.1", probeYes},
		{"HEAD /healthz ", probeYes},
		{"GET /healthzz HTTP/1.1", probeNo},
		{"GET /api/v1/stores HTTP/1.1", probeNo},
		{"POST /healthz HTTP/1.1", probeNo},
		{"get /healthz HTTP/1.1", probeNo},
		{"\x16\x03\x01\x02\x00", probeNo}, // a TLS ClientHello
		{"PRI * HTTP/2.0\r\n", probeNo},
	} {
		if got := probeVerdict([]byte(tc.in)); got != tc.want {
			t.Errorf("probeVerdict(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}
