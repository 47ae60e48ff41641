package api

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// HTTPServer returns an http.Server for the API, and ln wrapped so that at
// most MaxConnections are open: at the cap the connection idle longest is
// closed to make room, and when none is idle the new one is closed at
// once. Keep-alive connections idle for IdleTimeout are closed. Requests
// need their headers within 10 s; answers are bounded by the request
// clock and the writer's stall deadline (see Options), not by a whole-
// response timeout.
func (s *Server) HTTPServer(ln net.Listener) (*http.Server, net.Listener) {
	lim := &connLimiter{Listener: ln, max: s.o.MaxConnections, m: s.m, idle: map[*limitedConn]time.Time{}}
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
				ctx = context.WithValue(ctx, progressConnKey, true)
			}
			return ctx
		},
	}
	return hs, lim
}

// connLimiter caps the open connections of a listener (see HTTPServer).
type connLimiter struct {
	net.Listener
	max int
	m   *Metrics

	mu   sync.Mutex
	open int
	idle map[*limitedConn]time.Time // since when
}

// limitedConn is a connection of a connLimiter. Its write deadlines are
// progress deadlines: a write that times out having moved some bytes is
// given the same time again, so only a peer that takes nothing for a whole
// deadline's span is cut — however large the write, and without cutting
// writes into small pieces (each a system call and, on HTTP/1.1, a chunk).
type limitedConn struct {
	net.Conn
	l    *connLimiter
	once sync.Once

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
	l.mu.Lock()
	var victim *limitedConn
	if l.open >= l.max {
		var since time.Time
		for ic, t := range l.idle {
			if victim == nil || t.Before(since) {
				victim, since = ic, t
			}
		}
		if victim == nil {
			l.mu.Unlock()
			_ = c.Close()
			l.m.connRefuse.Inc()
			return nil
		}
		l.unidle(victim)
	}
	l.mu.Unlock()
	if victim != nil {
		// Idle keep-alive connections may be closed at any time; clients
		// reconnect. Closing it counts it out before the new one counts in.
		_ = victim.Close()
		l.m.connIdle.Inc()
	}
	l.mu.Lock()
	l.open++
	l.mu.Unlock()
	l.m.connOpen.Inc()
	return &limitedConn{Conn: c, l: l}
}

func (l *connLimiter) closed(c *limitedConn) {
	l.mu.Lock()
	l.open--
	l.unidle(c)
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
	l.mu.Lock()
	defer l.mu.Unlock()
	if st != http.StateIdle {
		l.unidle(lc)
		return
	}
	if _, ok := l.idle[lc]; !ok {
		l.idle[lc] = time.Now()
		l.m.connIdleN.Inc()
	}
}

// unidle takes c out of the idle set; l.mu is held.
func (l *connLimiter) unidle(c *limitedConn) {
	if _, ok := l.idle[c]; ok {
		delete(l.idle, c)
		l.m.connIdleN.Dec()
	}
}
