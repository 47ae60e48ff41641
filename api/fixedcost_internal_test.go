package api

import (
	"math/rand/v2"
	"net/http"
	"net/textproto"
	"strings"
	"testing"
)

// walkQueryByteAtATime is appendWalkQuery as it was before it appended
// runs: the reference the ETags and Link headers clients hold were made by.
func walkQueryByteAtATime(b []byte, raw string) []byte {
	for p := range strings.SplitSeq(raw, "&") {
		if p == "" || p == "cursor" || strings.HasPrefix(p, "cursor=") {
			continue
		}
		for i := 0; i < len(p); i++ {
			c := p[i]
			if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~!$&'()*+,;=:@/?%", c) >= 0 {
				b = append(b, c)
			} else {
				const hex = "0123456789ABCDEF"
				b = append(b, '%', hex[c>>4], hex[c&15])
			}
		}
		b = append(b, '&')
	}
	return b
}

// TestWalkQueryAsBefore: the walk's query (and so every ETag and Link
// built from it) is byte for byte what it was, for every byte value and
// for random queries with cursors, escapes and empty parameters.
func TestWalkQueryAsBefore(t *testing.T) {
	cases := []string{"", "&", "cursor", "cursor=abc", "min=0,0,0&max=1.5,2e3,-4&f=bin&level=auto&limit=100000",
		"a=%ZZ&b=\"x\"&c=<>&cursor=1&d=\xff\x00", "filter=x%3E1+and+y<2"}
	for c := range 256 {
		cases = append(cases, "k="+string([]byte{byte(c)})+"v&"+string([]byte{byte(c), byte(c)}))
	}
	rng := rand.New(rand.NewPCG(25, 2))
	for range 2000 {
		b := make([]byte, rng.IntN(40))
		for i := range b {
			b[i] = "ab=&,.%+<>\"~ \x7f\x80\xffcursor"[rng.IntN(22)]
		}
		cases = append(cases, string(b))
	}
	for _, q := range cases {
		if got, want := string(appendWalkQuery([]byte("x"), q)), string(walkQueryByteAtATime([]byte("x"), q)); got != want {
			t.Fatalf("query %q: %q, before %q", q, got, want)
		}
	}
}

// TestReqHeaderIsGet: reqHeader gives what Header.Get gives for every key
// the server reads, whichever way the request's headers were keyed.
func TestReqHeaderIsGet(t *testing.T) {
	keys := []string{"Origin", "Accept", "Accept-Encoding", "If-None-Match", "If-Match", "Authorization"}
	for _, k := range keys {
		if textproto.CanonicalMIMEHeaderKey(k) != k {
			t.Fatalf("%q is not canonical", k)
		}
		for _, h := range []http.Header{
			{},
			{k: {"a", "b"}},
			{k: {}},
			{strings.ToLower(k): {"lower"}},
			{k: {""}, strings.ToUpper(k): {"upper"}},
		} {
			r := &http.Request{Header: h}
			if got, want := reqHeader(r, k), h.Get(k); got != want {
				t.Errorf("%q of %v: %q, Get %q", k, h, got, want)
			}
			if got, want := r.Header[k], h.Values(k); len(got) != len(want) {
				t.Errorf("%q of %v: values %q, Values %q", k, h, got, want)
			}
		}
	}
}
