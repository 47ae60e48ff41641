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
