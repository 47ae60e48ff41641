package api

import (
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/zvfserve/zvfserve/api/problem"
)

// versionedRoutes is the prefix of a store's data routes under a version
// of the store: what its descriptor's "version" names. A client that
// planned its requests on a descriptor (the viewer) sends them there, so
// an answer it or a cache holds is that version's for good, and once the
// store has changed the path answers 410 store-changed instead of the new
// version's rows under an old plan. The version is the store's revision,
// as the Neuroglancer keys name it (package neuroglancer, without their
// layout: these answers' encoding is the API's own).
const versionedRoutes = storeRoutes + "/v{version}"

// versionedCacheControl is a versioned answer's: its URL names the version
// it is of, so it never changes; a later version is another URL. With a
// token, makePrivate makes it private.
const versionedCacheControl = "public, max-age=31536000, immutable"

// descriptorCacheControl is the descriptor's: it names the version the
// versioned paths are under, so a reload must ask for it again (a 304
// while the version stands), as Neuroglancer's infos are.
const descriptorCacheControl = "no-cache"

// atVersion is h for a versioned route: the store must be at the path's
// version, and the answer may be kept as long as anyone likes.
func atVersion(h func(*Server, http.ResponseWriter, *http.Request) error) func(*Server, http.ResponseWriter, *http.Request) error {
	return func(s *Server, w http.ResponseWriter, r *http.Request) error {
		if err := s.checkVersion(r); err != nil {
			return err
		}
		w.Header().Set("Cache-Control", versionedCacheControl)
		return h(s, w, r)
	}
}

// checkVersion is nil when the request's store is at the version its
// path names; else a 404 for a version no descriptor names (empty, not
// hexadecimal), the error of checking the store now (a newer version
// opened: zvf.ErrChanged, which wrap answers from it, as a replica that
// has not yet seen what another's descriptor names must), or a 410
// store-changed naming the version served now.
func (s *Server) checkVersion(r *http.Request) error {
	st, err := s.store(r)
	if err != nil {
		return err
	}
	v := chi.URLParam(r, "version")
	if v == st.Revision() {
		return nil
	}
	if v == "" || strings.Trim(v, "0123456789abcdef") != "" {
		return problem.Newf(problem.NotFound, "store %q: %q is not a version a descriptor names (v<revision>: v%s/… for the version served now, the descriptor's \"version\"); read the store's descriptor, GET /api/v1/stores/%s",
			st.Name(), "v"+v, st.Revision(), st.Name())
	}
	if err := otherVersion(r, st, "a versioned path"); err != nil {
		return err
	}
	return problem.Newf(problem.StoreChanged, "store %q is not at version %s, which the descriptor that planned this path described: the store has changed since (it is at version %s); read the descriptor again (GET /api/v1/stores/%s) and ask under its version",
		st.Name(), v, st.Revision(), st.Name())
}
