package api

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zvfserve/zvfserve/api/problem"
)

// HTTPServer returns an http.Server for the API, and ln wrapped so that at
// most MaxConnections are open: at the cap the connection idle longest —
// a keep-alive connection between requests, or one that has sent nothing
// for silentAfter — is closed to make room; when there is none the new one
// takes one of ProbeConnections slots past the cap, which answer only
// /healthz and /readyz (see probeOnly) and live at most probeConnLife.
// When they are all taken, the new connection is read apart from the
// accept loop for at most probePeek: one whose first bytes are a probe's
// request line (plain HTTP/1) closes, for room, the oldest slot whose
// request has not been read — one that has not shown a probe's line
// first — and any other is refused, as it is at once when every slot is
// answering: answered a 503 with Retry-After, written without reading its
// request and apart from the accept loop (see refuse), then closed. Keep-alive connections idle for IdleTimeout are closed. Requests need their headers within 10 s; answers are bounded by
// the request clock and the writer's stall deadline (see Options), not by
// a whole-response timeout.
func (s *Server) HTTPServer(ln net.Listener) (*http.Server, net.Listener) {
	lim := newConnLimiter(ln, s.o.MaxConnections, s.m, s.o.Now)
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		// No ReadTimeout: on HTTP/1.1 it also bounds the connection's
		// background read while the handler runs, and its expiry cancels
		// the request — it would cut every answer that streams longer.
		// WriteTimeout covers only the server's own writes (a 400 for a
		// malformed request); every response sets its own deadlines.
		WriteTimeout:   s.o.StallTimeout,
		IdleTimeout:    s.o.IdleTimeout,
		MaxHeaderBytes: 64 << 10,
		ConnState:      lim.track,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if tc, ok := c.(*tls.Conn); ok {
				c = tc.NetConn()
			}
			if lc, ok := c.(*limitedConn); ok {
				if lc.probe {
					return context.WithValue(lim.progressCtx(ctx), probeConnKey, lc)
				}
				return lim.progressCtx(ctx)
			}
			return ctx
		},
	}
	return hs, lim
}

// newConnLimiter caps ln's open connections at max (see HTTPServer).
func newConnLimiter(ln net.Listener, max int, m *Metrics, now func() time.Time) *connLimiter {
	return &connLimiter{Listener: ln, max: max, m: m, now: now,
		idle: map[*limitedConn]time.Time{}, silent: map[*limitedConn]time.Time{}, unread: map[*limitedConn]struct{}{},
		refusing: make(chan struct{}, refusalAnswers),
		refusal:  refusalAnswer("the server is at its connection cap (--max-connections) with every connection busy; retry shortly")}
}

// connCtx is a connection context made from parent.
type connCtx struct{ parent, ctx context.Context }

// progressCtx is parent marked as the context of a connection whose write
// deadlines are progress deadlines. http.Server derives every connection's
// context from the one it made for its listener, so the marked one is made
// once, not once a connection.
func (l *connLimiter) progressCtx(parent context.Context) context.Context {
	if p := l.progress.Load(); p != nil && p.parent == parent {
		return p.ctx
	}
	p := &connCtx{parent: parent, ctx: context.WithValue(parent, progressConnKey, true)}
	l.progress.Store(p)
	return p.ctx
}

// silentAfter is how long a new connection may send nothing before it may
// be closed to make room at the connection cap: sockets opened and left
// silent (a port scan, a client that died after connecting, an attack)
// must not hold the cap against clients that ask for something.
const silentAfter = time.Second

// ProbeConnections is how many connections past --max-connections are
// kept for health probes: without them a kubelet's probe, arriving while
// every connection is busy (a flood of slow clients), was refused like any
// other, and a replica that was only busy got restarted.
const ProbeConnections = 4

// probeConnLife bounds a probe slot's connection from its arrival: its
// request must be read and answered within it (a probe's answer is a few
// bytes), so that slow clients landing there cannot hold the slots.
// Within it too, one whose request has not been read yet is closed for a
// newcomer when every slot is taken: clients that open connections and
// send slowly cannot keep a probe, which sends its request at once, out.
const probeConnLife = 2 * time.Second

