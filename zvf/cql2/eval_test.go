package cql2

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// Little-endian column builders for tests.

func floatCol(dtype string, channels int, vals ...float64) Column {
	var b []byte
	for _, v := range vals {
		switch dtype {
		case "float32":
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(v)))
		case "float64":
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
		}
	}
	return Column{DType: dtype, Data: b, Channels: channels}
}

func intCol(dtype string, vals ...int64) Column {
	var b []byte
	for _, v := range vals {
		switch dtype {
		case "int8", "uint8", "bool":
			b = append(b, byte(v))
		case "int16", "uint16":
			b = binary.LittleEndian.AppendUint16(b, uint16(v))
		case "int32", "uint32":
			b = binary.LittleEndian.AppendUint32(b, uint32(v))
		case "int64", "uint64":
			b = binary.LittleEndian.AppendUint64(b, uint64(v))
		}
	}
	return Column{DType: dtype, Data: b}
}

// semanticsChunk is eight rows with every kind of value, nulls included.
type semanticsChunk struct {
	schema *Schema
	cols   map[string]Column
	ids    []int64
	groups *GroupSets
}

func newSemanticsChunk() semanticsChunk {
	var emb []float64
	for i := range 8 {
		for c := range 8 {
			emb = append(emb, float64(10*i+c))
		}
	}
	null := int64(-1)
	cat := intCol("int8", 0, 1, 2, -1, 7, 1, 0, 2)
	cat.Labels, cat.NullCode = []string{"basket", "pyramidal", "stellate"}, &null
	return semanticsChunk{
		schema: testSchema(),
		cols: map[string]Column{
			"size":      floatCol("float32", 1, 1, 2.5, math.NaN(), math.Inf(1), math.Inf(-1), float64(float32(0.1)), math.Copysign(0, -1), 3),
			"count":     intCol("int16", -3, 0, 1, 2, 32767, -32768, 5, 2),
			"flags":     intCol("uint8", 0, 1, 2, 255, 128, 7, 8, 9),
			"cell_type": cat,
			"name":      {Strings: []string{"a", "b%", "it's", "", "ab", "ba", "abc", "x"}},
			"embedding": floatCol("float64", 8, emb...),
		},
		ids:    []int64{10, 10, -1, 11, 12, -1, 13, 10},
		groups: NewGroupSets(map[int64][]int64{1: {10, 11}, 2: {12}}),
	}
}

// evaluator is an evaluator of f with the chunk's columns, object ids and
// groups bound.
func (c semanticsChunk) evaluator(f *Filter) (*Evaluator, error) {
	ev := f.NewEvaluator()
	for _, name := range f.Attributes() {
		if err := ev.Bind(name, c.cols[name]); err != nil {
			return nil, err
		}
	}
	ev.BindObjectIDs(c.ids, -1)
	ev.BindGroups(c.groups)
	return ev, nil
}

// selectAll runs f over every row of the chunk and returns the rows it
// passes, checking that Eval, EvalRange, Select and SelectRange agree.
func (c semanticsChunk) selectAll(t *testing.T, f *Filter) []int32 {
	t.Helper()
	ev, err := c.evaluator(f)
	if err != nil {
		t.Fatal(err)
	}
	rows := []int32{0, 1, 2, 3, 4, 5, 6, 7}
	sel, err := ev.SelectRange(nil, 0, 8)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]bool, 8)
	if err := ev.Eval(rows, out); err != nil {
		t.Fatal(err)
	}
	out2 := make([]bool, 8)
	if err := ev.EvalRange(0, out2); err != nil {
		t.Fatal(err)
	}
	inPlace := slices.Clone(rows)
	sel2, err := ev.Select(inPlace[:0], inPlace)
	if err != nil {
		t.Fatal(err)
	}
	var fromOut []int32
	for i, ok := range out {
		if ok {
			fromOut = append(fromOut, int32(i))
		}
	}
	if !slices.Equal(out, out2) || !slices.Equal(sel, sel2) || !slices.Equal(sel, fromOut) {
		t.Fatalf("%s: SelectRange %v, Select %v, Eval %v, EvalRange %v disagree", f, sel, sel2, out, out2)
	}
	return sel
}

