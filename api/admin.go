package api

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zvfserve/zvfserve/api/problem"
)

// AdminHandler serves /metrics and /debug/pprof for the admin listener,
// and /healthz and /readyz as the API does: probes pointed there are
// answered on the admin listener's own connections, even while the API's
// listener is at --max-connections with none to close for room (a flood
// of slow clients), which would refuse them there.
func (s *Server) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", healthz) // GET patterns take HEAD too
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.Handle("/metrics", s.m.handler())
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", s.cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return adminPreconditions(mux)
}

// adminPreconditions evaluates If-Match and If-None-Match on the admin
// listener as statusWriter does on the API's (RFC 9110 13.1.1, 13.2.1):
// judged against the ETag a 2xx carries, and one without an ETag (all of
// this listener's) matches only If-Match: *; anything else (a 404, a
// pprof 400) goes out as it is.
func adminPreconditions(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		im := r.Header.Values("If-Match")
		inm := r.Header.Get("If-None-Match")
		if len(im) == 0 && inm == "" {
			h.ServeHTTP(w, r)
			return
		}
		if profiles(r) {
			// Its 2xx could only become this 412, or with If-None-Match: *
			// a 304: said before the profile runs for its seconds, not
			// after.
			switch {
			case len(im) > 0 && !listsStar(im):
				problem.Write(w, r, problem.New(problem.PreconditionFailed, noETagDetail))
				return
			case (r.Method == http.MethodGet || r.Method == http.MethodHead) && matchesAny(inm):
				w.WriteHeader(http.StatusNotModified)
				return
			}
		}
		h.ServeHTTP(&adminJudge{ResponseWriter: w, r: r, ifMatch: im, ifNoneMatch: inm}, r)
	})
}

// noETagDetail is the 412's detail for an answer without an ETag.
const noETagDetail = "If-Match names no current ETag of this answer: it has no ETag, so only If-Match: * matches it"

// deltaProfiles are the profiles pprof answers with a delta over
// ?seconds= (net/http/pprof's profileSupportsDelta).
var deltaProfiles = [...]string{"allocs", "block", "goroutine", "heap", "mutex", "threadcreate"}

// profiles reports whether r asks pprof for something that takes the
// seconds it names before its answer starts — a CPU profile, a trace, a
// delta profile — and that pprof does not refuse as malformed (those
// refusals, found at once, go out as they are).
func profiles(r *http.Request) bool {
	name, ok := strings.CutPrefix(r.URL.Path, "/debug/pprof/")
	switch {
	case !ok:
		return false
	case name == "profile" || name == "trace":
		return true // a malformed seconds is their default duration
	case r.FormValue("seconds") == "" || !slices.Contains(deltaProfiles[:], name):
		return false
	}
	sec, err := strconv.ParseInt(r.FormValue("seconds"), 10, 64)
	debug, _ := strconv.Atoi(r.FormValue("debug"))
	return err == nil && sec > 0 && debug == 0
}

// adminJudge is the ResponseWriter adminPreconditions hands a request
// with preconditions: its answer's status is judged as it starts.
type adminJudge struct {
	http.ResponseWriter
	r           *http.Request
	ifMatch     []string
	ifNoneMatch string
	started     bool
	discard     bool // the answer became a 304 or a 412: its body is dropped
}

func (j *adminJudge) WriteHeader(code int) {
	if j.started {
		return
	}
	j.started = true
	h := j.Header()
	etag := h.Get("Etag")
	if code >= 200 && code < 300 {
		switch {
		case len(j.ifMatch) > 0 && (etag != "" && !matchesStrong(j.ifMatch, etag) || etag == "" && !listsStar(j.ifMatch)):
			detail := noETagDetail
			if etag != "" {
				detail = "If-Match names no current ETag of this answer"
			}
			j.discard = true
			problem.Write(j.ResponseWriter, j.r, problem.New(problem.PreconditionFailed, detail))
			return
		case (j.r.Method == http.MethodGet || j.r.Method == http.MethodHead) && (matchesAny(j.ifNoneMatch) || etag != "" && listsWeak(j.ifNoneMatch, etag)):
			j.discard = true
			for _, k := range []string{"Content-Length", "Content-Type"} {
				h.Del(k)
			}
			j.ResponseWriter.WriteHeader(http.StatusNotModified)
			return
		}
	}
	j.ResponseWriter.WriteHeader(code)
}

