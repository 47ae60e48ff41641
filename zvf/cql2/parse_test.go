package cql2

import (
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func prop(name string) Property { return Property{Name: name} }
func str(s string) StringLit    { return StringLit{Value: s} }
func integer(v int64) NumberLit {
	if v < 0 {
		return NumberLit{Float: float64(v), Int: true, Neg: true, Mag: uint64(-v)}
	}
	return NumberLit{Float: float64(v), Int: true, Mag: uint64(v)}
}
func decimal(f float64) NumberLit { return NumberLit{Float: f} }
func cmp(l Scalar, op CompareOp, r Scalar) *Compare {
	return &Compare{Op: op, Left: l, Right: r}
}
func and(args ...Expr) *And { return &And{Args: args} }
func or(args ...Expr) *Or   { return &Or{Args: args} }
func not(e Expr) *Not       { return &Not{Arg: e} }

// TestParse: text and JSON of the same meaning give the same tree, and
// that tree prints (as text and as JSON) to something that parses back to
// it.
func TestParse(t *testing.T) {
	x, y, z := prop("x"), prop("y"), prop("z")
	for _, tc := range []struct {
		text, json string
		want       Expr
	}{
		{`x = 1`, `{"op":"=","args":[{"property":"x"},1]}`, cmp(x, Eq, integer(1))},
		{`x<>1`, `{"op":"<>","args":[{"property":"x"},1]}`, cmp(x, Ne, integer(1))},
		{`x<1`, `{"op":"<","args":[{"property":"x"},1]}`, cmp(x, Lt, integer(1))},
		{`x<=-1`, `{"op":"<=","args":[{"property":"x"},-1]}`, cmp(x, Le, integer(-1))},
		{`x>1.5`, `{"op":">","args":[{"property":"x"},1.5]}`, cmp(x, Gt, decimal(1.5))},
		{`x>=1e3`, `{"op":">=","args":[{"property":"x"},1e3]}`, cmp(x, Ge, decimal(1000))},
		{`1 < x`, `{"op":"<","args":[1,{"property":"x"}]}`, cmp(integer(1), Lt, x)},
		{`x='a'`, `{"op":"=","args":[{"property":"x"},"a"]}`, cmp(x, Eq, str("a"))},
		{`x = 'it''s'`, `{"op":"=","args":[{"property":"x"},"it's"]}`, cmp(x, Eq, str("it's"))},
		{`x = ''`, `{"op":"=","args":[{"property":"x"},""]}`, cmp(x, Eq, str(""))},
		{`x = 'C:\dir'`, `{"op":"=","args":[{"property":"x"},"C:\\dir"]}`, cmp(x, Eq, str(`C:\dir`))},
		{`x = TRUE`, `{"op":"=","args":[{"property":"x"},true]}`, cmp(x, Eq, BoolLit{true})},
		{`x BETWEEN 1 AND 2`, `{"op":"between","args":[{"property":"x"},1,2]}`, &Between{x, integer(1), integer(2)}},
		{`x NOT BETWEEN -1.5 AND .5`, `{"op":"not","args":[{"op":"between","args":[{"property":"x"},-1.5,0.5]}]}`,
			not(&Between{x, decimal(-1.5), decimal(0.5)})},
		{`x IN (1, 2,3)`, `{"op":"in","args":[{"property":"x"},[1,2,3]]}`, &In{x, []Scalar{integer(1), integer(2), integer(3)}}},
		{`x NOT IN ('a')`, `{"op":"not","args":[{"op":"in","args":[{"property":"x"},["a"]]}]}`, not(&In{x, []Scalar{str("a")}})},
		{`x IS NULL`, `{"op":"isNull","args":[{"property":"x"}]}`, &IsNull{x}},
		{`x IS NOT NULL`, `{"op":"not","args":[{"op":"isNull","args":[{"property":"x"}]}]}`, not(&IsNull{x})},
		{`x LIKE 'a%'`, `{"op":"like","args":[{"property":"x"},"a%"]}`, &Like{x, "a%"}},
		{`x NOT LIKE 'a\%_'`, `{"op":"not","args":[{"op":"like","args":[{"property":"x"},"a\\%_"]}]}`, not(&Like{x, `a\%_`})},
		// Precedence: NOT over AND over OR.
		{`x = 1 AND y = 2 OR z = 3`,
			`{"op":"or","args":[{"op":"and","args":[{"op":"=","args":[{"property":"x"},1]},{"op":"=","args":[{"property":"y"},2]}]},{"op":"=","args":[{"property":"z"},3]}]}`,
			or(and(cmp(x, Eq, integer(1)), cmp(y, Eq, integer(2))), cmp(z, Eq, integer(3)))},
		{`x = 1 OR y = 2 AND z = 3`,
			`{"op":"or","args":[{"op":"=","args":[{"property":"x"},1]},{"op":"and","args":[{"op":"=","args":[{"property":"y"},2]},{"op":"=","args":[{"property":"z"},3]}]}]}`,
			or(cmp(x, Eq, integer(1)), and(cmp(y, Eq, integer(2)), cmp(z, Eq, integer(3))))},
		{`NOT x = 1 AND y = 2`,
			`{"op":"and","args":[{"op":"not","args":[{"op":"=","args":[{"property":"x"},1]}]},{"op":"=","args":[{"property":"y"},2]}]}`,
			and(not(cmp(x, Eq, integer(1))), cmp(y, Eq, integer(2)))},
		{`NOT (x = 1 AND y = 2)`,
			`{"op":"not","args":[{"op":"and","args":[{"op":"=","args":[{"property":"x"},1]},{"op":"=","args":[{"property":"y"},2]}]}]}`,
			not(and(cmp(x, Eq, integer(1)), cmp(y, Eq, integer(2))))},
		{`(x = 1 OR y = 2) AND z = 3`,
			`{"op":"and","args":[{"op":"or","args":[{"op":"=","args":[{"property":"x"},1]},{"op":"=","args":[{"property":"y"},2]}]},{"op":"=","args":[{"property":"z"},3]}]}`,
			and(or(cmp(x, Eq, integer(1)), cmp(y, Eq, integer(2))), cmp(z, Eq, integer(3)))},
		{`x = 1 AND y = 2 AND z = 3`,
			`{"op":"and","args":[{"op":"=","args":[{"property":"x"},1]},{"op":"=","args":[{"property":"y"},2]},{"op":"=","args":[{"property":"z"},3]}]}`,
			and(cmp(x, Eq, integer(1)), cmp(y, Eq, integer(2)), cmp(z, Eq, integer(3)))},
		{`(x = 1 AND y = 2) AND z = 3`,
			`{"op":"and","args":[{"op":"and","args":[{"op":"=","args":[{"property":"x"},1]},{"op":"=","args":[{"property":"y"},2]}]},{"op":"=","args":[{"property":"z"},3]}]}`,
			and(and(cmp(x, Eq, integer(1)), cmp(y, Eq, integer(2))), cmp(z, Eq, integer(3)))},
		{`x BETWEEN 1 AND 2 AND y = 3`,
			`{"op":"and","args":[{"op":"between","args":[{"property":"x"},1,2]},{"op":"=","args":[{"property":"y"},3]}]}`,
			and(&Between{x, integer(1), integer(2)}, cmp(y, Eq, integer(3)))},
		{`NOT NOT x = 1`, `{"op":"not","args":[{"op":"not","args":[{"op":"=","args":[{"property":"x"},1]}]}]}`, not(not(cmp(x, Eq, integer(1))))},
		{`x between 1 and 2 or not y is null`,
			`{"op":"or","args":[{"op":"between","args":[{"property":"x"},1,2]},{"op":"not","args":[{"op":"isNull","args":[{"property":"y"}]}]}]}`,
			or(&Between{x, integer(1), integer(2)}, not(&IsNull{y}))},
		{`TRUE`, `true`, BoolLit{true}},
		{`FALSE OR x = 1`, `{"op":"or","args":[false,{"op":"=","args":[{"property":"x"},1]}]}`, or(BoolLit{false}, cmp(x, Eq, integer(1)))},
		{"\tx\n=\r\n1 ", `{"op":"=","args":[{"property":"x"},1]}`, cmp(x, Eq, integer(1))},
		// Property names: quoted, channels, keywords, Unicode.
		{`"cell type" = 'a'`, `{"op":"=","args":[{"property":"cell type"},"a"]}`, cmp(prop("cell type"), Eq, str("a"))},
		{`"say ""hi""" = 1`, `{"op":"=","args":[{"property":"say \"hi\""},1]}`, cmp(prop(`say "hi"`), Eq, integer(1))},
		{`embedding[3] > 0`, `{"op":">","args":[{"property":"embedding[3]"},0]}`, cmp(prop("embedding[3]"), Gt, integer(0))},
		{`"embedding[3]" > 0`, `{"op":">","args":[{"property":"embedding[3]"},0]}`, cmp(prop("embedding[3]"), Gt, integer(0))},
		{`"and" = 1`, `{"op":"=","args":[{"property":"and"},1]}`, cmp(prop("and"), Eq, integer(1))},
		{`größe >= 2`, `{"op":">=","args":[{"property":"größe"},2]}`, cmp(prop("größe"), Ge, integer(2))},
		{`ns:a.b_c = 1`, `{"op":"=","args":[{"property":"ns:a.b_c"},1]}`, cmp(prop("ns:a.b_c"), Eq, integer(1))},
		{`object_id IN (720575940621039145)`, `{"op":"in","args":[{"property":"object_id"},[720575940621039145]]}`,
			&In{prop("object_id"), []Scalar{integer(720575940621039145)}}},
		// Numbers: exact integers to 64 bits, decimals as float64.
		{`x = 18446744073709551615`, `{"op":"=","args":[{"property":"x"},18446744073709551615]}`,
			cmp(x, Eq, NumberLit{Float: 18446744073709551615, Int: true, Mag: math.MaxUint64})},
		{`x = -9223372036854775808`, `{"op":"=","args":[{"property":"x"},-9223372036854775808]}`,
			cmp(x, Eq, NumberLit{Float: -9223372036854775808, Int: true, Neg: true, Mag: 1 << 63})},
		{`x = 18446744073709551616`, `{"op":"=","args":[{"property":"x"},18446744073709551616]}`, cmp(x, Eq, decimal(18446744073709551616))},
		{`x = 0.10000000149011612`, `{"op":"=","args":[{"property":"x"},0.10000000149011612]}`, cmp(x, Eq, decimal(float64(float32(0.1))))},
		{`x = -0`, `{"op":"=","args":[{"property":"x"},-0]}`, cmp(x, Eq, integer(0))},
		{`x = -0.0`, `{"op":"=","args":[{"property":"x"},-0.0]}`, cmp(x, Eq, decimal(0))},
		{`x = 5.`, `{"op":"=","args":[{"property":"x"},5.0]}`, cmp(x, Eq, decimal(5))},
		{`x = 1E-400`, `{"op":"=","args":[{"property":"x"},1E-400]}`, cmp(x, Eq, decimal(0))},
		{`x = +7`, `{"op":"=","args":[{"property":"x"},7]}`, cmp(x, Eq, integer(7))},
	} {
		got, err := ParseText(tc.text)
		if err != nil {
			t.Errorf("ParseText(%q): %v", tc.text, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseText(%q) = %s, want %s", tc.text, got, tc.want)
		}
		got, err = ParseJSON([]byte(tc.json))
		if err != nil {
			t.Errorf("ParseJSON(%s): %v", tc.json, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseJSON(%s) = %s, want %s", tc.json, got, tc.want)
		}
		roundTrip(t, tc.want)
	}
}

// roundTrip checks that e prints, as text and as JSON, to what parses back
// to e.
func roundTrip(t *testing.T, e Expr) {
	t.Helper()
	text := e.String()
	back, err := ParseText(text)
	if err != nil || !reflect.DeepEqual(back, e) {
		t.Fatalf("text round trip of %#v: %q → %#v, %v", e, text, back, err)
	}
	js := FormatJSON(e)
	back, err = ParseJSON([]byte(js))
	if err != nil || !reflect.DeepEqual(back, e) {
		t.Fatalf("JSON round trip of %#v: %s → %#v, %v", e, js, back, err)
	}
}

// TestPrint pins the text form of trees whose shape the printing must keep.
func TestPrint(t *testing.T) {
	x, y := prop("x"), prop("y")
	for _, tc := range []struct {
		e    Expr
		want string
	}{
		{and(or(cmp(x, Eq, integer(1)), cmp(y, Eq, integer(2))), cmp(x, Lt, decimal(3))), `(x = 1 OR y = 2) AND x < 3.0`},
		{or(and(cmp(x, Eq, integer(1)), cmp(y, Eq, integer(2))), BoolLit{false}), `(x = 1 AND y = 2) OR FALSE`},
		{not(and(cmp(x, Eq, integer(1)), BoolLit{true})), `NOT (x = 1 AND TRUE)`},
		{not(not(&Like{x, "a'b"})), `NOT x NOT LIKE 'a''b'`},
		{not(&IsNull{prop("IS")}), `"IS" IS NOT NULL`},
		{cmp(prop("a b"), Eq, decimal(1e21)), `"a b" = 1e+21`},
		{cmp(prop("e[1]x"), Eq, decimal(-2.5e-8)), `"e[1]x" = -2.5e-08`},
		{&In{prop("v[12]"), []Scalar{str("a"), integer(-3)}}, `v[12] IN ('a', -3)`},
	} {
		if got := tc.e.String(); got != tc.want {
			t.Errorf("String() = %s, want %s", got, tc.want)
		}
		roundTrip(t, tc.e)
	}
}

// TestPrintJSON pins the cql2-json form of every operator: the op and its
// args in order, lists nested, no white space.
func TestPrintJSON(t *testing.T) {
	t.Parallel()
	x, y := prop("x"), prop("y")
	for _, tc := range []struct {
		e    Expr
		want string
	}{
		{and(cmp(x, Eq, integer(1)), or(cmp(y, Gt, decimal(2.5)), BoolLit{true})),
			`{"op":"and","args":[{"op":"=","args":[{"property":"x"},1]},{"op":"or","args":[{"op":">","args":[{"property":"y"},2.5]},true]}]}`},
		{not(&IsNull{x}), `{"op":"not","args":[{"op":"isNull","args":[{"property":"x"}]}]}`},
		{&Between{x, integer(-1), decimal(3)}, `{"op":"between","args":[{"property":"x"},-1,3.0]}`},
		{&In{x, []Scalar{str("a"), integer(2)}}, `{"op":"in","args":[{"property":"x"},["a",2]]}`},
		{&In{x, nil}, `{"op":"in","args":[{"property":"x"},[]]}`},
		{&Like{prop("n"), "a%"}, `{"op":"like","args":[{"property":"n"},"a%"]}`},
	} {
		if got := FormatJSON(tc.e); got != tc.want {
			t.Errorf("FormatJSON(%s) =\n%s\nwant\n%s", tc.e, got, tc.want)
		}
	}
}

func TestParseLang(t *testing.T) {
	for _, lang := range []string{LangText, LangJSON} {
		src := `x = 1`
		if lang == LangJSON {
			src = `{"op":"=","args":[{"property":"x"},1]}`
		}
		e, err := Parse(lang, src)
		if err != nil || !reflect.DeepEqual(e, Expr(cmp(prop("x"), Eq, integer(1)))) {
			t.Errorf("Parse(%s): %v, %v", lang, e, err)
		}
	}
	_, err := Parse("cql-text", "x = 1")
	var fe *Error
	if !errors.As(err, &fe) || !strings.Contains(fe.Error(), `unknown filter language "cql-text"`) {
		t.Errorf("unknown language: %v", err)
	}
}

// TestSeventeenDigits: any float64, written with 17 significant digits in
// either encoding, is read back exactly, and an equality on a float64
// column finds it.
func TestSeventeenDigits(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 17))
	s := &Schema{Queryables: []Queryable{{Name: "x", Kind: Float, Bits: 64}}}
	for range 2000 {
		v := math.Float64frombits(r.Uint64())
		if math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		lit := strconv.FormatFloat(v, 'e', 16, 64)
		for _, src := range []string{`x = ` + lit, `{"op":"=","args":[{"property":"x"},` + lit + `]}`} {
			var e Expr
			var err error
			if src[0] == '{' {
				e, err = ParseJSON([]byte(src))
			} else {
				e, err = ParseText(src)
			}
			if err != nil {
				t.Fatalf("%s: %v", src, err)
			}
			if got := e.(*Compare).Right.(NumberLit).Float; got != v && !(got == 0 && v == 0) {
				t.Fatalf("%s read as %v, want %v", src, got, v)
			}
			f, err := Check(e, s)
			if err != nil {
				t.Fatal(err)
			}
			ev := f.NewEvaluator()
			if err := ev.Bind("x", floatCol("float64", 1, math.Nextafter(v, 0), v)); err != nil {
				t.Fatal(err)
			}
			out := make([]bool, 2)
			if err := ev.EvalRange(0, out); err != nil || out[0] == (v != 0) || !out[1] {
				t.Fatalf("%s over [%v, %v]: %v, %v", src, math.Nextafter(v, 0), v, out, err)
			}
		}
	}
}
