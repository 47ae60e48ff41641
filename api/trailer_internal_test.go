package api

import (
	"reflect"
	"testing"
)

// TestTrailerJSON: the binary trailer is the JSON of its map, key for
// key and byte for byte, also where it is written without encoding/json
// (no extra members: the warm path), and appending it allocates nothing
// then (issue 25: ~10 allocations of a warm binary answer).
func TestTrailerJSON(t *testing.T) {
	for _, tc := range []struct {
		tr   trailer
		want string // encoding/json's of the trailer's map
	}{
		{trailer{}, `{"count":0,"next":null}`},
		{trailer{Count: 2048}, `{"count":2048,"next":null}`},
		{trailer{Count: -1}, `{"count":-1,"next":null}`},
		{trailer{Count: 1 << 62, Next: "eyJ2IjoxfQ"}, `{"count":4611686018427387904,"next":"eyJ2IjoxfQ"}`},
		{trailer{Count: 7, Next: "a<b>&c\"d\\e\u2028\xff"}, `{"count":7,"next":"a\u003cb\u003e\u0026c\"d\\e\u2028\ufffd"}`},
		{trailer{Count: 3, Extra: map[string]any{"matched": int64(9), "a": "x"}}, `{"a":"x","count":3,"matched":9,"next":null}`},
		{trailer{Count: 3, Next: "n", Extra: map[string]any{"zz": []int{1}}}, `{"count":3,"next":"n","zz":[1]}`},
		{trailer{Count: 5, Extra: map[string]any{"offset": int64(0), "number_matched": int64(5)}}, `{"count":5,"next":null,"number_matched":5,"offset":0}`},
		{trailer{Count: 5, Next: "eyJ2IjoxfQ", Extra: map[string]any{"offset": int64(-3), "number_matched": 1 << 40, "a_1": int64(1)}}, `{"a_1":1,"count":5,"next":"eyJ2IjoxfQ","number_matched":1099511627776,"offset":-3}`},
		{trailer{Count: 5, Next: "a<b>", Extra: map[string]any{"offset": int64(0)}}, `{"count":5,"next":"a\u003cb\u003e","offset":0}`},
		{trailer{Count: 5, Extra: map[string]any{"count": int64(9), "next": int64(1)}}, `{"count":9,"next":1}`},
		{trailer{Count: 5, Extra: map[string]any{"a b": int64(1), "é": int64(2), "": int64(3)}}, `{"":3,"a b":1,"count":5,"next":null,"é":2}`},
		{trailer{Count: 5, Extra: map[string]any{"offset": int32(1)}}, `{"count":5,"next":null,"offset":1}`},
		// A bbox page's members, held as numbers (Page), write as the
		// same members in the map did.
		{trailer{Count: 5, Page: true, Matched: 5, MatchedKnown: true}, `{"count":5,"next":null,"number_matched":5,"offset":0}`},
		{trailer{Count: 5, Next: "eyJ2IjoxfQ", Page: true, Offset: -3, Matched: 1 << 40, MatchedKnown: true, Extra: map[string]any{"a_1": int64(1)}},
			`{"a_1":1,"count":5,"next":"eyJ2IjoxfQ","number_matched":1099511627776,"offset":-3}`},
		{trailer{Count: 5, Next: "a<b>", Page: true}, `{"count":5,"next":"a\u003cb\u003e","offset":0}`},
		{trailer{Count: 5, Next: "eyJ2IjoxfQ", Page: true, Offset: 1 << 40, Matched: 7}, `{"count":5,"next":"eyJ2IjoxfQ","offset":1099511627776}`},
		{trailer{Count: 5, Page: true, Offset: 2, Extra: map[string]any{"zz": []int{1}}}, `{"count":5,"next":null,"offset":2,"zz":[1]}`},
	} {
		got, err := appendTrailer(nil, &tc.tr)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tc.want {
			t.Errorf("%+v: %s, want %s", tc.tr, got, tc.want)
		}
	}
	buf := make([]byte, 0, 64)
	tr := trailer{Count: 123456}
	if a := testing.AllocsPerRun(20, func() { buf, _ = appendTrailer(buf[:0], &tr) }); a != 0 {
		t.Errorf("%.0f allocations for a trailer without extra members", a)
	}
	// A bbox page's trailer: its offset and the count matched.
	tr = trailer{Count: 123456, Extra: map[string]any{"offset": int64(0), "number_matched": int64(123456)}}
	if a := testing.AllocsPerRun(20, func() { buf, _ = appendTrailer(buf[:0], &tr) }); a != 0 {
		t.Errorf("%.0f allocations for a page's trailer", a)
	}
	tr = trailer{Count: 123456, Next: "eyJ2IjoxfQ", Page: true, Offset: 99, Matched: 123456, MatchedKnown: true}
	if a := testing.AllocsPerRun(20, func() { buf, _ = appendTrailer(buf[:0], &tr) }); a != 0 {
		t.Errorf("%.0f allocations for a page's trailer (Page)", a)
	}
}

// TestTrailerExtra: the extra members the formats that range over them
// see are Extra's and, for a bbox page, its offset and (when known) the
// count matched.
func TestTrailerExtra(t *testing.T) {
	for _, tc := range []struct {
		tr   trailer
		want map[string]any
	}{
		{trailer{}, nil},
		{trailer{Extra: map[string]any{"a": 1}}, map[string]any{"a": 1}},
		{trailer{Page: true}, map[string]any{"offset": int64(0)}},
		{trailer{Page: true, Offset: 4, Matched: 9, MatchedKnown: true, Extra: map[string]any{"a": 1}},
			map[string]any{"a": 1, "offset": int64(4), "number_matched": int64(9)}},
	} {
		if got := tc.tr.extra(); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%+v: %v, want %v", tc.tr, got, tc.want)
		}
	}
}
