package api

import (
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/zvftest/alloctest"
)

// parseQueryCases are query strings parseQuery must read as
// url.ParseQuery does: repeats, escapes, bad escapes, semicolons, empty
// settings and keys, and more settings than it shares one array for.
var parseQueryCases = []string{
	"",
	"min=1,2,3&max=4,5,6&level=0&f=bin&limit=2000000",
	"a=1&a=2&b=3&a=4",
	"a=%20b&c+d=e+f&%41=%zz&g=%",
	"a=1;b=2&c=3",
	"&&a&=b&a=&==&c==d&",
	"filter=" + url.QueryEscape("height > 3 AND name = 'x&y'") + "&filter-lang=cql2-text",
	strings.Repeat("k=v&", 100) + "z=1",
	strings.Repeat("&", 70),
}

// values is q as url.Values, to compare with url.ParseQuery's.
func values(q queryArgs) url.Values {
	if q == nil {
		return url.Values{}
	}
	v := url.Values{}
	for _, a := range q {
		v.Add(a.k, a.v)
	}
	return v
}

func TestParseQueryIsURLParseQuery(t *testing.T) {
	for _, raw := range parseQueryCases {
		want, err := url.ParseQuery(raw)
		got, bad := parseQuery(raw, nil)
		if !reflect.DeepEqual(values(got), want) || (bad != "") != (err != nil) {
			t.Errorf("%q: got %v (bad %q), url.ParseQuery %v (%v)", raw, got, bad, want, err)
		}
		for k, vs := range want {
			if g := got.Get(k); g != vs[0] || !got.Has(k) || got.count(k) != len(vs) {
				t.Errorf("%q: Get(%q) %q, Has %v, count %d; url.Values %q", raw, k, g, got.Has(k), got.count(k), vs)
			}
		}
		if got.Has("no such key") || got.Get("no such key") != "" {
			t.Errorf("%q: a key it does not give is found", raw)
		}
	}
}

// TestParseQueryAllocs: a usual query parsed into a request's room
// allocates nothing (url.Values is a map and a slice per key).
func TestParseQueryAllocs(t *testing.T) {
	alloctest.SkipUnderRace(t)
	raw := parseQueryCases[1]
	var a attempt
	if n := testing.AllocsPerRun(100, func() { a.q, _ = parseQuery(raw, a.qbuf[:]) }); n != 0 {
		t.Errorf("parseQuery allocates %.0f times", n)
	}
	if len(a.q) != 5 || a.q.Get("f") != "bin" {
		t.Errorf("parsed %v", a.q)
	}
}

func FuzzParseQuery(f *testing.F) {
	for _, raw := range parseQueryCases {
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		want, err := url.ParseQuery(raw)
		got, bad := parseQuery(raw, nil)
		if !reflect.DeepEqual(values(got), want) || (bad != "") != (err != nil) {
			t.Errorf("%q: got %v (bad %q), url.ParseQuery %v (%v)", raw, got, bad, want, err)
		}
	})
}

// BenchmarkParseQuery: a 1k bbox request's query, parsed as wrap parses
// it (compare url.ParseQuery with -bench ParseQuery).
func BenchmarkParseQuery(b *testing.B) {
	raw := parseQueryCases[1]
	b.ReportAllocs()
	var a attempt
	for b.Loop() {
		a.q, _ = parseQuery(raw, a.qbuf[:])
	}
	querySink = a.q
}

func BenchmarkParseQueryURL(b *testing.B) {
	raw := parseQueryCases[1]
	b.ReportAllocs()
	for b.Loop() {
		urlSink, _ = url.ParseQuery(raw)
	}
}

// querySink and urlSink keep a benchmark's answer, as a request's is.
var (
	querySink queryArgs
	urlSink   url.Values
)
