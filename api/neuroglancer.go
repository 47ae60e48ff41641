package api

import (
	"context"
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
			return s.wrap(h)
		},
		NotModified:    s.notModified,
		ContentCoding:  contentCoding,
		Cache:          c,
		MaxAnnotations: s.o.MaxVertices,
		Now:            s.o.Now,
	})
}

// descriptor is what GET /api/v1/stores/{store} answers: the store's
// Info, and its Neuroglancer sources with a ready viewer state.
type descriptor struct {
	*zvf.Info
	// Queryables is the URL of the store's queryables (what a filter may
	// name), absolute with --public-url.
	Queryables   string                    `json:"queryables"`
	Neuroglancer *neuroglancer.Description `json:"neuroglancer,omitempty"`
}

func (s *Server) descriptor(ctx context.Context, st *zvf.Store) descriptor {
	return descriptor{Info: st.Info(), Queryables: s.o.PublicURL + "/api/v1/stores/" + st.Name() + "/queryables",
		Neuroglancer: neuroglancer.Describe(ctx, st, s.o.PublicURL)}
}