// probePeek bounds how long a new connection is read, while every probe
// slot is taken, for a probe's request line: a probe sends it at once
// (a kubelet's, within a millisecond of connecting in a cluster).
const probePeek = 250 * time.Millisecond

// probePeeks bounds the connections read so at once; past it the one read
// longest is refused for the newcomer, so a flood of silent connections
// holds none of them longer than it takes probePeeks more to arrive.
const probePeeks = 64

// refusalAnswers bounds the refused connections being answered at once
// (see refuse); past it one is closed without a word. Each holds a
// descriptor for at most refusalWrite and refusalDrain.
const refusalAnswers = 16

// refusalWrite bounds the write of a refused connection's 503: a few
// hundred bytes, which a new socket's buffer takes at once; only a peer
// that takes nothing meets it.
const refusalWrite = time.Second

// refusalDrain bounds how long, and refusalDrainBytes how much of, what a
// refused client sent is read and dropped after its 503: closing a socket
// with unread bytes resets the connection, and the reset can reach the
// client before it has read the 503.
const (
	refusalDrain      = 500 * time.Millisecond
	refusalDrainBytes = 64 << 10
)

// refusalAnswer is the whole answer to a refused connection: a 503
// overloaded problem saying detail, written without reading the request
// (no instance: its path is not known), then the close.
func refusalAnswer(detail string) []byte {
	p := problem.New(problem.Overloaded, detail)
	body, _ := json.Marshal(p)
	body = append(body, '\n')
	head := "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/problem+json\r\nCache-Control: no-store\r\n" +
		"Retry-After: 1\r\nConnection: close\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"
	return append([]byte(head), body...)
}

// connLimiter caps the open connections of a listener (see HTTPServer).
type connLimiter struct {
	net.Listener
	max int
	m   *Metrics
	now func() time.Time // the server's clock

	// wakeOnce finds whether the listener takes deadlines (a TCP
	// listener does): then a new connection is peeked at when every probe
	// slot is taken (see peek), and one that is a probe is handed to
	// Accept through ready, woken by a deadline in the past.
	wakeOnce sync.Once
	deadline interface{ SetDeadline(time.Time) error }

	// progress is the context of its connections (see progressCtx).
	progress atomic.Pointer[connCtx]

	mu     sync.Mutex
	open   int
	probes int                        // connections on the probe slots
	unread map[*limitedConn]struct{}  // those on probe slots whose request has not been read yet
	seq    uint64                     // connections admitted
	idle   map[*limitedConn]time.Time // keep-alive connections between requests, since when
	silent map[*limitedConn]time.Time // connections not yet past their first request, accepted when
	// peeking: new connections being read for a probe's request line,
	// by arrival; ready: those that were one, admitted, for Accept.
	peeking []*peekConn
	ready   []*limitedConn
	shut    bool // Close was called

	// refusing holds a token for each refused connection being answered
	// (see refuse); refusal is the answer.
	refusing chan struct{}
	refusal  []byte
}

// peekConn is a new connection being read for a probe's request line.
type peekConn struct {
	net.Conn
	refused bool // closed for a newer one (l.mu)
}

// limitedConn is a connection of a connLimiter. Its write deadlines are
// progress deadlines: a write that times out having moved some bytes is
// given the same time again, so only a peer that takes nothing for a whole
// deadline's span is cut — however large the write, and without cutting
// writes into small pieces (each a system call and, on HTTP/1.1, a chunk).
type limitedConn struct {
	net.Conn
	l     *connLimiter
	once  sync.Once
	heard atomic.Bool // the peer has sent a byte
	seq   uint64      // order of arrival: of two equally old, the first goes first
	// probe: admitted past the cap on a probe slot; no deadline it is
	// given reaches past until.
	probe bool
	until time.Time
	// On a probe slot: pre is what a peek read before admitting it, read
	// again first; head gathers the first bytes read, until they tell
	// whether they are a probe's request line (line; see probeVerdict).
	pre     []byte
	head    [16]byte
	nhead   int
	decided bool
	line    atomic.Bool

	mu   sync.Mutex
	span time.Duration // of the write deadline last set; <= 0: none, or one that cuts now
}

