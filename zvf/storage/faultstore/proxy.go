package faultstore

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
)

// Proxy is an HTTP reverse proxy for tests that injects faults into the
// exchanges between a client and the server behind it (MinIO, or any
// S3-compatible server): it delays, stalls, resets and truncates
// responses, by rule, so a test can show what a network blip or a hung
// backend does to the layers above. Requests are forwarded with their Host
// header, so signed (SigV4) requests still verify.
type Proxy struct {
	// URL is where clients connect (http://127.0.0.1:port).
	URL string

	target *url.URL
	srv    *httptest.Server
	tr     *http.Transport
	stop   chan struct{} // closed by Close: stalled exchanges end

	rules rules[HTTPRule]

	Requests atomic.Int64 // requests received
	Faults   atomic.Int64 // requests a rule changed
	InFlight atomic.Int64 // requests not yet answered or given up
}

// HTTPRule applies an HTTPFault to the requests it matches: Method (""
// any), Path and Query as substrings of the request's path (bucket and
// key, path-style) and raw query ("list-type" picks listings, "" any).
// Nth applies it to the Nth matching request only (1-based; 0: every
// one); Times stops it after that many (0: never).
type HTTPRule struct {
	Method, Path, Query string
	Nth, Times          int
	Fault               HTTPFault

	count counter
}

// HTTPFault is what a rule does to one exchange. Delay comes first; then
// at most one of the others.
type HTTPFault struct {
	Delay time.Duration // wait this long before forwarding
	Stall bool          // never answer: hold the request until the client gives up
	Reset bool          // close the connection without answering (TCP RST)
	// Status answers with this status and an S3-style error body instead
	// of forwarding (503 is S3's "SlowDown").
	Status int
	// Truncate sends the response's headers, with its full length, and
	// only After bytes of its body, then cuts the connection.
	Truncate bool
	// StallBody sends the headers and After bytes of the body, then
	// stops sending until the client gives up.
	StallBody bool
	After     int64
}

// NewProxy starts a proxy in front of target (a base URL such as
// http://127.0.0.1:9000) on a free loopback port. Close stops it.
func NewProxy(target string) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("proxy target %q: want a base URL such as http://127.0.0.1:9000", target)
	}
	// A transport of its own: no environment proxy, connections to the
	// target that are the proxy's alone.
	p := &Proxy{target: u, stop: make(chan struct{}), tr: &http.Transport{MaxIdleConnsPerHost: 64}}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	p.URL = p.srv.URL
	return p, nil
}

// Add installs a rule; rules are tried in order and the first that
// matches applies.
func (p *Proxy) Add(r *HTTPRule) { p.rules.add(r) }

// Reset removes every rule.
func (p *Proxy) Reset() { p.rules.reset() }

// Close ends stalled exchanges and stops the proxy.
func (p *Proxy) Close() {
	close(p.stop)
	p.srv.Close()
	p.tr.CloseIdleConnections()
}

func (p *Proxy) match(r *http.Request) *HTTPFault {
	rule := p.rules.first(func(rule *HTTPRule) bool {
		return (rule.Method == "" || rule.Method == r.Method) && strings.Contains(r.URL.Path, rule.Path) &&
			strings.Contains(r.URL.RawQuery, rule.Query) && rule.count.fires(rule.Nth, rule.Times)
	})
	if rule == nil {
		return nil
	}
	f := rule.Fault
	return &f
}

// wait blocks for d, or until the client gives up or the proxy closes;
// it reports whether d passed.
func (p *Proxy) wait(ctx context.Context, d time.Duration) bool {
	var after <-chan time.Time
	if d >= 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		after = t.C
	}
	select {
	case <-after:
		return true
	case <-ctx.Done():
	case <-p.stop:
	}
	return false
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	p.Requests.Add(1)
	p.InFlight.Add(1)
	defer p.InFlight.Add(-1)
	f := p.match(r)
	if f != nil {
		p.Faults.Add(1)
		if f.Delay > 0 && !p.wait(r.Context(), f.Delay) {
			return
		}
		switch {
		case f.Stall:
			p.wait(r.Context(), -1)
			return
		case f.Reset:
			reset(w)
			return
		case f.Status != 0:
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(f.Status)
			fmt.Fprintf(w, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>%s</Code><Message>injected by the test proxy</Message></Error>", s3Code(f.Status))
			return
		}
	}
	u := *p.target
	u.Path, u.RawPath, u.RawQuery = r.URL.Path, r.URL.RawPath, r.URL.RawQuery
	out, err := http.NewRequestWithContext(r.Context(), r.Method, u.String(), r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header = r.Header.Clone()
	out.Host = r.Host
	out.ContentLength = r.ContentLength
	resp, err := p.tr.RoundTrip(out)
	if err != nil {
		reset(w)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	if f == nil || (!f.Truncate && !f.StallBody) {
		_, _ = io.Copy(w, resp.Body)
		return
	}
	_, _ = io.CopyN(w, resp.Body, f.After)
	_ = http.NewResponseController(w).Flush()
	if f.StallBody {
		p.wait(r.Context(), -1)
		return
	}
	// Headers and part of the body are out: abort the connection, as a
	// load balancer's reset or a proxy's timeout does.
	panic(http.ErrAbortHandler)
}

// reset closes the client's connection at once, with a TCP RST.
func reset(w http.ResponseWriter) {
	c, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

func s3Code(status int) string {
	switch status {
	case http.StatusServiceUnavailable:
		return "SlowDown"
	case http.StatusInternalServerError:
		return "InternalError"
	case http.StatusForbidden:
		return "AccessDenied"
	}
	return "InjectedError"
}
