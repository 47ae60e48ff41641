package api

import (
	"crypto/subtle"
	"net/http"

	"github.com/zvfserve/zvfserve/api/problem"
)

func (s *Server) auth(next http.Handler) http.Handler {
	if s.o.Token == "" {
		return next
	}
	want := []byte("Bearer " + s.o.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="zvfserve"`)
			writeProblem(w, r, problem.New(problem.Unauthorized, "this server needs a bearer token"))
			return
		}
		next.ServeHTTP(w, r)
	})
}