func (c *limitedConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.span = 0
	if c.probe {
		return c.Conn.SetWriteDeadline(c.bound(t)) // not renewed: see until
	}
	if !t.IsZero() {
		c.span = time.Until(t)
	}
	return c.Conn.SetWriteDeadline(t)
}

func (c *limitedConn) SetReadDeadline(t time.Time) error {
	return c.Conn.SetReadDeadline(c.bound(t))
}

func (c *limitedConn) SetDeadline(t time.Time) error {
	if err := c.SetWriteDeadline(t); err != nil {
		return err
	}
	return c.SetReadDeadline(t)
}

// bound is t, or for a probe slot's connection the earlier of t and its
// end (none, the zero time, is its end).
func (c *limitedConn) bound(t time.Time) time.Time {
	if c.probe && (t.IsZero() || t.After(c.until)) {
		return c.until
	}
	return t
}

func (c *limitedConn) Read(p []byte) (int, error) {
	if len(c.pre) > 0 {
		n := copy(p, c.pre)
		c.pre = c.pre[n:]
		return n, nil
	}
	n, err := c.Conn.Read(p)
	if n > 0 && !c.heard.Load() {
		c.heard.Store(true)
	}
	if c.probe && !c.decided && n > 0 {
		// Only the server's connection goroutine reads: head is its own.
		c.nhead += copy(c.head[c.nhead:], p[:n])
		switch probeVerdict(c.head[:c.nhead]) {
		case probeYes:
			c.line.Store(true)
			c.decided = true
		case probeNo:
			c.decided = true
		}
	}
	return n, err
}

// What the first bytes of a connection say of it (probeVerdict).
const (
	probeMaybe = iota // too few to tell
	probeYes          // a probe's request line
	probeNo
)

// probeTargets begin the request lines of the probes.
var probeTargets = [...]string{"GET /healthz", "GET /readyz", "HEAD /healthz", "HEAD /readyz"}

// probeVerdict tells whether b, a connection's first bytes, begin a
// probe's request line: GET or HEAD of /healthz or /readyz, the path
// ended by a space or a query.
func probeVerdict(b []byte) int {
	verdict := probeNo
	for _, t := range probeTargets {
		switch {
		case len(b) > len(t) && string(b[:len(t)]) == t && (b[len(t)] == ' ' || b[len(t)] == '?'):
			return probeYes
		case len(b) <= len(t) && t[:len(b)] == string(b):
			verdict = probeMaybe
		}
	}
	return verdict
}

func (c *limitedConn) Write(p []byte) (int, error) {
	done := 0
	for {
		n, err := c.Conn.Write(p[done:])
		done += n
		if err == nil || n == 0 || !errors.Is(err, os.ErrDeadlineExceeded) || !c.extend() {
			return done, err
		}
	}
}

// extend renews the write deadline after a write that made progress; it
// holds mu so that a deadline set meanwhile (one that cuts) wins.
func (c *limitedConn) extend() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.span > 0 && c.Conn.SetWriteDeadline(time.Now().Add(c.span)) == nil
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.closed(c) })
	return err
}

// CloseWrite lets the server half-close a connection before closing it
// (so a client still sending gets the answer rather than a reset).
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// Accept returns the next connection there is room for.
func (l *connLimiter) Accept() (net.Conn, error) {
	l.wakeOnce.Do(func() { l.deadline, _ = l.Listener.(interface{ SetDeadline(time.Time) error }) })
	for {
		if l.deadline != nil {
			// Cleared before ready is looked at: a probe handed over after
			// the look sets it again, and the Accept below returns.
			_ = l.deadline.SetDeadline(time.Time{})
			l.mu.Lock()
			if len(l.ready) > 0 {
				lc := l.ready[0]
				l.ready = l.ready[1:]
				l.mu.Unlock()
				return lc, nil
			}
			l.mu.Unlock()
		}
		c, err := l.Listener.Accept()
		if err != nil {
			if l.deadline != nil && errors.Is(err, os.ErrDeadlineExceeded) {
				continue // woken: a probe is ready
			}
			return nil, err
		}
		if lc := l.admit(c); lc != nil {
			return lc, nil
		}
	}
}

