package api

import (
	"encoding/json"
	"testing"
)

// TestTrailerJSON: the binary trailer is the JSON of its map, key for
// key and byte for byte, also where it is written without encoding/json
// (no extra members: the warm path), and appending it allocates nothing
// then (issue 25: ~10 allocations of a warm binary answer).
func TestTrailerJSON(t *testing.T) {
	for _, tr := range []trailer{
		{},
		{Count: 2048},
		{Count: -1},
		{Count: 1 << 62, Next: "eyJ2IjoxfQ"},
		{Count: 7, Next: "a<b>&c\"d\\e\u2028\xff"},
		{Count: 3, Extra: map[string]any{"matched": int64(9), "a": "x"}},
		{Count: 3, Next: "n", Extra: map[string]any{"zz": []int{1}}},
		{Count: 5, Extra: map[string]any{"offset": int64(0), "number_matched": int64(5)}},
		{Count: 5, Next: "eyJ2IjoxfQ", Extra: map[string]any{"offset": int64(-3), "number_matched": 1 << 40, "a_1": int64(1)}},
		{Count: 5, Next: "a<b>", Extra: map[string]any{"offset": int64(0)}},
		{Count: 5, Extra: map[string]any{"count": int64(9), "next": int64(1)}},
		{Count: 5, Extra: map[string]any{"a b": int64(1), "é": int64(2), "": int64(3)}},
		{Count: 5, Extra: map[string]any{"offset": int32(1)}},
	} {
		m := map[string]any{"count": tr.Count, "next": nil}
		if tr.Next != "" {
			m["next"] = tr.Next
		}
		for k, v := range tr.Extra {
			m[k] = v
		}
		want, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendTrailer(nil, &tr)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%+v: %s, want %s", tr, got, want)
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
}
