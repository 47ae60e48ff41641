package cql2

import (
	"errors"
	"reflect"
	"testing"
	"unicode/utf8"

	"github.com/zvfserve/zvfserve/zvf/zvftest/alloctest"
)

// fuzzSchema and fuzzChunk give a parsed filter something to be checked
// and evaluated against.
func fuzzSchema() *Schema {
	return &Schema{
		Queryables: []Queryable{
			{Name: "x", Kind: Float, Bits: 32},
			{Name: "n", Kind: Int, Bits: 16},
			{Name: "u", Kind: Uint, Bits: 8},
			{Name: "c", Kind: Categorical, Labels: []string{"a", "b", "ab"}},
			{Name: "s", Kind: String},
			{Name: "v", Kind: Float, Bits: 64, Channels: 2},
		},
		ObjectID: true,
		Group:    true,
	}
}

// fuzzEval checks e against fuzzSchema and, when it fits, evaluates it
// over a few rows: nothing may panic, and filter errors are *Error.
func fuzzEval(t *testing.T, e Expr) {
	f, err := Check(e, fuzzSchema())
	if err != nil {
		var fe *Error
		if !errors.As(err, &fe) {
			t.Fatalf("Check(%s): %v is not an *Error", e, err)
		}
		return
	}
	ev := f.NewEvaluator()
	ev.MayMatch()
	cols := map[string]Column{
		"x": floatCol("float32", 1, 1, -2.5, 0, 3),
		"n": intCol("int16", 1, -1, 300, 2),
		"u": intCol("uint8", 0, 1, 255, 7),
		"c": intCol("uint8", 0, 1, 2, 9),
		"s": {Strings: []string{"a", "", "ab", "日本"}},
		"v": floatCol("float64", 2, 1, 2, 3, 4, 5, 6, 7, 8),
	}
	for _, name := range f.Attributes() {
		if err := ev.Bind(name, cols[name]); err != nil {
			t.Fatal(err)
		}
	}
	ev.BindObjectIDs([]int64{1, -1, 2, 2}, -1)
	ev.BindGroups(NewGroupSets(map[int64][]int64{0: {1}, 1: {2}}))
	out := make([]bool, 4)
	if err := ev.EvalRange(0, out); err != nil {
		t.Fatal(err)
	}
}

// FuzzParseText: no panic; errors are *Error with a position inside the
// input; allocation in proportion to the input; a parsed filter prints to
// text and JSON that parse back to the same tree.
func FuzzParseText(f *testing.F) {
	for _, s := range []string{
		`x = 1`, `x<>-1.5e3 AND n BETWEEN 1 AND 2`, `c NOT LIKE 'a\%_' OR s IN ('a', 'b''c')`,
		`NOT (x IS NULL OR v[1] >= .5)`, `"quoted ""name""" = TRUE`, `group <> 3 AND object_id IN (1, 2)`,
		`(((x = 1)))`, `x = 18446744073709551616`, `größe = 'ä'`, `S_INTERSECTS(geom, POINT(1 2))`,
		`x = 1 AND (`, `x IS NOT NULL`, "x = '\xff'", `FALSE OR TRUE`, `u NOT BETWEEN 0 AND 7`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		var e Expr
		var err error
		if n := alloctest.Bytes(func() { e, err = ParseText(src) }); n > 512*uint64(len(src))+64<<10 {
			t.Fatalf("%d bytes allocated for %d bytes of filter", n, len(src))
		}
		if err != nil {
			checkParseError(t, "ParseText", src, err)
			return
		}
		text := e.String()
		back, err := ParseText(text)
		if err != nil || !reflect.DeepEqual(back, e) {
			t.Fatalf("ParseText(%q) = %#v, prints as %q, which parses to %#v, %v", src, e, text, back, err)
		}
		js := FormatJSON(e)
		back, err = ParseJSON([]byte(js))
		if err != nil || !reflect.DeepEqual(back, e) {
			t.Fatalf("ParseText(%q) = %#v, JSON %s parses to %#v, %v", src, e, js, back, err)
		}
		fuzzEval(t, e)
	})
}

// checkParseError fails the test unless err, parse's answer to src, is an
// *Error whose position is inside src (or -1: none).
func checkParseError(t *testing.T, parse, src string, err error) {
	t.Helper()
	var fe *Error
	if !errors.As(err, &fe) {
		t.Fatalf("%s(%q): %v is not an *Error", parse, src, err)
	}
	if fe.Pos < -1 || fe.Pos > utf8.RuneCountInString(src) {
		t.Fatalf("%s(%q): position %d outside the input", parse, src, fe.Pos)
	}
}

// FuzzParseJSON is FuzzParseText for cql2-json.
func FuzzParseJSON(f *testing.F) {
	for _, s := range []string{
		`{"op":"=","args":[{"property":"x"},1]}`,
		`{"op":"and","args":[{"op":"between","args":[{"property":"n"},-1,2.5]},{"op":"in","args":[{"property":"c"},["a","b"]]},true]}`,
		`{"op":"not","args":[{"op":"like","args":[{"property":"s"},"a\\%"]}]}`,
		`{"op":"isNull","args":[{"property":"v[0]"}]}`,
		`{"op":"or","args":[{"op":"<>","args":[{"property":"group"},1]},{"op":">=","args":[{"property":"object_id"},18446744073709551615]}]}`,
		`{"op":"=","args":[{"property":"x"},{"date":"2020-01-01"}]}`,
		`{"op":"between","args":[{"property":"x"},1]}`, `true`, `[[[[`, `{"op":"=","args":[{"property":"x"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		var e Expr
		var err error
		if n := alloctest.Bytes(func() { e, err = ParseJSON(src) }); n > 2048*uint64(len(src))+64<<10 {
			t.Fatalf("%d bytes allocated for %d bytes of filter", n, len(src))
		}
		if err != nil {
			checkParseError(t, "ParseJSON", string(src), err)
			return
		}
		js := FormatJSON(e)
		back, err := ParseJSON([]byte(js))
		if err != nil || !reflect.DeepEqual(back, e) {
			t.Fatalf("ParseJSON(%q) = %#v, prints as %s, which parses to %#v, %v", src, e, js, back, err)
		}
		text := e.String()
		back, err = ParseText(text)
		if err != nil || !reflect.DeepEqual(back, e) {
			t.Fatalf("ParseJSON(%q) = %#v, text %q parses to %#v, %v", src, e, text, back, err)
		}
		fuzzEval(t, e)
	})
}