func (l *connLimiter) admit(c net.Conn) net.Conn {
	now := l.now()
	l.mu.Lock()
	var victim *limitedConn
	silent := false
	if l.open >= l.max {
		// The one idle longest goes: a keep-alive connection between
		// requests, or one that has sent nothing for silentAfter.
		var since time.Time
		older := func(c *limitedConn, t time.Time) bool {
			return victim == nil || t.Before(since) || (t.Equal(since) && c.seq < victim.seq)
		}
		for ic, t := range l.idle {
			if older(ic, t) {
				victim, since = ic, t
			}
		}
		for sc, t := range l.silent {
			if now.Sub(t) >= silentAfter && !sc.heard.Load() && older(sc, t) {
				victim, since, silent = sc, t, true
			}
		}
		if victim == nil {
			if l.probes < ProbeConnections {
				return l.admitProbe(c, nil, nil)
			}
			if l.deadline != nil {
				// Every probe slot is taken: c takes one only if it is a
				// probe. What it has sent already tells at once (under a
				// flood, a probe's request line has arrived by the time it
				// is accepted); else peek reads it without holding up
				// Accept.
				var head [16]byte
				n, ok := peekNow(c, head[:])
				switch v := probeVerdict(head[:n]); {
				case ok && n > 0 && v == probeYes:
					if pv := l.slotVictim(); pv != nil {
						return l.admitProbe(c, pv, nil) // its bytes are still to be read
					}
					l.mu.Unlock()
					l.refuse(c)
				case ok && n > 0 && v == probeNo:
					l.mu.Unlock()
					l.refuse(c)
				default:
					l.peek(c)
				}
				return nil
			}
			if pv := l.slotVictim(); pv != nil {
				return l.admitProbe(c, pv, nil)
			}
			l.mu.Unlock()
			l.refuse(c)
			return nil
		}
		l.forget(victim)
	}
	l.mu.Unlock()
	if victim != nil {
		// Idle keep-alive connections may be closed at any time; clients
		// reconnect. A silent one has asked for nothing. Closing it counts
		// it out before the new one counts in.
		if silent {
			l.m.connSilent.Inc()
		} else {
			l.m.connIdle.Inc()
		}
		_ = victim.Close()
	}
	lc := &limitedConn{Conn: c, l: l}
	l.mu.Lock()
	l.seq++
	lc.seq = l.seq
	l.open++
	l.silent[lc] = now
	l.mu.Unlock()
	l.m.connOpen.Inc()
	return lc
}

// refuse answers c, which there is no room for, a 503 and closes it,
// apart from the accept loop (a client that reads nothing holds up no
// other); with refusalAnswers being answered already it is closed at once.
func (l *connLimiter) refuse(c net.Conn) {
	// Counted before the close: a client that sees the close and then
	// reads the metric must find it counted.
	l.m.connRefuse.Inc()
	select {
	case l.refusing <- struct{}{}:
		go l.answerRefused(c)
	default:
		_ = c.Close()
	}
}

// answerRefused is refuse's goroutine for c.
func (l *connLimiter) answerRefused(c net.Conn) {
	defer func() { <-l.refusing }()
	// A connection refused while peek's goroutine reads it (one read
	// longest, for a newer one) has that read end now, not at its
	// deadline: the drain in answerRefusal waits for it.
	_ = c.SetReadDeadline(time.Now())
	answerRefusal(c, l.refusal)
}

// answerRefusal writes refusal (a refusalAnswer) to c and closes it, both
// listeners' way of turning a connection away. The servers serve plain
// HTTP/1 (a proxy in front ends TLS); a client speaking anything else
// reads bytes it does not understand, then the close, as before.
func answerRefusal(c net.Conn, refusal []byte) {
	defer c.Close()
	_ = c.SetWriteDeadline(time.Now().Add(refusalWrite))
	if _, err := c.Write(refusal); err != nil {
		return
	}
	cw, ok := c.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		return
	}
	// Nothing sent yet (a silent socket, a flood): closing resets
	// nothing, and holds no token.
	if n, ok := peekNow(c, make([]byte, 1)); ok && n == 0 {
		return
	}
	_ = c.SetReadDeadline(time.Now().Add(refusalDrain))
	_, _ = io.CopyN(io.Discard, c, refusalDrainBytes)
}

