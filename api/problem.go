package api

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/zvfserve/zvfserve/zvf"
)

// Problem is an RFC 9457 problem detail. Type is a stable URI per kind of
// error; Detail never carries paths, stack traces or backend messages.
type Problem struct {
	Type       string `json:"type"`
	Title      string `json:"title"`
	Status     int    `json:"status"`
	Detail     string `json:"detail,omitempty"`
	Instance   string `json:"instance,omitempty"`
	RetryAfter int    `json:"-"`
}

func (p *Problem) Error() string { return p.Title + ": " + p.Detail }

const typeBase = "https://zvfserve.dev/problems/"

// Problem kinds.
func badRequest(detail string) *Problem {
	return &Problem{Type: typeBase + "bad-parameter", Title: "Bad parameter", Status: http.StatusBadRequest, Detail: detail}
}

func notFound(detail string) *Problem {
	return &Problem{Type: typeBase + "not-found", Title: "Not found", Status: http.StatusNotFound, Detail: detail}
}

func tooLarge(detail string) *Problem {
	return &Problem{Type: typeBase + "too-large", Title: "Request too large", Status: http.StatusRequestEntityTooLarge, Detail: detail}
}

func staleCursor() *Problem {
	return &Problem{Type: typeBase + "stale-cursor", Title: "Cursor from another store version", Status: http.StatusConflict,
		Detail: "the store changed since this cursor was issued; request the first page again"}
}

func changing(retry time.Duration) *Problem {
	secs := int((retry + time.Second - 1) / time.Second)
	return &Problem{Type: typeBase + "store-changing", Title: "Store is being changed", Status: http.StatusServiceUnavailable,
		Detail: "the store's objects are being replaced; its new version is served once they have settled", RetryAfter: max(secs, 1)}
}

func overloaded() *Problem {
	return &Problem{Type: typeBase + "overloaded", Title: "Server busy", Status: http.StatusServiceUnavailable,
		Detail: "too many requests in flight; retry shortly", RetryAfter: 1}
}

// classify maps any error to a problem: a *Problem is itself; the
// reader's kinds (zvf.ErrNotFound, …) and the request's context each map to
// one status; anything else is a 500. Only zvf knows storage errors. The
// full error is logged by the caller.
func classify(err error) *Problem {
	var p *Problem
	if errors.As(err, &p) {
		return p
	}
	detail := ""
	var ze *zvf.Error
	if errors.As(err, &ze) {
		detail = ze.Detail() // store, level, array, chunk: no local paths
	}
	var ce *zvf.ChangingError
	switch {
	case errors.As(err, &ce):
		return changing(ce.RetryAfter)
	case errors.Is(err, zvf.ErrChanged):
		return changing(time.Second)
	case errors.Is(err, context.DeadlineExceeded):
		return &Problem{Type: typeBase + "timeout", Title: "Request timed out", Status: http.StatusGatewayTimeout,
			Detail: "the request took longer than the server's time limit"}
	case errors.Is(err, context.Canceled):
		return &Problem{Type: typeBase + "cancelled", Title: "Request cancelled", Status: 499}
	case errors.Is(err, zvf.ErrBadQuery):
		return badRequest(detail)
	case errors.Is(err, zvf.ErrNotFound):
		return notFound(detail)
	case errors.Is(err, zvf.ErrUnavailable):
		return &Problem{Type: typeBase + "backend-unavailable", Title: "Storage unavailable", Status: http.StatusBadGateway,
			Detail: "the storage backend could not be reached; retry later", RetryAfter: 5}
	case errors.Is(err, zvf.ErrCorrupt):
		return &Problem{Type: typeBase + "corrupt-data", Title: "Corrupt store data", Status: http.StatusUnprocessableEntity, Detail: detail}
	case errors.Is(err, zvf.ErrUnsupported):
		return &Problem{Type: typeBase + "unsupported", Title: "Unsupported store feature", Status: http.StatusUnprocessableEntity, Detail: detail}
	}
	return &Problem{Type: typeBase + "internal", Title: "Internal error", Status: http.StatusInternalServerError,
		Detail: "the server could not complete the request"}
}

func writeProblem(w http.ResponseWriter, r *http.Request, p *Problem) {
	h := w.Header()
	for _, k := range []string{"ETag", "Cache-Control", "Content-Encoding", "Content-Length", "Last-Modified"} {
		h.Del(k)
	}
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	if p.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(p.RetryAfter))
	}
	cp := *p
	cp.Instance = r.URL.Path
	status := p.Status
	if status == 499 { // the client is gone; nothing useful to send
		status = http.StatusRequestTimeout
		cp.Status = status
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(&cp)
}

// handler is an HTTP handler that returns its error; serveErr turns it into
// a problem response (if nothing was sent yet) and logs it.
type handler func(w http.ResponseWriter, r *http.Request) error

// attempt is what wrap keeps of a request for its handler: the query,
// parsed once, and which store version the handler answered from, so that
// wrap can retry it on the next version.
type attempt struct {
	q  url.Values
	h  *zvf.Handle
	st *zvf.Store
}

// query is the request's parsed query string (parsed once per request).
func query(r *http.Request) url.Values {
	if a, ok := r.Context().Value(attemptKey).(*attempt); ok {
		return a.q
	}
	return r.URL.Query()
}

// answerHeaders are the headers a handler sets; a retried answer starts
// without them (the request id and CORS headers set before stay).
var answerHeaders = [...]string{"Content-Type", "Content-Encoding", "Content-Length", "ETag", "Cache-Control", "Vary",
	"Link", "X-Next-Cursor", "X-Vertex-Count", "X-Number-Matched", "Trailer", "Server-Timing"}

const attemptKey ctxKey = 2

// maxAttempts bounds the retries of an answer whose store changed under it.
const maxAttempts = 3

func (s *Server) wrap(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		a := &attempt{q: r.URL.Query()}
		if err := checkParams(s.params, r, a.q); err != nil {
			writeProblem(w, r, classify(err))
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), attemptKey, a))
		var err error
		for i := 1; ; i++ {
			err = h(w, r)
			if err == nil {
				return
			}
			if !errors.Is(err, zvf.ErrChanged) || a.h == nil || committed(w) {
				break
			}
			// The store was replaced while this answer was read: it is
			// computed again, whole, from the version now current (or
			// refused with Retry-After while the store settles).
			s.log.Info("store changed during a request; answering from its new version", "path", r.URL.Path, "attempt", i,
				"request_id", requestID(r.Context()))
			if _, cerr := a.h.Changed(r.Context(), a.st, err); cerr != nil || i == maxAttempts {
				if cerr != nil {
					err = cerr
				}
				break
			}
			for _, k := range answerHeaders {
				w.Header().Del(k)
			}
		}
		p := classify(err)
		level := slog.LevelWarn
		if p.Status >= 500 {
			level = slog.LevelError
		}
		s.log.Log(r.Context(), level, "request failed", "path", r.URL.Path, "status", p.Status, "err", err, "request_id", requestID(r.Context()))
		if committed(w) {
			// Headers and part of the body are out: the only honest signal
			// left is to cut the connection.
			panic(http.ErrAbortHandler)
		}
		writeProblem(w, r, p)
	}
}

func committed(w http.ResponseWriter) bool {
	sw, ok := w.(interface{ committed() bool })
	return ok && sw.committed()
}
