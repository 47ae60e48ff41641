package zvf_test

import (
	"context"
	"fmt"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/cql2"
)

// TestFilterLiteralEdges: comparisons of every numeric property with
// literals at the edges of the types' ranges and of float64 (beyond 2⁶⁴,
// at ±2⁶³, halves, negative zero, the float32 and float16 maxima), in
// both encodings, keep exactly the rows docs/filters.md's rules keep
// (integer spellings exactly, others as their float64), in the answer,
// the count and the density.
func TestFilterLiteralEdges(t *testing.T) {
	t.Parallel()
	ts, err := typesStores()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l, _ := ts["types"].Level(0)
	box := [2][]float64{{0, 0, 0}, {100, 100, 100}}
	all := emptyCols(wholeSel(t, l, box[0], box[1], zvf.Selection{}))
	tb := tableOf(t, l, all)
	lits := []string{"-1", "0", "-0", "-0.0", "1", "0.5", "-0.5", "255", "255.5", "256", "-128", "-128.5", "-129",
		"18446744073709551615", "18446744073709551616", "1.8446744073709552e19", "18446744073709551614.5",
		"9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
		"9.223372036854775807e18", "-9.223372036854775808e18", "1152921504606846976", "-9007199254740993",
		"1e300", "-1e300", "5e-324", "3.4028234663852886e38", "65504", "65520", "1e-8", "100", "99.5"}
	ops := []string{"=", "<>", "<", "<=", ">", ">="}
	shape := []int{4, 4, 4}
	for k, p := range tb.props {
		if p.kind != 'n' && p.kind != 'o' {
			continue
		}
		get := func(r int) tval {
			if p.kind == 'o' {
				if tb.ids[r] < 0 {
					return tval{null: true}
				}
				return tval{num: bigInt(tb.ids[r])}
			}
			return tb.cols[k][r]
		}
		for _, ls := range lits {
			lv := numLit(ls)
			for _, op := range ops {
				text := fmt.Sprintf("%s %s %s", quoteName(p.name), op, ls)
				js := fmt.Sprintf(`{"op":%q,"args":[{"property":%s},%s]}`, op, jsonStr(p.name), ls)
				keep := make([]bool, tb.n)
				for r := range keep {
					v := get(r)
					if v.null {
						continue
					}
					c := v.num.Cmp(lv.val)
					keep[r] = map[string]bool{"=": c == 0, "<>": c != 0, "<": c < 0, "<=": c <= 0, ">": c > 0, ">=": c >= 0}[op]
				}
				for _, enc := range []string{cql2.LangText, cql2.LangJSON} {
					src := text
					if enc == cql2.LangJSON {
						src = js
					}
					e, err := cql2.Parse(enc, src)
					if err != nil {
						t.Fatalf("%s: %v", src, err)
					}
					sel := zvf.Selection{Filter: e}
					want := restrict(all, tb, keep)
					got := emptyCols(wholeSel(t, l, box[0], box[1], sel))
					sameAnswer(t, src, got, want)
					n, err := l.Count(ctx, zvf.CountQuery{Min: box[0], Max: box[1], Selection: sel})
					if err != nil || n != int64(len(want.verts)/12) {
						t.Fatalf("%s: count %d (%v), want %d", src, n, err, len(want.verts)/12)
					}
					d, err := l.Density(ctx, zvf.DensityQuery{Min: box[0], Max: box[1], Shape: shape, Selection: sel})
					if err != nil {
						t.Fatal(err)
					}
					if wd := densityOracle(tb, keep, box[0], box[1], shape); fmt.Sprint(d) != fmt.Sprint(wd) {
						t.Fatalf("%s: density differs", src)
					}
				}
			}
		}
	}
}

func quoteName(s string) string {
	if strings.ContainsAny(s, "[") {
		return s
	}
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

func bigInt(i int64) *big.Float { return new(big.Float).SetInt64(i) }

// TestSelectionRandomBoxes: the brute-force comparison of
// TestSelectionMatchesBruteForce over random boxes (cutting chunks and
// bins anywhere, inside one bin, past the store, empty) and density
// grids (cells finer and coarser than bins), with and without a cache.
func TestSelectionRandomBoxes(t *testing.T) {
	t.Parallel()
	ts, err := typesStores()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, name := range []string{"types", "plain", "types-nocache", "plain-nocache"} {
		s := ts[name]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := rand.New(rand.NewPCG(7, uint64(len(name))))
			for _, lv := range s.Levels() {
				l, _ := s.Level(lv)
				for bi := 0; bi < 12; bi++ {
					var lo, hi [3]float64
					for a := range 3 {
						x, y := r.Float64()*120-10, r.Float64()*120-10
						if r.IntN(3) == 0 {
							x, y = float64(r.IntN(9))*12.5, float64(r.IntN(9))*12.5
						}
						if r.IntN(4) == 0 {
							y = x + r.Float64()*3
						}
						lo[a], hi[a] = min(x, y), max(x, y)
					}
					box := [2][]float64{lo[:], hi[:]}
					shape := []int{1 + r.IntN(20), 1 + r.IntN(6), 1 + r.IntN(3)}
					all := emptyCols(wholeSel(t, l, box[0], box[1], zvf.Selection{}))
					tb := tableOf(t, l, all)
					for _, c := range selections(t, tb, uint64(1000*lv+bi), 16) {
						checkSelection(t, ctx, l, fmt.Sprintf("level %d box %v %s", lv, box, c.what), box, shape, all, tb, c)
					}
				}
			}
		})
	}
}
