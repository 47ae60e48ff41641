package cql2_test

import (
	"testing"

	"github.com/zvfserve/zvfserve/zvf/cql2"
)

// TestMayMatchNullCode: a categorical queryable's null code is null
// before any column is bound, as after: a filter only its label could
// pass is ruled out (the level is not read), and IS NULL is not.
func TestMayMatchNullCode(t *testing.T) {
	null := int64(1)
	s := &cql2.Schema{Queryables: []cql2.Queryable{{Name: "c", Kind: cql2.Categorical, Labels: []string{"a", "none", "c"}, NullCode: &null}}}
	for _, tc := range []struct {
		src  string
		want bool
	}{
		{`c = 'none'`, false},
		{`c IN ('none', 'zzz')`, false},
		{`c LIKE 'no%'`, false},
		{`c = 'a'`, true},
		{`c IS NULL`, true},
		{`NOT c = 'none'`, true},
	} {
		e, err := cql2.ParseText(tc.src)
		if err != nil {
			t.Fatal(err)
		}
		f, err := cql2.Check(e, s)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.NewEvaluator().MayMatch(); got != tc.want {
			t.Errorf("%s: MayMatch() = %v, want %v", tc.src, got, tc.want)
		}
		// Bound as the reader binds it, the answer is the same.
		ev := f.NewEvaluator()
		if err := ev.Bind("c", cql2.Column{DType: "uint8", Data: []byte{0, 1, 2}, Labels: s.Queryables[0].Labels, NullCode: &null}); err != nil {
			t.Fatal(err)
		}
		if got := ev.MayMatch(); got != tc.want {
			t.Errorf("%s bound: MayMatch() = %v, want %v", tc.src, got, tc.want)
		}
	}
}

// TestBoolCodesAreBytes: a bool attribute is 0 or 1, any byte but 0
// being 1; a dictionary's codes stored as bool bytes are the bytes
// themselves (code 2 is label 2), as the answers label them.
func TestBoolCodesAreBytes(t *testing.T) {
	s := &cql2.Schema{Queryables: []cql2.Queryable{
		{Name: "flag", Kind: cql2.Uint},
		{Name: "c", Kind: cql2.Categorical, Labels: []string{"a", "b", "c"}},
	}}
	data := []byte{0, 1, 2, 255}
	for _, tc := range []struct {
		src  string
		want []bool
	}{
		{`flag = 1`, []bool{false, true, true, true}},
		{`flag = 2`, []bool{false, false, false, false}},
		{`c = 'c'`, []bool{false, false, true, false}},
		{`c IS NULL`, []bool{false, false, false, true}},
	} {
		e, err := cql2.ParseText(tc.src)
		if err != nil {
			t.Fatal(err)
		}
		f, err := cql2.Check(e, s)
		if err != nil {
			t.Fatal(err)
		}
		ev := f.NewEvaluator()
		for _, name := range f.Attributes() {
			if err := ev.Bind(name, cql2.Column{DType: "bool", Data: data}); err != nil {
				t.Fatal(err)
			}
		}
		got := make([]bool, len(data))
		if err := ev.EvalRange(0, got); err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s: %v, want %v", tc.src, got, tc.want)
				break
			}
		}
	}
}
