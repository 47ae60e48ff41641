package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestTokenCompareIsFixedLength: the bearer token is compared as digests
// of one fixed length, so how long the comparison takes says nothing of
// the configured token's length (subtle.ConstantTimeCompare returns at
// once when its arguments' lengths differ). Timing cannot be measured
// reliably on a shared machine; this holds the property that makes it
// flat instead: whatever token is presented, the comparison is given two
// inputs of the same, fixed length.
func TestTokenCompareIsFixedLength(t *testing.T) {
	const secret = "correct-horse-battery-staple"
	var mu sync.Mutex
	var lens [][2]int
	real := tokenEqual
	tokenEqual = func(a, b []byte) bool {
		mu.Lock()
		lens = append(lens, [2]int{len(a), len(b)})
		mu.Unlock()
		return real(a, b)
	}
	t.Cleanup(func() { tokenEqual = real })
	s := &Server{o: Options{Token: secret}}
	h := s.auth(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	for _, tc := range []struct {
		token string
		want  int
	}{
		{"", http.StatusUnauthorized},
		{"c", http.StatusUnauthorized},
		{secret[:len(secret)-1], http.StatusUnauthorized},
		{secret + "x", http.StatusUnauthorized},
		{strings.Repeat("c", 4096), http.StatusUnauthorized},
		{strings.ToUpper(secret), http.StatusUnauthorized},
		{secret, http.StatusNoContent},
	} {
		r := httptest.NewRequest("GET", "/api/v1/stores", nil)
		r.Header.Set("Authorization", "Bearer "+tc.token)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.want {
			t.Errorf("token of %d bytes: status %d, want %d", len(tc.token), w.Code, tc.want)
		}
	}
	if len(lens) != 7 {
		t.Fatalf("%d comparisons for 7 requests", len(lens))
	}
	for _, l := range lens {
		if l != lens[0] || l[0] != l[1] {
			t.Fatalf("the comparison was given inputs of lengths %v: they vary with the token presented", lens)
		}
	}
}

// TestTokenCheckAllocatesNothing: hashing a presented token of a usual
// length costs no allocation on the request path.
func TestTokenCheckAllocatesNothing(t *testing.T) {
	token := strings.Repeat("t", 43)
	var sink [32]byte
	if n := testing.AllocsPerRun(100, func() { sink = tokenDigest(token) }); n != 0 {
		t.Errorf("%v allocations a token", n)
	}
	_ = sink
}