// TestEvalSemantics pins the documented semantics on hand-checked rows:
// nulls, three-valued logic, exact integers, float32 widening, labels.
func TestEvalSemantics(t *testing.T) {
	c := newSemanticsChunk()
	all := []int32{0, 1, 2, 3, 4, 5, 6, 7}
	for _, tc := range []struct {
		src  string
		want []int32
	}{
		// size: 1, 2.5, NaN, +Inf, -Inf, float32(0.1), -0, 3
		{`size > 1`, []int32{1, 7}},
		{`size < 1`, []int32{5, 6}},
		{`NOT size > 1`, []int32{0, 5, 6}},
		{`size IS NULL`, []int32{2, 3, 4}},
		{`size IS NOT NULL`, []int32{0, 1, 5, 6, 7}},
		{`size = 0.1`, nil},
		{`size = 0.10000000149011612`, []int32{5}},
		{`size = 0`, []int32{6}},
		{`size BETWEEN 1 AND 2.5`, []int32{0, 1}},
		{`size NOT BETWEEN 1 AND 2.5`, []int32{5, 6, 7}},
		{`size BETWEEN 3 AND 1`, nil},
		{`size IN (1, 3, 7)`, []int32{0, 7}},
		{`size NOT IN (1, 3)`, []int32{1, 5, 6}},
		{`size <> 1`, []int32{1, 5, 6, 7}},
		{`1 < size`, []int32{1, 7}},
		{`size >= 1e300`, nil},
		// count (int16): -3, 0, 1, 2, 32767, -32768, 5, 2
		{`count < 2.5`, []int32{0, 1, 2, 3, 5, 7}},
		{`count <= 2`, []int32{0, 1, 2, 3, 5, 7}},
		{`count = 2.5`, nil},
		{`count <> 2.5`, all},
		{`count > -32769`, all},
		{`count > 1e300`, nil},
		{`count >= 32767`, []int32{4}},
		{`count = 32767.0`, []int32{4}},
		{`count BETWEEN -3 AND 1`, []int32{0, 1, 2}},
		{`count BETWEEN -3.5 AND 0.5`, []int32{0, 1}},
		{`count IN (2, 5, 99999)`, []int32{3, 6, 7}},
		{`count IS NULL`, nil},
		{`count IS NOT NULL`, all},
		{`-3 >= count`, []int32{0, 5}},
		// flags (uint8): 0, 1, 2, 255, 128, 7, 8, 9
		{`flags > 127`, []int32{3, 4}},
		{`flags < -1`, nil},
		{`flags >= -1`, all},
		{`flags IN (0, 9, 300, -2)`, []int32{0, 7}},
		// cell_type: basket, pyramidal, stellate, null code, code 7 (no label), pyramidal, basket, stellate
		{`cell_type = 'pyramidal'`, []int32{1, 5}},
		{`cell_type <> 'pyramidal'`, []int32{0, 2, 6, 7}},
		{`cell_type = 'granule'`, nil},
		{`cell_type <> 'granule'`, []int32{0, 1, 2, 5, 6, 7}},
		{`cell_type LIKE '%a%'`, []int32{0, 1, 2, 5, 6, 7}},
		{`cell_type LIKE 's_e%'`, []int32{2, 7}},
		{`cell_type LIKE 'Basket'`, nil},
		{`cell_type NOT LIKE 'b%'`, []int32{1, 2, 5, 7}},
		{`cell_type IS NULL`, []int32{3, 4}},
		{`cell_type IS NOT NULL`, []int32{0, 1, 2, 5, 6, 7}},
		{`cell_type < 'p'`, []int32{0, 6}},
		{`cell_type IN ('basket', 'stellate', 'nope')`, []int32{0, 2, 6, 7}},
		// name: a, b%, it's, "", ab, ba, abc, x
		{`name LIKE 'b\%'`, []int32{1}},
		{`name LIKE 'b%'`, []int32{1, 5}},
		{`name LIKE '%''%'`, []int32{2}},
		{`name = ''`, []int32{3}},
		{`name LIKE ''`, []int32{3}},
		{`name LIKE '%'`, all},
		{`name LIKE 'a%'`, []int32{0, 4, 6}},
		{`name LIKE '_b%'`, []int32{4, 6}},
		{`name LIKE '%b'`, []int32{4}},
		{`name LIKE '_'`, []int32{0, 7}},
		{`name >= 'b'`, []int32{1, 2, 5, 7}},
		{`name IS NULL`, nil},
		// embedding[c] of row i is 10i + c
		{`embedding[3] > 40`, []int32{4, 5, 6, 7}},
		{`embedding[0] BETWEEN 10 AND 30 AND embedding[7] < 20`, []int32{1}},
		// object ids: 10, 10, none, 11, 12, none, 13, 10; group 1 = {10, 11}, group 2 = {12}
		{`object_id = 10`, []int32{0, 1, 7}},
		{`object_id <> 10`, []int32{3, 4, 6}},
		{`object_id IS NULL`, []int32{2, 5}},
		{`object_id > 10.5`, []int32{3, 4, 6}},
		{`object_id IN (11, 13, 9223372036854775807)`, []int32{3, 6}},
		{`group = 1`, []int32{0, 1, 3, 7}},
		{`group <> 1`, []int32{4}},
		{`NOT (group = 1)`, []int32{4}},
		{`group IN (1, 2)`, []int32{0, 1, 3, 4, 7}},
		{`group NOT IN (2)`, []int32{0, 1, 3, 7}},
		{`group IS NULL`, []int32{2, 5, 6}},
		{`group IS NOT NULL`, []int32{0, 1, 3, 4, 7}},
		{`group = 3`, nil},
		// Three-valued logic.
		{`size > 1 OR size IS NULL`, []int32{1, 2, 3, 4, 7}},
		{`NOT (size > 1 AND count > 0)`, []int32{0, 1, 5, 6}},
		{`size > 1 OR cell_type = 'basket'`, []int32{0, 1, 6, 7}},
		{`NOT (size > 1 OR cell_type = 'basket')`, []int32{5}},
		{`NOT cell_type IS NULL AND NOT size IS NULL`, []int32{0, 1, 5, 6, 7}},
		{`TRUE`, all},
		{`FALSE`, nil},
		{`NOT FALSE AND count = 0`, []int32{1}},
		{`FALSE OR count = 0 OR TRUE AND name = 'x'`, []int32{1, 7}},
	} {
		for _, lang := range []string{LangText, LangJSON} {
			src := tc.src
			if lang == LangJSON {
				e, err := ParseText(src)
				if err != nil {
					t.Fatalf("%q: %v", src, err)
				}
				src = FormatJSON(e)
			}
			e, err := Parse(lang, src)
			if err != nil {
				t.Fatalf("%q: %v", src, err)
			}
			f, err := Check(e, c.schema)
			if err != nil {
				t.Fatalf("%q: %v", src, err)
			}
			if got := c.selectAll(t, f); !slices.Equal(got, tc.want) {
				t.Errorf("%s %s: rows %v, want %v", lang, src, got, tc.want)
			}
		}
	}
}

