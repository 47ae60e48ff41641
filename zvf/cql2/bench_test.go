package cql2

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// benchEval times Eval (or Select) of src over rows of a float32 attribute
// a, a float32 attribute b and a categorical attribute c, reporting the
// cost per row.
func benchEval(b *testing.B, src string, sel bool, all bool) {
	const n = 1 << 16
	s := &Schema{Queryables: []Queryable{
		{Name: "a", Kind: Float, Bits: 32},
		{Name: "b", Kind: Float, Bits: 32},
		{Name: "c", Kind: Categorical, Labels: []string{"basket", "pyramidal", "stellate", "granule"}},
	}}
	r := rand.New(rand.NewPCG(1, 2))
	cols := map[string]Column{"a": {DType: "float32"}, "b": {DType: "float32"}, "c": {DType: "uint8"}}
	for _, name := range []string{"a", "b"} {
		c := cols[name]
		for range n {
			c.Data = binary.LittleEndian.AppendUint32(c.Data, math.Float32bits(r.Float32()*100))
		}
		cols[name] = c
	}
	c := cols["c"]
	for range n {
		c.Data = append(c.Data, byte(r.IntN(4)))
	}
	cols["c"] = c
	f := mustCheck(b, src, s)
	ev := f.NewEvaluator()
	for _, name := range f.Attributes() {
		if err := ev.Bind(name, cols[name]); err != nil {
			b.Fatal(err)
		}
	}
	// A box's match list: every other row, ascending.
	rows := make([]int32, 0, n)
	for i := 0; i < n; i += 2 {
		rows = append(rows, int32(i))
	}
	if all {
		rows = rows[:0]
		for i := range n {
			rows = append(rows, int32(i))
		}
	}
	out := make([]bool, len(rows))
	dst := make([]int32, 0, len(rows))
	b.ResetTimer()
	for b.Loop() {
		var err error
		if sel {
			dst, err = ev.Select(dst[:0], rows)
		} else {
			err = ev.Eval(rows, out)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(rows)), "ns/row")
}

func BenchmarkEvalCompare(b *testing.B) { benchEval(b, `a > 50`, false, false) }
func BenchmarkEvalBetween(b *testing.B) { benchEval(b, `a BETWEEN 25 AND 75`, false, false) }
func BenchmarkEvalAnd(b *testing.B)     { benchEval(b, `a > 50 AND b < 50`, false, false) }
func BenchmarkEvalCategorical(b *testing.B) {
	benchEval(b, `c IN ('pyramidal', 'granule')`, false, false)
}
func BenchmarkSelectCompare(b *testing.B) { benchEval(b, `a > 50`, true, false) }
func BenchmarkSelectAllRows(b *testing.B) { benchEval(b, `a > 50`, true, true) }

func BenchmarkParseText(b *testing.B) {
	src := `cell_type = 'pyramidal' AND (volume BETWEEN 2.5 AND 10 OR object_id IN (1, 2, 3)) AND NOT name LIKE 'a%'`
	for b.Loop() {
		if _, err := ParseText(src); err != nil {
			b.Fatal(err)
		}
	}
}
