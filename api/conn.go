package api

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// HTTPServer returns an http.Server for the API, and ln wrapped so that at
// most MaxConnections are open: at the cap the connection idle longest —
// a keep-alive connection between requests, or one that has sent nothing
// for silentAfter — is closed to make room, and when there is none the new
// one is closed at once. Keep-alive connections idle for IdleTimeout are
// closed. Requests need their headers within 10 s; answers are bounded by
// the request clock and the writer's stall deadline (see Options), not by
// a whole-response timeout.
func (s *Server) HTTPServer(ln net.Listener) (*http.Server, net.Listener) {
	lim := &connLimiter{Listener: ln, max: s.o.MaxConnections, m: s.m, now: s.o.Now,
		idle: map[*limitedConn]time.Time{}, silent: map[*limitedConn]time.Time{}}
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
			if _, ok := c.(*limitedConn); ok {
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

	mu   sync.Mutex
	span time.Duration // of the write deadline last set; <= 0: none, or one that cuts now
}

func (c *limitedConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.span = 0
	if !t.IsZero() {
		c.span = time.Until(t)
	}
	return c.Conn.SetWriteDeadline(t)
}

func (c *limitedConn) SetDeadline(t time.Time) error {
	if err := c.SetWriteDeadline(t); err != nil {
		return err
	}
	return c.Conn.SetReadDeadline(t)
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

func (l *connLimiter) closed(c *limitedConn) {
	l.mu.Lock()
	l.open--
	l.forget(c)
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
	if !ok {
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
