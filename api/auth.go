package api

import (
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/zvfserve/zvfserve/api/problem"
)

func (s *Server) auth(next http.Handler) http.Handler {
	if s.o.Token == "" {
		return next
	}
	want := []byte(s.o.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The scheme is case-insensitive and followed by one or more
		// spaces (RFC 9110 11.1, 11.6.2); the token is compared exactly.
		scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			w.Header().Set("WWW-Authenticate", `Bearer realm="zvfserve"`)
			writeProblem(w, r, problem.New(problem.Unauthorized, "this server needs a bearer token"))
			return
		}
		if subtle.ConstantTimeCompare([]byte(strings.TrimLeft(token, " ")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="zvfserve", error="invalid_token"`)
			writeProblem(w, r, problem.New(problem.Unauthorized, "the bearer token is not valid"))
			return
		}
		next.ServeHTTP(w, r)
	})
}
