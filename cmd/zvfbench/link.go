package main

import (
	"fmt"
	"net/http"
	"sync"
	"time"
)

// link emulates the network between the clients and one server, which
// loopback leaves out: every request waits one round trip (RTT) before
// its answer starts, and the answers of all the server's connections
// share the bandwidth. A new connection's own handshake is not charged.
type link struct {
	RTT  time.Duration
	Mbps float64 // 0: unlimited

	mu   sync.Mutex
	next time.Time // when the link is free to send again
}

func (l *link) wrap(h http.Handler) http.Handler {
	if l == nil || (l.RTT <= 0 && l.Mbps <= 0) {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(l.RTT)
		h.ServeHTTP(&linkWriter{ResponseWriter: w, l: l}, r)
	})
}

// pace holds a write of n bytes until the link has carried it.
func (l *link) pace(n int) {
	if l.Mbps <= 0 {
		return
	}
	l.mu.Lock()
	start := time.Now()
	if l.next.After(start) {
		start = l.next
	}
	l.next = start.Add(time.Duration(float64(n) * 8 / (l.Mbps * 1e6) * float64(time.Second)))
	done := l.next
	l.mu.Unlock()
	time.Sleep(time.Until(done))
}

func (l *link) String() string {
	if l == nil || (l.RTT <= 0 && l.Mbps <= 0) {
		return "loopback"
	}
	bw := "unlimited bandwidth"
	if l.Mbps > 0 {
		bw = fmt.Sprintf("%g Mbit/s shared", l.Mbps)
	}
	return fmt.Sprintf("an emulated link: %v round trip per request, %s", l.RTT, bw)
}

// linkWriter paces an answer's writes through its link.
type linkWriter struct {
	http.ResponseWriter
	l *link
}

func (w *linkWriter) Write(p []byte) (int, error) {
	w.l.pace(len(p))
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *linkWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *linkWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
