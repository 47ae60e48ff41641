package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/zvfserve/zvfserve/api/neuroglancer"
	"github.com/zvfserve/zvfserve/zvf"
)

// neuroglancerRoutes are the /ng/{store} routes (package neuroglancer)
// behind the API's own store lookup, problem documents, retries on a
// changed store, validators, cache and response limit.
func (s *Server) neuroglancerRoutes() *neuroglancer.Server {
	var c zvf.Cache
	if s.o.Cache != nil {
		c = s.o.Cache
	}
	return neuroglancer.New(neuroglancer.Options{
		Store: s.store,
		Serve: func(h func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
			return s.wrap(func(w http.ResponseWriter, r *http.Request) error { return neuroglancerProblem(h(w, r)) })
		},
		NotModified:    s.notModified,
		ContentCoding:  contentCoding,
		Cache:          c,
		MaxAnnotations: s.o.MaxVertices,
		Now:            s.o.Now,
	})
}

// neuroglancerProblem makes the problems the Neuroglancer routes find
// themselves the API's; the reader's errors pass through.
func neuroglancerProblem(err error) error {
	var ne *neuroglancer.Error
	if !errors.As(err, &ne) {
		return err
	}
	titles := map[string]string{"bad-parameter": "Bad parameter", "not-found": "Not found", "too-large": "Request too large",
		"corrupt-data": "Corrupt store data"}
	title := titles[ne.Kind]
	if title == "" {
		title = http.StatusText(ne.Status)
	}
	return &Problem{Type: typeBase + ne.Kind, Title: title, Status: ne.Status, Detail: ne.Detail}
}

// descriptor is what GET /api/v1/stores/{store} answers: the store's
// Info, and its Neuroglancer sources with a ready viewer state.
type descriptor struct {
	*zvf.Info
	Neuroglancer *neuroglancer.Description `json:"neuroglancer,omitempty"`
}

func (s *Server) descriptor(ctx context.Context, st *zvf.Store) descriptor {
	return descriptor{Info: st.Info(), Neuroglancer: neuroglancer.Describe(ctx, st, s.o.PublicURL)}
}
