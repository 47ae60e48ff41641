package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/zvfserve/zvfserve/api/problem"
)

// tokenEqual is the constant-time comparison of the bearer token; tests
// watch what it is given.
var tokenEqual = func(a, b []byte) bool { return subtle.ConstantTimeCompare(a, b) == 1 }

func (s *Server) auth(next http.Handler) http.Handler {
	if s.o.Token == "" {
		return next
	}
	// Digests of one fixed length are compared, the configured token's
	// computed once: ConstantTimeCompare returns at once when its inputs'
	// lengths differ, which would tell a client how long the token is.
	// Hashing what was presented costs the same whatever it holds (the
	// header's size, at most 64 KiB, aside).
	want := sha256.Sum256([]byte(s.o.Token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The scheme is case-insensitive and followed by one or more
		// spaces (RFC 9110 11.1, 11.6.2); the token is compared exactly.
		scheme, token, ok := strings.Cut(reqHeader(r, "Authorization"), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			w.Header().Set("WWW-Authenticate", `Bearer realm="zvfserve"`)
			writeProblem(w, r, problem.New(problem.Unauthorized, "this server needs a bearer token"))
			return
		}
		got := tokenDigest(strings.TrimLeft(token, " "))
		if !tokenEqual(got[:], want[:]) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="zvfserve", error="invalid_token"`)
			writeProblem(w, r, problem.New(problem.Unauthorized, "the bearer token is not valid"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// tokenDigest is the SHA-256 of a presented token, hashed from a buffer on
// the stack when it fits (tokens are short), so that checking it
// allocates nothing.
func tokenDigest(token string) [sha256.Size]byte {
	var buf [128]byte
	if len(token) <= len(buf) {
		return sha256.Sum256(append(buf[:0], token...))
	}
	return sha256.Sum256([]byte(token))
}
