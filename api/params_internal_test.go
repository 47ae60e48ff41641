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

func TestParseQueryIsURLParseQuery(t *testing.T) {
	for _, raw := range parseQueryCases {
		want, err := url.ParseQuery(raw)
		got, bad := parseQuery(raw)
		if !reflect.DeepEqual(got, want) || (bad != "") != (err != nil) {
			t.Errorf("%q: got %v (bad %q), url.ParseQuery %v (%v)", raw, got, bad, want, err)
		}
	}
}

// TestParseQueryAllocs: a usual query's values share one array, so the
// map and it are all a parse allocates (url.ParseQuery allocates one
// slice per key besides).
func TestParseQueryAllocs(t *testing.T) {
	alloctest.SkipUnderRace(t)
	raw := parseQueryCases[1]
	var sink url.Values // both answers escape, as a request's does
	a := testing.AllocsPerRun(100, func() { sink, _ = parseQuery(raw) })
	b := testing.AllocsPerRun(100, func() { sink, _ = url.ParseQuery(raw) })
	_ = sink
	if a > 3 || a >= b {
		t.Errorf("parseQuery allocates %.0f times, url.ParseQuery %.0f", a, b)
	}
}

// A value appended to a key given once must not write into the array
// the other keys' values share.
func TestParseQueryAppendKeepsOthers(t *testing.T) {
	q, _ := parseQuery("a=1&b=2&c=3")
	q.Add("a", "x")
	q["b"] = append(q["b"], "y")
	want := url.Values{"a": {"1", "x"}, "b": {"2", "y"}, "c": {"3"}}
	if !reflect.DeepEqual(q, want) {
		t.Errorf("got %v, want %v", q, want)
	}
}

func FuzzParseQuery(f *testing.F) {
	for _, raw := range parseQueryCases {
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		want, err := url.ParseQuery(raw)
		got, bad := parseQuery(raw)
		if !reflect.DeepEqual(got, want) || (bad != "") != (err != nil) {
			t.Errorf("%q: got %v (bad %q), url.ParseQuery %v (%v)", raw, got, bad, want, err)
		}
	})
}

// BenchmarkParseQuery: a 1k bbox request's query, parsed as wrap parses
// it (compare url.ParseQuery with -bench ParseQuery).
func BenchmarkParseQuery(b *testing.B) {
	raw := parseQueryCases[1]
	b.ReportAllocs()
	for b.Loop() {
		querySink, _ = parseQuery(raw)
	}
}

func BenchmarkParseQueryURL(b *testing.B) {
	raw := parseQueryCases[1]
	b.ReportAllocs()
	for b.Loop() {
		querySink, _ = url.ParseQuery(raw)
	}
}

// querySink keeps a benchmark's answer on the heap, as a request's is.
var querySink url.Values