func mustCheck(t testing.TB, src string, s *Schema) *Filter {
	t.Helper()
	e, err := ParseText(src)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Check(e, s)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestMayMatch: a filter that no row can pass is told before rows are
// read, from dictionaries and constant columns; one that some row passes
// is never ruled out.
func TestMayMatch(t *testing.T) {
	s := testSchema()
	for _, tc := range []struct {
		src  string
		want bool
	}{
		{`cell_type = 'granule'`, false},
		{`cell_type = 'pyramidal'`, true},
		{`NOT cell_type = 'granule'`, true},
		{`cell_type IN ('granule', 'x')`, false},
		{`cell_type LIKE 'z%'`, false},
		{`cell_type LIKE 'z%' OR size > 1`, true},
		{`cell_type LIKE 'z%' AND size > 1`, false},
		{`cell_type IS NULL`, true}, // a code may lack a label
		{`FALSE`, false},
		{`count > 40000`, false}, // int16
		{`count > 40000 OR object_id = 1`, true},
		{`group = 1 AND NOT (cell_type <> 'nope')`, false},
	} {
		f := mustCheck(t, tc.src, s)
		if got := f.NewEvaluator().MayMatch(); got != tc.want {
			t.Errorf("%s: MayMatch() = %v, want %v", tc.src, got, tc.want)
		}
	}

	// A chunk of an attribute-chunked level: size is 5 for every row.
	f := mustCheck(t, `size > 10 OR cell_type = 'pyramidal'`, s)
	ev := f.NewEvaluator()
	c := floatCol("float32", 1, 5)
	c.Constant = true
	if err := ev.Bind("size", c); err != nil {
		t.Fatal(err)
	}
	if !ev.MayMatch() {
		t.Errorf("constant size 5: pyramidal is still possible")
	}
	code := intCol("uint8", 0) // basket for every row
	code.Constant = true
	if err := ev.Bind("cell_type", code); err != nil {
		t.Fatal(err)
	}
	if ev.MayMatch() {
		t.Errorf("constant size 5, constant basket: MayMatch() = true")
	}
	out := make([]bool, 3)
	if err := ev.EvalRange(0, out); err != nil || !slices.Equal(out, []bool{false, false, false}) {
		t.Errorf("constant columns: %v, %v", out, err)
	}
	c = floatCol("float32", 1, 11)
	c.Constant = true
	if err := ev.Bind("size", c); err != nil {
		t.Fatal(err)
	}
	if !ev.MayMatch() {
		t.Errorf("constant size 11: MayMatch() = false")
	}
	if err := ev.EvalRange(5, out); err != nil || !slices.Equal(out, []bool{true, true, true}) {
		t.Errorf("constant size 11: %v, %v", out, err)
	}

	// A chunk's own dictionary replaces the queryable's labels.
	f = mustCheck(t, `cell_type = 'granule'`, s)
	ev = f.NewEvaluator()
	if ev.MayMatch() {
		t.Fatal("granule matched before its dictionary was bound")
	}
	dict := Column{DType: "uint8", Labels: []string{"granule"}}
	if err := ev.Bind("cell_type", dict); err != nil {
		t.Fatal(err)
	}
	if !ev.MayMatch() {
		t.Error("granule is in the bound dictionary")
	}
}

// TestBindErrors: the caller's mistakes are plain errors, never panics.
func TestBindErrors(t *testing.T) {
	s := testSchema()
	f := mustCheck(t, `size > 1 AND count = 2 AND embedding[1] < 3 AND cell_type = 'a' AND flags = 1 AND name = 'x'`, s)
	for _, tc := range []struct {
		name string
		col  Column
		msg  string
	}{
		{"size", intCol("int32", 1), `cql2: float attribute "size" bound with int32 data`},
		{"size", floatCol("float64", 1, 1), `cql2: float32 attribute "size" bound with float64 data`},
		{"size", Column{DType: "float32", Data: []byte{1, 2, 3}}, `cql2: attribute "size" bound with 3 bytes, not a whole number of 4-byte rows`},
		{"size", Column{DType: "complex64", Data: nil}, `cql2: attribute "size" bound with data type "complex64"`},
		{"count", intCol("uint16", 1), `cql2: int attribute "count" bound with uint16 data`},
		{"flags", intCol("int8", 1), `cql2: uint attribute "flags" bound with int8 data`},
		{"embedding", floatCol("float64", 4, 1, 2, 3, 4), `cql2: attribute "embedding" bound with 4 channels, its queryable has 8`},
		{"cell_type", floatCol("float32", 1, 1), `cql2: categorical attribute "cell_type" bound with float32 codes`},
		{"size", Column{DType: "float32", Data: make([]byte, 8), Constant: true}, `cql2: constant attribute "size" bound with 2 rows, not 1`},
		{"name", Column{Strings: []string{"a", "b"}, Constant: true}, `cql2: constant attribute "name" bound with 2 strings, not 1`},
	} {
		err := f.NewEvaluator().Bind(tc.name, tc.col)
		var fe *Error
		if err == nil || errors.As(err, &fe) || err.Error() != tc.msg {
			t.Errorf("Bind(%s): %v, want %q", tc.name, err, tc.msg)
		}
	}

	ev := f.NewEvaluator()
	out := make([]bool, 2)
	if err := ev.Eval([]int32{0}, out); err == nil || err.Error() != `cql2: attribute "size" is not bound` {
		t.Errorf("unbound: %v", err)
	}
	c := newSemanticsChunk()
	for _, name := range f.Attributes() {
		if err := ev.Bind(name, c.cols[name]); err != nil {
			t.Fatal(err)
		}
	}
	if err := ev.Bind("unused", Column{}); err != nil {
		t.Errorf("binding an attribute the filter does not use: %v", err)
	}
	if err := ev.Eval([]int32{0, 8}, out); err == nil || err.Error() != `cql2: row 8 is outside the 8 rows bound` {
		t.Errorf("row 8: %v", err)
	}
	if err := ev.Eval([]int32{-1}, out); err == nil || err.Error() != `cql2: row -1 is outside the 8 rows bound` {
		t.Errorf("row -1: %v", err)
	}
	if _, err := ev.SelectRange(nil, 7, 2); err == nil {
		t.Errorf("SelectRange past the end: no error")
	}
	if err := ev.EvalRange(-1, out); err == nil {
		t.Errorf("EvalRange(-1): no error")
	}
	if err := ev.Eval([]int32{0, 1, 2}, out); err == nil {
		t.Errorf("Eval of 3 rows into 2: no error")
	}
	if err := ev.Eval([]int32{0, 7}, out); err != nil {
		t.Errorf("rows in range: %v", err)
	}

	g := mustCheck(t, `group = 1`, s).NewEvaluator()
	if err := g.EvalRange(0, out); err == nil || err.Error() != `cql2: object ids are not bound` {
		t.Errorf("ids unbound: %v", err)
	}
	g.BindObjectIDs([]int64{1, 2}, -1)
	if err := g.EvalRange(0, out); err == nil || err.Error() != `cql2: groups are not bound` {
		t.Errorf("groups unbound: %v", err)
	}
	g.BindGroups(NewGroupSets(nil))
	if err := g.EvalRange(1, out); err == nil || err.Error() != `cql2: row 2 is outside the 2 rows bound` {
		t.Errorf("past the ids: %v", err)
	}
}

// TestAttributes: what a filter needs bound.
func TestAttributes(t *testing.T) {
	s := testSchema()
	for _, tc := range []struct {
		src         string
		attrs       []string
		ids, groups bool
	}{
		{`size > 1 AND (cell_type = 'a' OR size < 0) AND embedding[2] = 1 AND embedding[5] = 2`, []string{"size", "cell_type", "embedding"}, false, false},
		{`count IS NULL OR object_id = 3`, []string{}, true, false},
		{`group = 1 AND name LIKE 'a%'`, []string{"name"}, true, true},
	} {
		f := mustCheck(t, tc.src, s)
		if got := f.Attributes(); !reflect.DeepEqual(got, tc.attrs) || f.NeedsObjectIDs() != tc.ids || f.NeedsGroups() != tc.groups {
			t.Errorf("%s: %v ids %v groups %v, want %v %v %v", tc.src, got, f.NeedsObjectIDs(), f.NeedsGroups(), tc.attrs, tc.ids, tc.groups)
		}
		e, _ := ParseText(tc.src)
		if f.String() != e.String() || !reflect.DeepEqual(f.Expr(), e) {
			t.Errorf("String() = %s, want %s", f.String(), e)
		}
	}
}

// TestEvalNoAlloc: a warm evaluation allocates nothing.
func TestEvalNoAlloc(t *testing.T) {
	c := newSemanticsChunk()
	f := mustCheck(t, `size > 1 AND cell_type LIKE 'p%' OR name = 'x' OR group = 1 OR embedding[2] < 40`, c.schema)
	ev, err := c.evaluator(f)
	if err != nil {
		t.Fatal(err)
	}
	rows := []int32{0, 1, 2, 3, 4, 5, 6, 7}
	out := make([]bool, 8)
	dst := make([]int32, 0, 8)
	if err := ev.Eval(rows, out); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() {
		_ = ev.Eval(rows, out)
		_ = ev.EvalRange(0, out)
		dst, _ = ev.Select(dst[:0], rows)
		for _, name := range []string{"cell_type", "size"} {
			_ = ev.Bind(name, c.cols[name])
		}
	}); n != 0 {
		t.Errorf("%v allocations per evaluation", n)
	}
}

