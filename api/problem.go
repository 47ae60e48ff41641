package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/zvfserve/zvfserve/api/problem"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/cql2"
)

// Problem is an RFC 9457 problem document (see package problem, which
// holds every kind's status, title and type URI).
type Problem = problem.Details

func badRequest(detail string) *Problem { return problem.New(problem.BadParameter, detail) }

func notFound(detail string) *Problem { return problem.New(problem.NotFound, detail) }

func tooLarge(detail string) *Problem { return problem.New(problem.TooLarge, detail) }

func staleCursor() *Problem {
	return problem.New(problem.StaleCursor, "the store changed since this cursor was issued; request the first page again")
}

func changing(retry time.Duration) *Problem {
	p := problem.New(problem.StoreChanging, "the store's objects are being replaced; its new version is served once they have settled")
	p.RetryAfter = max(int((retry+time.Second-1)/time.Second), 1)
	return p
}

func overloaded() *Problem {
	p := problem.New(problem.Overloaded, "too many requests in flight; retry shortly")
	p.RetryAfter = 1
	return p
}

// classify maps any error to a problem: a *Problem is itself; the
// reader's kinds (zvf.ErrNotFound, …) and the request's context each map to
// one kind; anything else is internal (500). Only zvf knows storage
// errors. The full error is logged by the caller.
func classify(err error) *Problem {
	var p *Problem
	if errors.As(err, &p) {
		return p
	}
	var fe *cql2.Error
	if errors.As(err, &fe) {
		// The filter's own message names the property, literal or token
		// (and the level that lacks a property).
		return problem.New(problem.BadFilter, fe.Error())
	}
	detail := ""
	var ze *zvf.Error
	if errors.As(err, &ze) {
		detail = ze.Detail() // store, level, array, chunk: no local paths
	}
	var ce *zvf.ChangingError
	var le *zvf.ListingError
	switch {
	case errors.As(err, &le):
		// The level's answers would be short: said as such, with when to
		// retry (the store's reopen, which lists it again).
		p := problem.New(problem.StoreChanging, le.Error())
		switch {
		case errors.As(err, &ce) && ce.Unwatched:
			p.Detail += "; the store is served as immutable (revalidation is off): it is listed again after a restart"
		case errors.As(err, &ce):
			p.RetryAfter = max(int((ce.RetryAfter+time.Second-1)/time.Second), 1)
		default:
			p.RetryAfter = 1
		}
		return p
	case errors.As(err, &ce) && ce.Unwatched:
		// No Retry-After: nothing opens the new version until a restart.
		return problem.New(problem.StoreChanging, "the store changed while this server serves it as immutable (revalidation is off); its new version is served after a restart")
	case errors.As(err, &ce):
		return changing(ce.RetryAfter)
	case errors.Is(err, zvf.ErrChanged):
		return changing(time.Second)
	case errors.Is(err, context.DeadlineExceeded):
		return problem.New(problem.Timeout, "the request took longer than the server's time limit")
	case errors.Is(err, context.Canceled):
		return problem.New(problem.Cancelled, "")
	case errors.Is(err, zvf.ErrBadQuery):
		return badRequest(detail)
	case errors.Is(err, zvf.ErrNotFound):
		return notFound(detail)
	case errors.Is(err, zvf.ErrUnavailable):
		p := problem.New(problem.BackendUnavailable, "the storage backend could not be reached; retry later")
		p.RetryAfter = 5
		return p
	case errors.Is(err, zvf.ErrPermission):
		return problem.New(problem.StorageDenied, detail)
	case errors.Is(err, zvf.ErrCorrupt):
		return problem.New(problem.CorruptData, detail)
	case errors.Is(err, zvf.ErrUnsupported):
		return problem.New(problem.Unsupported, detail)
	}
	return problem.New(problem.Internal, "the server could not complete the request")
}

func writeProblem(w http.ResponseWriter, r *http.Request, p *Problem) {
	problem.Write(w, r, p)
	if sw, ok := w.(*statusWriter); ok {
		sw.problem = p.Kind() // counted by type (observe)
		if p.Status == problem.StatusClientClosed {
			// Sent as 408 (if the client is there to read it at all), but
			// logged and counted as what happened: the client went away.
			sw.status = problem.StatusClientClosed
		}
	}
}
