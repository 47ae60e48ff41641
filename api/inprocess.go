package api

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/go-chi/chi/v5"
)

// WriteBBox writes to w the body that GET /api/v1/stores/{store}/bbox with
// query q returns, byte for byte, without HTTP: for tools that run the
// server in their own process (zvfserve query) and stream the answer to
// their output. Response headers are dropped. The handler's error comes
// back unchanged: a *Problem for bad parameters, the reader's typed error
// otherwise. The first 256 KiB are held back as for HTTP, so an error
// found before then has written nothing to w.
func (s *Server) WriteBBox(ctx context.Context, w io.Writer, store string, q url.Values) error {
	return s.writeBody(ctx, w, s.bbox, "/api/v1/stores/"+store+"/bbox", q, "store", store)
}

// WriteObject is WriteBBox for GET /api/v1/stores/{store}/objects/{id}.
func (s *Server) WriteObject(ctx context.Context, w io.Writer, store string, id int64, q url.Values) error {
	ids := strconv.FormatInt(id, 10)
	return s.writeBody(ctx, w, s.object, "/api/v1/stores/"+store+"/objects/"+ids, q, "store", store, "id", ids)
}

// writeBody runs one handler with the route parameters the router would
// have set (name, value pairs).
func (s *Server) writeBody(ctx context.Context, w io.Writer, h handler, path string, q url.Values, params ...string) error {
	rc := chi.NewRouteContext()
	for i := 0; i+1 < len(params); i += 2 {
		rc.URLParams.Add(params[i], params[i+1])
	}
	u := url.URL{Path: path, RawQuery: q.Encode()}
	r, err := http.NewRequestWithContext(context.WithValue(ctx, chi.RouteCtxKey, rc), http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("request for %s: %w", path, err)
	}
	return h(&bodyOnly{w: w, h: http.Header{}}, r)
}

// bodyOnly is an http.ResponseWriter that keeps only the body.
type bodyOnly struct {
	w io.Writer
	h http.Header
}

func (b *bodyOnly) Header() http.Header { return b.h }

func (b *bodyOnly) Write(p []byte) (int, error) { return b.w.Write(p) }

func (b *bodyOnly) WriteHeader(int) {}
