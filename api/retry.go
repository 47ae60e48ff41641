package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/zvfserve/zvfserve/api/problem"
	"github.com/zvfserve/zvfserve/zvf"
)

// handler is an HTTP handler that returns its error; serveErr turns it into
// a problem response (if nothing was sent yet) and logs it.
type handler func(w http.ResponseWriter, r *http.Request) error

// attempt is what wrap keeps of a request for its handler: the query,
// parsed once, and the request's subject, the store version this attempt
// answers from. wrap pins it before the handler runs (a handler cannot
// forget to), so an answer that meets a newer object is retried on the
// next version.
type attempt struct {
	q      queryArgs
	qbuf   [queryRoom]queryArg // q's room
	pinned bool                // the route names a store: h, st and err are its lookup
	h      *zvf.Handle
	st     *zvf.Store
	err    error
}

// pin looks up the route's store for this attempt.
func (a *attempt) pin(s *Server, r *http.Request) {
	name := chi.URLParam(r, "store")
	if name == "" {
		return
	}
	a.pinned = true
	a.h, a.st, a.err = s.lookup(name)
}

// queryRoom is how many settings a request's query has room for in its
// attempt; a longer query allocates.
const queryRoom = 16

// query is the request's parsed query string (parsed once per request).
func query(r *http.Request) queryArgs {
	if a, ok := r.Context().Value(attemptKey).(*attempt); ok {
		return a.q
	}
	q, _ := parseQuery(r.URL.RawQuery, nil)
	return q
}

// answerHeaders are the headers a handler sets; a retried answer starts
// without them (the request id and CORS headers set before stay).
var answerHeaders = [...]string{"Content-Type", "Content-Encoding", "Content-Length", "ETag", "Cache-Control", "Vary",
	"Link", "X-Next-Cursor", "X-Vertex-Count", "X-Number-Matched", "Trailer", "Server-Timing", "Content-Disposition"}

// maxAttempts bounds the retries of an answer whose store changed under it.
const maxAttempts = 3

func (s *Server) wrap(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		// The attempt lives in the request's state when it has one not
		// yet taken (observe made it): found through the context observe
		// set, it needs no context or request copy of its own.
		st := stateOf(r.Context())
		var a *attempt
		if st != nil && !st.wrapped {
			a = &st.att
		} else {
			a = new(attempt)
		}
		var bad string
		a.q, bad = parseQuery(r.URL.RawQuery, a.qbuf[:])
		if bad != "" {
			writeProblem(w, r, classify(badSetting(bad)))
			return
		}
		if err := checkParams(s.params, r, a.q); err != nil {
			writeProblem(w, r, classify(err))
			return
		}
		if st != nil && a == &st.att {
			st.wrapped = true
		} else {
			r = r.WithContext(context.WithValue(r.Context(), attemptKey, a))
		}
		var err error
		for i := 1; ; i++ {
			a.pin(s, r)
			err = h(w, r)
			if err == nil || errors.Is(err, errPreconditionFailed) {
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
				switch {
				case cerr == nil:
				case errors.As(err, new(*zvf.ListingError)):
					// Kept: the client is told why (classify), and when to
					// retry by cerr.
					err = errors.Join(err, cerr)
				default:
					err = cerr
				}
				break
			}
			for _, k := range answerHeaders {
				w.Header().Del(k)
			}
		}
		p := classify(err)
		s.log.Log(r.Context(), failureLevel(p), "request failed", "path", r.URL.Path, "status", p.Status, "err", err, "request_id", requestID(r.Context()))
		if committed(w) {
			if errors.Is(err, zvf.ErrChanged) && a.h != nil {
				// This answer cannot be computed again, but the store's
				// handle must learn of the change all the same: a change
				// to data alone is seen by no metadata check, and every
				// later answer that streams before meeting it would be cut
				// too. Recorded, it opens once the store settles.
				_, _ = a.h.Changed(r.Context(), a.st, err)
			}
			// Headers and part of the body are out: the only honest signal
			// left is to cut the connection.
			panic(http.ErrAbortHandler)
		}
		writeProblem(w, r, p)
	}
}

// failureLevel is the level a failed request's error is logged at: an
// operator's concern (the server, its storage or its data at fault) at
// WARN or ERROR; the client's own mistake at DEBUG, its access line (at
// INFO) being all an operator needs of it; a client that left, at DEBUG
// too (its error is the cancellation; the access line says 499).
func failureLevel(p *Problem) slog.Level {
	switch p.Kind() {
	case problem.BadParameter, problem.BadFilter, problem.NotFound, problem.StaleCursor, problem.NotAcceptable, problem.TooLarge,
		problem.RangeNotSatisfiable, problem.Unrepresentable, problem.Cancelled:
		return slog.LevelDebug
	}
	if p.Status >= 500 {
		return slog.LevelError
	}
	return slog.LevelWarn
}

func committed(w http.ResponseWriter) bool {
	sw, ok := w.(interface{ committed() bool })
	return ok && sw.committed()
}