// TestCombine: the word-at-a-time AND, OR and all-decided checks agree
// with three-valued min and max, at every length around a word.
func TestCombine(t *testing.T) {
	vals := []uint8{vFalse, vUnknown, vTrue}
	r := rand.New(rand.NewPCG(3, 4))
	for n := range 40 {
		for range 50 {
			a, b := make([]uint8, n), make([]uint8, n)
			for i := range a {
				a[i], b[i] = vals[r.IntN(3)], vals[r.IntN(3)]
				if r.IntN(4) == 0 { // runs of one value, so that the all-decided checks are met
					a[i], b[i] = vals[n%3], vals[n%3]
				}
			}
			and, or := slices.Clone(a), slices.Clone(a)
			andInto(and, b)
			orInto(or, b)
			allF, allT := true, true
			for i := range a {
				if and[i] != min(a[i], b[i]) || or[i] != max(a[i], b[i]) {
					t.Fatalf("%v, %v: AND %v, OR %v", a, b, and, or)
				}
				allF = allF && a[i] == vFalse
				allT = allT && a[i] == vTrue
			}
			if allFalse(a) != allF || allTrue(a) != allT {
				t.Fatalf("%v: allFalse %v, allTrue %v", a, allFalse(a), allTrue(a))
			}
		}
		// Uniform rows, and uniform but for one.
		for _, v := range vals {
			a := slices.Repeat([]uint8{v}, n)
			if allFalse(a) != (v == vFalse || n == 0) || allTrue(a) != (v == vTrue || n == 0) {
				t.Fatalf("%v: allFalse %v, allTrue %v", a, allFalse(a), allTrue(a))
			}
			for i := range a {
				for _, w := range vals {
					if w == v {
						continue
					}
					a[i] = w
					if (v == vFalse && allFalse(a)) || (v == vTrue && allTrue(a)) {
						t.Fatalf("%v: allFalse %v, allTrue %v", a, allFalse(a), allTrue(a))
					}
					a[i] = v
				}
			}
		}
	}
}

func TestProperties(t *testing.T) {
	e, err := ParseText(`NOT (b = 1 OR "a x" IN (1, c)) AND b BETWEEN d AND 2 AND e LIKE 'x' AND f IS NULL AND TRUE AND 1 < g[2]`)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := Properties(e), []string{"a x", "b", "c", "d", "e", "f", "g[2]"}; !slices.Equal(got, want) {
		t.Errorf("Properties = %q, want %q", got, want)
	}
}

// TestConcurrentEvaluators: one Filter serves evaluators on several
// goroutines (run with -race).
func TestConcurrentEvaluators(t *testing.T) {
	c := newSemanticsChunk()
	f := mustCheck(t, `size > 1 OR cell_type LIKE 's%' OR name = 'x' OR group = 2 OR embedding[2] < 20`, c.schema)
	want := c.selectAll(t, f)
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			ev, err := c.evaluator(f)
			if err != nil {
				errs <- err
				return
			}
			for range 100 {
				got, err := ev.SelectRange(nil, 0, 8)
				if err != nil || !slices.Equal(got, want) {
					errs <- fmt.Errorf("rows %v, want %v (%v)", got, want, err)
					return
				}
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
