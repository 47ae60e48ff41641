package api

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"os"
	"slices"
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
// /healthz and /readyz (see probeOnly) and live at most probeConnLife —
// closing for room, when they are all taken, the oldest one whose request
// has not been read yet —, and when every one is answering the new one is
// closed at once. Keep-alive connections idle for IdleTimeout are closed. Requests need their headers within 10 s; answers are bounded by
// the request clock and the writer's stall deadline (see Options), not by
// a whole-response timeout.
func (s *Server) HTTPServer(ln net.Listener) (*http.Server, net.Listener) {
	lim := &connLimiter{Listener: ln, max: s.o.MaxConnections, m: s.m, now: s.o.Now,
		idle: map[*limitedConn]time.Time{}, silent: map[*limitedConn]time.Time{}, unread: map[*limitedConn]struct{}{}}
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

// connLimiter caps the open connections of a listener (see HTTPServer).
type connLimiter struct {
	net.Listener
	max int
	m   *Metrics
	now func() time.Time // the server's clock

	// progress is the context of its connections (see progressCtx).
	progress atomic.Pointer[connCtx]

	mu     sync.Mutex
	open   int
	probes int                        // connections on the probe slots
	unread map[*limitedConn]struct{}  // those on probe slots whose request has not been read yet
	seq    uint64                     // connections admitted
	idle   map[*limitedConn]time.Time // keep-alive connections between requests, since when
	silent map[*limitedConn]time.Time // connections not yet past their first request, accepted when
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
	n, err := c.Conn.Read(p)
	if n > 0 && !c.heard.Load() {
		c.heard.Store(true)
	}
	return n, err
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
	for {
		c, err := l.Listener.Accept()
		if err != nil {
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
				return l.admitProbe(c, nil)
			}
			// Every probe slot is taken: the oldest connection there whose
			// request has not been read yet goes.
			var pv *limitedConn
			for pc := range l.unread {
				if pv == nil || pc.seq < pv.seq {
					pv = pc
				}
			}
			if pv != nil {
				return l.admitProbe(c, pv)
			}
			l.mu.Unlock()
			// Counted before the close: a client that sees the close and
			// then reads the metric must find it counted.
			l.m.connRefuse.Inc()
			_ = c.Close()
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

// admitProbe admits c on a probe slot, after closing victim when it is
// not nil (a probe slot's connection whose request has not been read);
// l.mu is held, and admitProbe releases it. c's deadlines end
// probeConnLife from now, so that it goes by then whatever it sends, and
// it is neither silent nor idle (it makes no room under the cap: closing
// it would free a probe slot, not a place there).
func (l *connLimiter) admitProbe(c net.Conn, victim *limitedConn) net.Conn {
	if victim != nil {
		delete(l.unread, victim) // not chosen again while it closes
	}
	l.mu.Unlock()
	if victim != nil {
		l.m.connProbeClosed.Inc()
		_ = victim.Close() // gives its slot back (admits are one at a time)
	}
	// Socket deadlines are in real time, not the server's clock.
	lc := &limitedConn{Conn: c, l: l, probe: true, until: time.Now().Add(probeConnLife)}
	_ = lc.SetDeadline(time.Time{})
	l.mu.Lock()
	l.seq++
	lc.seq = l.seq
	l.probes++
	l.unread[lc] = struct{}{}
	l.mu.Unlock()
	l.m.connProbe.Inc()
	l.m.connOpen.Inc()
	return lc
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