func (j *adminJudge) Write(p []byte) (int, error) {
	if !j.started {
		j.WriteHeader(http.StatusOK)
	}
	if j.discard {
		return len(p), nil
	}
	return j.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection (pprof's
// profile and trace extend their write deadline).
func (j *adminJudge) Unwrap() http.ResponseWriter { return j.ResponseWriter }

// listsStar reports whether If-Match values list "*".
func listsStar(values []string) bool {
	for _, v := range values {
		if matchesAny(v) {
			return true
		}
	}
	return false
}

// listsWeak reports whether an If-None-Match header lists etag, compared
// weakly (RFC 9110 13.1.2).
func listsWeak(inm, etag string) bool {
	for tag := range strings.SplitSeq(inm, ",") {
		if t := strings.TrimSpace(tag); t == etag || strings.TrimPrefix(t, "W/") == etag {
			return true
		}
	}
	return false
}

// cmdline is pprof's cmdline endpoint with secrets redacted: the token,
// wherever it appears among the arguments, and the query string of any
// URL argument (store URLs may carry credentials there).
func (s *Server) cmdline(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	args := make([]string, len(os.Args))
	for i, a := range os.Args {
		args[i] = redactArg(a, s.o.Token)
	}
	_, _ = io.WriteString(w, strings.Join(args, "\x00"))
}

func redactArg(a, token string) string {
	const redacted = "[redacted]"
	if token != "" {
		a = strings.ReplaceAll(a, token, redacted)
	}
	if i := strings.Index(a, "://"); i >= 0 {
		if j := strings.IndexByte(a[i:], '?'); j >= 0 {
			a = a[:i+j] + "?" + redacted
		}
	}
	return a
}

// AdminMaxConnections caps the admin listener's open connections: it is
// for scrapers, probes and operators, a few at a time; past the cap a new
// connection is answered 503 overloaded with Retry-After, as the API's
// listener answers one at its cap, and closed.
const AdminMaxConnections = 16

// ConnectionsPastCap is how many connections the listeners may hold
// beyond --max-connections — the API's probe slots and the newcomers read
// for a probe's request line, and the admin listener's —: descriptors the
// open-file limit must leave room for beside the cap.
const ConnectionsPastCap = ProbeConnections + probePeeks + AdminMaxConnections

// adminMaxHeaderBytes bounds an admin request's headers: scrapers and
// pprof send few.
const adminMaxHeaderBytes = 16 << 10

// adminWriteTimeout bounds an admin answer, from the end of its request's
// headers: pprof's profile and trace take the seconds asked for, and
// refuse more than this.
const adminWriteTimeout = 5 * time.Minute

// AdminHTTPServer returns an http.Server for AdminHandler, and ln wrapped
// so that at most AdminMaxConnections are open. It is bounded like the
// API's server (HTTPServer): headers within 10 s and 16 KiB, keep-alive
// connections closed after IdleTimeout, and a whole exchange within
// adminWriteTimeout, so that no connection holds one of the few slots
// for ever (the probes answer here too). The caller sets ErrorLog.
func (s *Server) AdminHTTPServer(ln net.Listener) (*http.Server, net.Listener) {
	hs := &http.Server{
		Handler:           s.AdminHandler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       s.o.IdleTimeout,
		MaxHeaderBytes:    adminMaxHeaderBytes,
		WriteTimeout:      adminWriteTimeout,
	}
	return hs, &capListener{Listener: ln, slots: make(chan struct{}, AdminMaxConnections),
		refusing: make(chan struct{}, refusalAnswers),
		refusal:  refusalAnswer(fmt.Sprintf("the admin listener holds its %d connections (its cap); retry shortly", AdminMaxConnections))}
}

// capListener refuses new connections while slots are all taken: each is
// answered refusal (503 with Retry-After and a problem body) apart from
// the accept loop, with refusalAnswers at once; past that it is closed
// without a word. Before, every one was closed without a word, which a
// scraper reports as a reset, not as a server asking it to wait.
type capListener struct {
	net.Listener
	slots    chan struct{}
	refusing chan struct{}
	refusal  []byte
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return &slotConn{Conn: c, free: func() { <-l.slots }}, nil
		default:
			l.refuse(c)
		}
	}
}

// refuse answers c, which there is no slot for, apart from the accept
// loop (a client that reads nothing holds up no other).
func (l *capListener) refuse(c net.Conn) {
	select {
	case l.refusing <- struct{}{}:
		go func() {
			defer func() { <-l.refusing }()
			answerRefusal(c, l.refusal)
		}()
	default:
		_ = c.Close()
	}
}

// slotConn gives its slot back when it is first closed.
type slotConn struct {
	net.Conn
	once sync.Once
	free func()
}

// CloseWrite lets the server half-close the connection before closing it.
func (c *slotConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.free)
	return err
}