// slotVictim is the probe slot's connection to close for a probe: the
// oldest whose request has not been read and whose first bytes are not a
// probe's request line, else the oldest whose request has not been read
// (a client that sent a probe's line and stalls); nil when every slot is
// answering. l.mu is held.
func (l *connLimiter) slotVictim() *limitedConn {
	var pv *limitedConn
	for pc := range l.unread {
		if pv == nil {
			pv = pc
			continue
		}
		if a, b := pc.line.Load(), pv.line.Load(); a != b && !a || a == b && pc.seq < pv.seq {
			pv = pc
		}
	}
	return pv
}

// peek reads c's first bytes, apart from the accept loop, for at most
// probePeek: a probe's request line admits it on a probe slot, in the
// place of slotVictim's, and hands it to Accept; anything else, or none,
// is refused. At most probePeeks are read at once: past that the one read
// longest is refused for c. l.mu is held, and peek releases it.
func (l *connLimiter) peek(c net.Conn) {
	var out *peekConn
	if len(l.peeking) >= probePeeks {
		out, l.peeking = l.peeking[0], l.peeking[1:]
		out.refused = true
	}
	pc := &peekConn{Conn: c}
	l.peeking = append(l.peeking, pc)
	l.mu.Unlock()
	if out != nil {
		l.refuse(out.Conn) // its read ends, and its goroutine with it
	}
	go l.judge(pc)
}

// judge is peek's goroutine for pc.
func (l *connLimiter) judge(pc *peekConn) {
	_ = pc.SetReadDeadline(time.Now().Add(probePeek))
	var buf [16]byte
	n, verdict := 0, probeMaybe
	for verdict == probeMaybe && n < len(buf) {
		m, err := pc.Read(buf[n:])
		n += m
		verdict = probeVerdict(buf[:n])
		if err != nil {
			break
		}
	}
	l.mu.Lock()
	if pc.refused {
		l.mu.Unlock()
		return // refused (and counted) for a newer one, or closed with the listener
	}
	if l.shut {
		l.mu.Unlock()
		_ = pc.Close()
		return
	}
	l.peeking = slices.DeleteFunc(l.peeking, func(p *peekConn) bool { return p == pc })
	var victim *limitedConn
	if l.probes >= ProbeConnections {
		victim = l.slotVictim()
	}
	if verdict != probeYes || (l.probes >= ProbeConnections && victim == nil) {
		l.mu.Unlock()
		l.refuse(pc.Conn)
		return
	}
	_ = pc.SetReadDeadline(time.Time{})
	lc := l.admitProbe(pc.Conn, victim, buf[:n])
	l.mu.Lock()
	if l.shut {
		// Closed since admitProbe let go of l.mu: Close has already
		// closed what ready held, and no Accept will take lc.
		l.mu.Unlock()
		_ = lc.Close()
		return
	}
	l.ready = append(l.ready, lc)
	l.mu.Unlock()
	_ = l.deadline.SetDeadline(time.Now()) // wakes Accept
}

// admitProbe admits c on a probe slot, after closing victim when it is
// not nil (a probe slot's connection whose request has not been read);
// l.mu is held, and admitProbe releases it. pre is what was read of c to
// admit it (a probe's request line), read again first. c's deadlines end
// probeConnLife from now, so that it goes by then whatever it sends, and
// it is neither silent nor idle (it makes no room under the cap: closing
// it would free a probe slot, not a place there).
func (l *connLimiter) admitProbe(c net.Conn, victim *limitedConn, pre []byte) *limitedConn {
	// Socket deadlines are in real time, not the server's clock.
	lc := &limitedConn{Conn: c, l: l, probe: true, until: time.Now().Add(probeConnLife), pre: pre}
	if len(pre) > 0 {
		lc.nhead = copy(lc.head[:], pre)
		lc.decided = true
		lc.line.Store(true)
		lc.heard.Store(true)
	}
	if victim != nil {
		delete(l.unread, victim) // not chosen again while it closes
	}
	// The slot is counted before the victim gives its own back, so that
	// an admit meanwhile (Accept's, or another peek's) finds none free.
	l.seq++
	lc.seq = l.seq
	l.probes++
	l.unread[lc] = struct{}{}
	l.mu.Unlock()
	if victim != nil {
		l.m.connProbeClosed.Inc()
		_ = victim.Close()
	}
	_ = lc.SetDeadline(time.Time{})
	l.m.connProbe.Inc()
	l.m.connOpen.Inc()
	return lc
}

// Close closes the listener, and the connections peek holds: those being
// read and those admitted that Accept has not returned.
func (l *connLimiter) Close() error {
	err := l.Listener.Close()
	l.mu.Lock()
	l.shut = true
	peeking, ready := l.peeking, l.ready
	l.peeking, l.ready = nil, nil
	for _, pc := range peeking {
		pc.refused = true
	}
	l.mu.Unlock()
	for _, pc := range peeking {
		_ = pc.Close()
	}
	for _, lc := range ready {
		_ = lc.Close()
	}
	return err
}

// probeServing marks c's request as read: from now on it is answered
// (and closed then), not closed for room.
func (l *connLimiter) probeServing(c *limitedConn) {
	l.mu.Lock()
	delete(l.unread, c)
	l.mu.Unlock()
}

func (l *connLimiter) closed(c *limitedConn) {
	l.mu.Lock()
	if c.probe {
		delete(l.unread, c)
		l.probes--
	} else {
		l.open--
		l.forget(c)
	}
	l.mu.Unlock()
	l.m.connOpen.Dec()
}

// track is the server's ConnState hook: it keeps the set of idle
// keep-alive connections, the first to go at the cap.
func (l *connLimiter) track(c net.Conn, st http.ConnState) {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	lc, ok := c.(*limitedConn)
	if !ok || lc.probe {
		return
	}
	if st == http.StateNew {
		return // counted as silent since admit
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	// Past its first request (or gone): no longer a silent newcomer.
	delete(l.silent, lc)
	if st != http.StateIdle {
		l.unidle(lc)
		return
	}
	if _, ok := l.idle[lc]; !ok {
		l.idle[lc] = now
		l.m.connIdleN.Inc()
	}
}

// forget takes c out of the sets of connections that may make room; l.mu
// is held.
func (l *connLimiter) forget(c *limitedConn) {
	delete(l.silent, c)
	l.unidle(c)
}

// unidle takes c out of the idle set; l.mu is held.
func (l *connLimiter) unidle(c *limitedConn) {
	if _, ok := l.idle[c]; ok {
		delete(l.idle, c)
		l.m.connIdleN.Dec()
	}
}

// probeOnly answers on a probe slot's connection (see ProbeConnections)
// only the probes: any other request gets 503 with Retry-After, as the
// cap would have refused it, and every answer there closes the
// connection, so the slot is free for the next probe.
func (s *Server) probeOnly(next http.Handler) http.Handler {
	anyOrigin := slices.Contains(s.o.CORSOrigins, "*")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lc, _ := r.Context().Value(probeConnKey).(*limitedConn)
		if lc == nil {
			next.ServeHTTP(w, r)
			return
		}
		lc.l.probeServing(lc)
		w.Header().Set("Connection", "close")
		if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" {
			next.ServeHTTP(w, r)
			return
		}
		p := problem.New(problem.Overloaded, "the server is at its connection cap (--max-connections); this connection answers only /healthz and /readyz; retry shortly")
		p.RetryAfter = 1
		// With the CORS headers every answer has (cors runs after this):
		// a viewer on another origin reads the 503 and its Retry-After
		// rather than a CORS failure it cannot tell from a server gone.
		s.allowOrigin(w, r, anyOrigin)
		writeProblem(w, r, p)
	})
}
