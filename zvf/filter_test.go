package zvf_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/cql2"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/writer"
	"github.com/zvfserve/zvfserve/zvf/zarr"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// The selection tests compare the reader's filtered, sampled, counted and
// binned answers with a brute-force evaluation of the unfiltered answer:
// filters are generated here in both encodings from a small tree of this
// file's own, evaluated by this file's own three-valued oracle (exact
// numbers through math/big, LIKE through regexp), never through cql2's
// evaluator.

// tval is one row's value of a property.
type tval struct {
	null bool
	num  *big.Float // numbers, exactly
	s    string     // labels
}

// tprop is a property a filter may name.
type tprop struct {
	name  string
	kind  byte // 'n' number, 's' label, 'o' object_id, 'g' group
	isInt bool
}

// table is an answer's rows as the oracle reads them.
type table struct {
	props  []tprop
	cols   [][]tval // per property (nil for object_id and group)
	ids    []int64  // per row; nil without objects
	groups map[int64][]int64
	ngroup int
	n      int
	dims   int
	verts  []byte
}

// tableOf reads the unfiltered answer f of level l (all attributes).
func tableOf(t *testing.T, l *zvf.Level, f *flat) *table {
	t.Helper()
	d := l.Dims()
	tb := &table{n: len(f.verts) / (4 * d), dims: d, verts: f.verts}
	info := l.Info()
	for k, a := range info.VertexAttributes {
		if a.Name == "object_id" || a.Name == "group" {
			continue
		}
		var data []byte
		if k < len(f.attrs) {
			data = f.attrs[k] // an answer without rows has no columns
		}
		dt, err := zarr.ParseDataType(a.DType)
		if err != nil {
			t.Fatalf("attribute %s: %v", a.Name, err)
		}
		size := dt.Size
		ch := max(a.Channels, 1)
		if len(data) != tb.n*ch*size {
			t.Fatalf("attribute %s: %d bytes for %d rows × %d × %d", a.Name, len(data), tb.n, ch, size)
		}
		for c := 0; c < ch; c++ {
			name := a.Name
			if ch > 1 {
				name = fmt.Sprintf("%s[%d]", a.Name, c)
			}
			p := tprop{name: name, kind: 'n'}
			if a.Categories != nil {
				p.kind = 's'
			}
			col := make([]tval, tb.n)
			for r := 0; r < tb.n; r++ {
				// Bytes to numbers through zarr's one decoder, not cql2's
				// gathers: the oracle stays independent of the evaluator.
				var v tval
				switch x := dt.At(data, r*ch+c); x.Kind {
				case zarr.KindFloat:
					if math.IsNaN(x.F) || math.IsInf(x.F, 0) {
						v.null = true
					} else {
						v.num = new(big.Float).SetFloat64(x.F)
					}
				case zarr.KindInt:
					v.num = new(big.Float).SetInt64(x.I)
					p.isInt = true
				default:
					if dt.Kind == zarr.KindBool && x.U != 0 {
						x.U = 1 // a bool is 0 or 1
					}
					v.num = new(big.Float).SetUint64(x.U)
					p.isInt = true
				}
				if a.Categories != nil {
					code, _ := v.num.Uint64()
					if v.num.Sign() < 0 || code >= uint64(len(a.Categories)) {
						v = tval{null: true}
					} else {
						v = tval{s: a.Categories[code]}
					}
				}
				col[r] = v
			}
			tb.props = append(tb.props, p)
			tb.cols = append(tb.cols, col)
		}
	}
	if info.ObjectCount > 0 {
		tb.ids = f.ids
		if len(tb.ids) != tb.n {
			t.Fatalf("%d object ids for %d rows", len(tb.ids), tb.n)
		}
		tb.props = append(tb.props, tprop{name: "object_id", kind: 'o', isInt: true})
		tb.cols = append(tb.cols, nil)
	}
	if info.GroupCount > 0 {
		tb.groups = map[int64][]int64{}
		tb.ngroup = int(info.GroupCount)
		for g := int64(0); g < info.GroupCount; g++ {
			ids, err := l.Group(context.Background(), g)
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range ids {
				tb.groups[id] = append(tb.groups[id], g)
			}
		}
		tb.props = append(tb.props, tprop{name: "group", kind: 'g'})
		tb.cols = append(tb.cols, nil)
	}
	return tb
}

// Three-valued logic: false, unknown, true; AND is the minimum, OR the
// maximum, NOT the mirror.
const (
	vF int8 = 0
	vU int8 = 1
	vT int8 = 2
)

// gx is a generated filter: its text and JSON encodings and its meaning.
type gx struct {
	text, json string
	eval       func(row int) int8
}

// lit is a numeric literal: its spelling and its value as CQL2 reads it
// (an integer spelling exactly, any other the nearest float64).
type lit struct {
	text string
	val  *big.Float
}

func numLit(text string) lit {
	if !strings.ContainsAny(text, ".eE") {
		v, ok := new(big.Int).SetString(text, 10)
		if !ok {
			panic(text)
		}
		if new(big.Int).Abs(v).IsUint64() { // held exactly to 64 bits, else read as float64
			return lit{text, new(big.Float).SetInt(v)}
		}
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil {
		panic(err)
	}
	return lit{text, new(big.Float).SetFloat64(f)}
}

func tbool(b bool) int8 {
	if b {
		return vT
	}
	return vF
}

func not3(v int8) int8 { return 2 - v }

func quoteText(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func jsonStr(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// likeRegexp is the oracle's LIKE: % any run, _ one character, \ the
// next character literally; the whole value, case-sensitive.
func likeRegexp(pat string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString(`(?s)^`)
	rs := []rune(pat)
	for i := 0; i < len(rs); i++ {
		switch c := rs[i]; c {
		case '%':
			b.WriteString(".*")
		case '_':
			b.WriteString(".")
		case '\\':
			i++
			b.WriteString(regexp.QuoteMeta(string(rs[i])))
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}

// gen generates filters over a table's properties, with literals drawn
// from its values.
type gen struct {
	r  *rand.Rand
	tb *table
}

func (g *gen) name(p tprop) (text, js string) {
	js = `{"property":` + jsonStr(p.name) + `}`
	if g.r.IntN(4) == 0 {
		return `"` + strings.ReplaceAll(p.name, `"`, `""`) + `"`, js
	}
	return p.name, js
}

// value returns a non-null value of property p (column index k) from a
// random row, if there is one.
func (g *gen) value(k int) (tval, bool) {
	col := g.tb.cols[k]
	for range 8 {
		if g.tb.n == 0 {
			break
		}
		if v := col[g.r.IntN(g.tb.n)]; !v.null {
			return v, true
		}
	}
	return tval{}, false
}

// number is a literal for numeric property k: a value some row has (as
// its exact spelling), a neighbour of one, or a random number.
func (g *gen) number(k int) lit {
	p := g.tb.props[k]
	var base *big.Float
	switch p.kind {
	case 'o':
		if g.tb.n > 0 && g.r.IntN(4) > 0 {
			if id := g.tb.ids[g.r.IntN(g.tb.n)]; id >= 0 {
				base = new(big.Float).SetInt64(id)
			}
		}
	default:
		if v, ok := g.value(k); ok && g.r.IntN(4) > 0 {
			base = v.num
		}
	}
	if base == nil {
		x := g.r.NormFloat64() * math.Pow(10, float64(g.r.IntN(6)))
		if p.isInt && g.r.IntN(2) == 0 {
			return numLit(strconv.FormatInt(int64(x), 10))
		}
		return numLit(strconv.FormatFloat(x, 'g', -1, 64))
	}
	if p.isInt {
		i, _ := base.Int(nil)
		switch g.r.IntN(4) {
		case 0:
			i.Add(i, big.NewInt(int64(g.r.IntN(3)-1)))
		case 1: // a half: exactness against integers
			f, _ := base.Float64()
			return numLit(strconv.FormatFloat(f+0.5, 'g', -1, 64))
		}
		return numLit(i.String())
	}
	f, _ := base.Float64()
	if g.r.IntN(4) == 0 {
		f = math.Nextafter(f, math.Inf(g.r.IntN(2)*2-1))
	}
	return numLit(strconv.FormatFloat(f, 'g', -1, 64))
}

// label is a string literal for label property k.
func (g *gen) label(k int) string {
	if v, ok := g.value(k); ok && g.r.IntN(5) > 0 {
		return v.s
	}
	return []string{"", "zzz", "Pyramidal", "a", "it's"}[g.r.IntN(5)]
}

// pattern is a LIKE pattern matching some labels of property k.
func (g *gen) pattern(k int) string {
	s := g.label(k)
	var b strings.Builder
	for i, c := range []rune(s) {
		switch {
		case g.r.IntN(5) == 0:
			b.WriteByte('_')
		case i > 0 && g.r.IntN(6) == 0:
			b.WriteByte('%')
			return b.String()
		case c == '%' || c == '_' || c == '\\':
			b.WriteByte('\\')
			b.WriteRune(c)
		default:
			b.WriteRune(c)
		}
	}
	if g.r.IntN(3) == 0 {
		b.WriteByte('%')
	}
	return b.String()
}

func (g *gen) expr(depth int) gx {
	switch x := g.r.IntN(20); {
	case depth < 3 && x < 7:
		n := 2 + g.r.IntN(2)
		args := make([]gx, n)
		for i := range args {
			args[i] = g.expr(depth + 1)
		}
		op, jop := " AND ", "and"
		and := x < 4
		if !and {
			op, jop = " OR ", "or"
		}
		var texts, jsons []string
		for _, a := range args {
			texts = append(texts, "("+a.text+")")
			jsons = append(jsons, a.json)
		}
		return gx{text: strings.Join(texts, op), json: `{"op":"` + jop + `","args":[` + strings.Join(jsons, ",") + `]}`,
			eval: func(r int) int8 {
				v := args[0].eval(r)
				for _, a := range args[1:] {
					if and {
						v = min(v, a.eval(r))
					} else {
						v = max(v, a.eval(r))
					}
				}
				return v
			}}
	case depth < 3 && x < 9:
		a := g.expr(depth + 1)
		return gx{text: "NOT (" + a.text + ")", json: `{"op":"not","args":[` + a.json + `]}`, eval: func(r int) int8 { return not3(a.eval(r)) }}
	case x == 19:
		b := g.r.IntN(2) == 0
		return gx{text: strings.ToUpper(strconv.FormatBool(b)), json: strconv.FormatBool(b), eval: func(int) int8 { return tbool(b) }}
	}
	return g.leaf()
}

// negate wraps a leaf's positive form: text uses the NOT form given, JSON
// a not around the positive.
func negate(pos gx, text string) gx {
	return gx{text: text, json: `{"op":"not","args":[` + pos.json + `]}`, eval: func(r int) int8 { return not3(pos.eval(r)) }}
}

func (g *gen) leaf() gx {
	k := g.r.IntN(len(g.tb.props))
	p := g.tb.props[k]
	pt, pj := g.name(p)
	tb := g.tb
	// get is the row's value of p (object_id: its object).
	get := func(r int) tval {
		if p.kind == 'o' {
			if tb.ids[r] < 0 {
				return tval{null: true}
			}
			return tval{num: new(big.Float).SetInt64(tb.ids[r])}
		}
		return tb.cols[k][r]
	}
	isNull := func() gx {
		pos := gx{text: pt + " IS NULL", json: `{"op":"isNull","args":[` + pj + `]}`}
		if p.kind == 'g' {
			pos.eval = func(r int) int8 { return tbool(tb.ids[r] < 0 || len(tb.groups[tb.ids[r]]) == 0) }
		} else {
			pos.eval = func(r int) int8 { return tbool(get(r).null) }
		}
		if g.r.IntN(2) == 0 {
			return negate(pos, pt+" IS NOT NULL")
		}
		return pos
	}
	if g.r.IntN(8) == 0 {
		return isNull()
	}
	if p.kind == 'g' {
		grp := func() int64 { return int64(g.r.IntN(tb.ngroup + 1)) }
		member := func(r int, gs []int64) int8 {
			id := int64(-1)
			if r < len(tb.ids) {
				id = tb.ids[r]
			}
			if id < 0 || len(tb.groups[id]) == 0 {
				return vU
			}
			for _, x := range gs {
				if slices.Contains(tb.groups[id], x) {
					return vT
				}
			}
			return vF
		}
		switch g.r.IntN(3) {
		case 0:
			x := grp()
			ne := g.r.IntN(2) == 0
			op := "="
			if ne {
				op = "<>"
			}
			return gx{text: fmt.Sprintf("%s %s %d", pt, op, x), json: fmt.Sprintf(`{"op":%q,"args":[%s,%d]}`, op, pj, x),
				eval: func(r int) int8 {
					v := member(r, []int64{x})
					if ne {
						v = not3(v)
					}
					return v
				}}
		default:
			gs := []int64{grp(), grp()}
			list := fmt.Sprintf("%d, %d", gs[0], gs[1])
			pos := gx{text: pt + " IN (" + list + ")", json: fmt.Sprintf(`{"op":"in","args":[%s,[%s]]}`, pj, list), eval: func(r int) int8 { return member(r, gs) }}
			if g.r.IntN(3) == 0 {
				return negate(pos, pt+" NOT IN ("+list+")")
			}
			return pos
		}
	}
	ops := []string{"=", "<>", "<", "<=", ">", ">="}
	if p.kind == 's' {
		cmp := func(v tval, op, s string) int8 {
			if v.null {
				return vU
			}
			c := strings.Compare(v.s, s)
			return tbool(map[string]bool{"=": c == 0, "<>": c != 0, "<": c < 0, "<=": c <= 0, ">": c > 0, ">=": c >= 0}[op])
		}
		switch g.r.IntN(4) {
		case 0, 1:
			op, s := ops[g.r.IntN(6)], g.label(k)
			sp := " "
			if g.r.IntN(3) == 0 {
				sp = ""
			}
			return gx{text: pt + sp + op + sp + quoteText(s), json: fmt.Sprintf(`{"op":%q,"args":[%s,%s]}`, op, pj, jsonStr(s)),
				eval: func(r int) int8 { return cmp(get(r), op, s) }}
		case 2:
			ss := []string{g.label(k), g.label(k), g.label(k)}[:1+g.r.IntN(3)]
			var tl, jl []string
			for _, s := range ss {
				tl, jl = append(tl, quoteText(s)), append(jl, jsonStr(s))
			}
			pos := gx{text: pt + " IN (" + strings.Join(tl, ", ") + ")", json: fmt.Sprintf(`{"op":"in","args":[%s,[%s]]}`, pj, strings.Join(jl, ",")),
				eval: func(r int) int8 {
					v := get(r)
					if v.null {
						return vU
					}
					return tbool(slices.Contains(ss, v.s))
				}}
			if g.r.IntN(3) == 0 {
				return negate(pos, pt+" NOT IN ("+strings.Join(tl, ", ")+")")
			}
			return pos
		default:
			pat := g.pattern(k)
			re := likeRegexp(pat)
			pos := gx{text: pt + " LIKE " + quoteText(pat), json: fmt.Sprintf(`{"op":"like","args":[%s,%s]}`, pj, jsonStr(pat)),
				eval: func(r int) int8 {
					v := get(r)
					if v.null {
						return vU
					}
					return tbool(re.MatchString(v.s))
				}}
			if g.r.IntN(3) == 0 {
				return negate(pos, pt+" NOT LIKE "+quoteText(pat))
			}
			return pos
		}
	}
	cmp := func(v tval, op string, l lit) int8 {
		if v.null {
			return vU
		}
		c := v.num.Cmp(l.val)
		return tbool(map[string]bool{"=": c == 0, "<>": c != 0, "<": c < 0, "<=": c <= 0, ">": c > 0, ">=": c >= 0}[op])
	}
	switch g.r.IntN(5) {
	case 0, 1:
		op, l := ops[g.r.IntN(6)], g.number(k)
		if g.r.IntN(4) == 0 { // literal first: l op p is p op' l
			flip := map[string]string{"=": "=", "<>": "<>", "<": ">", "<=": ">=", ">": "<", ">=": "<="}[op]
			return gx{text: l.text + " " + op + " " + pt, json: fmt.Sprintf(`{"op":%q,"args":[%s,%s]}`, op, l.text, pj),
				eval: func(r int) int8 { return cmp(get(r), flip, l) }}
		}
		sp := " "
		if g.r.IntN(3) == 0 {
			sp = ""
		}
		return gx{text: pt + sp + op + sp + l.text, json: fmt.Sprintf(`{"op":%q,"args":[%s,%s]}`, op, pj, l.text),
			eval: func(r int) int8 { return cmp(get(r), op, l) }}
	case 2:
		lo, hi := g.number(k), g.number(k)
		if g.r.IntN(4) > 0 && lo.val.Cmp(hi.val) > 0 {
			lo, hi = hi, lo
		}
		pos := gx{text: fmt.Sprintf("%s BETWEEN %s AND %s", pt, lo.text, hi.text), json: fmt.Sprintf(`{"op":"between","args":[%s,%s,%s]}`, pj, lo.text, hi.text),
			eval: func(r int) int8 {
				v := get(r)
				if v.null {
					return vU
				}
				return tbool(v.num.Cmp(lo.val) >= 0 && v.num.Cmp(hi.val) <= 0)
			}}
		if g.r.IntN(3) == 0 {
			return negate(pos, fmt.Sprintf("%s NOT BETWEEN %s AND %s", pt, lo.text, hi.text))
		}
		return pos
	default:
		ls := []lit{g.number(k), g.number(k), g.number(k), g.number(k)}[:1+g.r.IntN(4)]
		var texts []string
		for _, l := range ls {
			texts = append(texts, l.text)
		}
		pos := gx{text: pt + " IN (" + strings.Join(texts, ", ") + ")", json: fmt.Sprintf(`{"op":"in","args":[%s,[%s]]}`, pj, strings.Join(texts, ",")),
			eval: func(r int) int8 {
				v := get(r)
				if v.null {
					return vU
				}
				for _, l := range ls {
					if v.num.Cmp(l.val) == 0 {
						return vT
					}
				}
				return vF
			}}
		if g.r.IntN(3) == 0 {
			return negate(pos, pt+" NOT IN ("+strings.Join(texts, ", ")+")")
		}
		return pos
	}
}

// sampleKeeps is the oracle's sample: an object is kept iff SplitMix64
// of its id, over 2⁶⁴, is below f; a row without one by the chain of
// SplitMix64 over its coordinates' float64 bits.
func sampleKeeps(tb *table, r int, f float64) bool {
	mix := func(x uint64) uint64 {
		x += 0x9e3779b97f4a7c15
		x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
		x = (x ^ (x >> 27)) * 0x94d049bb133111eb
		return x ^ (x >> 31)
	}
	var h uint64
	if tb.ids != nil && tb.ids[r] >= 0 {
		h = mix(uint64(tb.ids[r]))
	} else {
		for a := 0; a < tb.dims; a++ {
			c := float64(math.Float32frombits(binary.LittleEndian.Uint32(tb.verts[4*(r*tb.dims+a):])))
			h = mix(h ^ math.Float64bits(c))
		}
	}
	lhs := new(big.Float).SetUint64(h)
	rhs := new(big.Float).SetMantExp(new(big.Float).SetFloat64(f), 64)
	return lhs.Cmp(rhs) < 0
}

// restrict is the unfiltered answer f cut to the rows keep holds, its
// edges and faces those whose every vertex is kept, indexed anew.
func restrict(f *flat, tb *table, keep []bool) *flat {
	out := &flat{width: f.width, attrs: make([][]byte, len(f.attrs)), pages: 1}
	rowB := 4 * tb.dims
	newIdx := make([]int64, tb.n)
	next := int64(0)
	for r := 0; r < tb.n; r++ {
		newIdx[r] = -1
		if !keep[r] {
			continue
		}
		newIdx[r] = next
		next++
		out.verts = append(out.verts, f.verts[r*rowB:(r+1)*rowB]...)
		if f.ids != nil {
			out.ids = append(out.ids, f.ids[r])
		}
		for k, a := range f.attrs {
			w := len(a) / tb.n
			out.attrs[k] = append(out.attrs[k], a[r*w:(r+1)*w]...)
		}
	}
	for k := range out.attrs {
		if out.attrs[k] == nil {
			out.attrs[k] = []byte{}
		}
	}
	out.edges, out.faces = zvftest.Reindex(f.edges, newIdx), zvftest.Reindex(f.faces, newIdx)
	out.sort()
	return out
}

// emptyCols makes empty and absent columns compare equal.
func emptyCols(f *flat) *flat {
	for k := range f.attrs {
		if f.attrs[k] == nil {
			f.attrs[k] = []byte{}
		}
	}
	return f
}

// densityOracle bins the kept rows by the stated cell rule, by scanning.
func densityOracle(tb *table, keep []bool, min, max []float64, shape []int) []uint32 {
	cells := 1
	for _, n := range shape {
		cells *= n
	}
	out := make([]uint32, cells)
	p := make([]float64, tb.dims)
	for r := 0; r < tb.n; r++ {
		if !keep[r] {
			continue
		}
		for a := range p {
			p[a] = float64(math.Float32frombits(binary.LittleEndian.Uint32(tb.verts[4*(r*tb.dims+a):])))
		}
		out[zvftest.DensityCell(p, min, max, shape)]++
	}
	return out
}

// typesStore holds a point cloud with an attribute of every type the
// reader filters on (floats with NaN and infinities, every integer
// width, bool, a categorical, a three-channel float), objects and groups;
// and plainStore points without objects (samples by position).
var typesStores = sync.OnceValues(func() (map[string]*zvf.Store, error) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(11, 3))
	const n = 3000
	pos := make([]float32, 3*n)
	for i := range pos {
		pos[i] = float32(r.Float64() * 100)
		if r.IntN(10) == 0 {
			pos[i] = float32(12.5 * float64(r.IntN(9))) // on cell boundaries of the density grids below
		}
	}
	bytesOf := func(size int, f func(i int, b []byte)) []byte {
		out := make([]byte, n*size)
		for i := 0; i < n; i++ {
			f(i, out[i*size:(i+1)*size])
		}
		return out
	}
	float := func(x float64) float64 {
		switch r.IntN(20) {
		case 0:
			return math.NaN()
		case 1:
			return math.Inf(r.IntN(2)*2 - 1)
		}
		return x
	}
	labels := []string{"basket", "pyramidal", "it's", "100%", "a_b", "back\\slash", "stellate", "Ünïcode"}
	vals := make([]string, n)
	for i := range vals {
		vals[i] = labels[r.IntN(len(labels))]
	}
	vec := make([]float32, 3*n)
	for i := range vec {
		vec[i] = float32(float(r.NormFloat64()))
	}
	attrs := []writer.Attribute{
		{Name: "f16", DType: "float16", Channels: 1, Data: bytesOf(2, func(_ int, b []byte) {
			binary.LittleEndian.PutUint16(b, uint16(r.IntN(1<<16)))
		})},
		{Name: "f32", DType: "float32", Channels: 1, Data: bytesOf(4, func(_ int, b []byte) {
			binary.LittleEndian.PutUint32(b, math.Float32bits(float32(float(r.NormFloat64()*10))))
		})},
		{Name: "f64", DType: "float64", Channels: 1, Data: bytesOf(8, func(_ int, b []byte) {
			binary.LittleEndian.PutUint64(b, math.Float64bits(float(r.NormFloat64()*1e6)))
		})},
		{Name: "i8", DType: "int8", Channels: 1, Data: bytesOf(1, func(_ int, b []byte) { b[0] = byte(r.IntN(256)) })},
		{Name: "i16", DType: "int16", Channels: 1, Data: bytesOf(2, func(_ int, b []byte) { binary.LittleEndian.PutUint16(b, uint16(r.IntN(1<<16))) })},
		{Name: "i32", DType: "int32", Channels: 1, Data: bytesOf(4, func(_ int, b []byte) { binary.LittleEndian.PutUint32(b, uint32(r.Int32N(2000)-1000)) })},
		{Name: "i64", DType: "int64", Channels: 1, Data: bytesOf(8, func(_ int, b []byte) {
			binary.LittleEndian.PutUint64(b, uint64([]int64{math.MinInt64, math.MaxInt64, 1 << 60, -(1 << 53) - 1, r.Int64N(100)}[r.IntN(5)]))
		})},
		{Name: "u8", DType: "uint8", Channels: 1, Data: bytesOf(1, func(_ int, b []byte) { b[0] = byte(r.IntN(256)) })},
		{Name: "u16", DType: "uint16", Channels: 1, Data: bytesOf(2, func(_ int, b []byte) { binary.LittleEndian.PutUint16(b, uint16(r.IntN(1<<16))) })},
		{Name: "u32", DType: "uint32", Channels: 1, Data: bytesOf(4, func(_ int, b []byte) { binary.LittleEndian.PutUint32(b, r.Uint32()) })},
		{Name: "u64", DType: "uint64", Channels: 1, Data: bytesOf(8, func(_ int, b []byte) {
			binary.LittleEndian.PutUint64(b, []uint64{math.MaxUint64, 1 << 63, r.Uint64N(50)}[r.IntN(3)])
		})},
		{Name: "b", DType: "bool", Channels: 1, Data: bytesOf(1, func(i int, b []byte) {
			b[0] = byte(r.IntN(2))
			if b[0] == 1 && i%5 == 0 {
				b[0] = []byte{2, 255}[i%2] // true, as any byte but 0
			}
		})},
		writer.CategoricalAttribute("cat", vals),
		writer.Float32Attribute("vec", 3, vec),
	}
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(i / 7)
	}
	groups := make([][]int64, 5)
	for g := range groups {
		for id := int64(0); id < n/7+1; id++ {
			if r.IntN(4) == 0 {
				groups[g] = append(groups[g], id)
			}
		}
	}
	mem, err := blobstore.Open(ctx, "mem://")
	if err != nil {
		return nil, err
	}
	o := writer.Options{ChunkShape: []float64{25, 25, 25}, BinShape: []float64{5, 5, 5}, Pyramid: []writer.PyramidLevel{{Coarsen: 2}}}
	if _, err := writer.WritePoints(ctx, mem, "types", &writer.PointCloud{Positions: pos, Attributes: attrs, ObjectIDs: ids, Groups: groups}, o); err != nil {
		return nil, err
	}
	if _, err := writer.WritePoints(ctx, mem, "plain", &writer.PointCloud{Positions: pos, Attributes: attrs[:2]}, o); err != nil {
		return nil, err
	}
	ch := cache.New(64 << 20)
	out := map[string]*zvf.Store{}
	for _, name := range []string{"types", "plain"} {
		s, err := zvf.Open(ctx, storage.Sub(mem, name), zvf.Options{Name: "filter-" + name, Cache: ch})
		if err != nil {
			return nil, err
		}
		out[name] = s
		// The same store without a cache: filters evaluated on the rows in
		// the box each time, not through cached selections.
		if s, err = zvf.Open(ctx, storage.Sub(mem, name), zvf.Options{Name: "filter-" + name + "-nocache"}); err != nil {
			return nil, err
		}
		out[name+"-nocache"] = s
	}
	return out, nil
})

// selectionCase is one generated selection and what it keeps of a table.
type selectionCase struct {
	what string
	sel  zvf.Selection
	keep []bool
}

// selections generates n filters (each in both encodings), samples, and
// filters with samples, over tb.
func selections(t *testing.T, tb *table, seed uint64, n int) []selectionCase {
	t.Helper()
	g := &gen{r: rand.New(rand.NewPCG(seed, 5)), tb: tb}
	var out []selectionCase
	for i := 0; i < n; i++ {
		var x *gx
		if len(tb.props) > 0 && i%4 != 3 {
			e := g.expr(0)
			x = &e
		}
		sample := 0.0
		if i%3 == 2 || x == nil {
			sample = []float64{0.3, 0.01, 0.9, 1, 0.5}[g.r.IntN(5)]
		}
		keep := make([]bool, tb.n)
		for r := range keep {
			keep[r] = (x == nil || x.eval(r) == vT) && (sample == 0 || sample == 1 || sampleKeeps(tb, r, sample))
		}
		if x == nil {
			out = append(out, selectionCase{what: fmt.Sprintf("sample %v", sample), sel: zvf.Selection{Sample: sample}, keep: keep})
			continue
		}
		for _, enc := range []string{cql2.LangText, cql2.LangJSON} {
			src := x.text
			if enc == cql2.LangJSON {
				src = x.json
			}
			e, err := cql2.Parse(enc, src)
			if err != nil {
				t.Fatalf("%s %s: %v", enc, src, err)
			}
			out = append(out, selectionCase{what: fmt.Sprintf("%s %s sample %v", enc, src, sample), sel: zvf.Selection{Filter: e, Sample: sample}, keep: keep})
		}
	}
	return out
}

// TestSelectionMatchesBruteForce: over a store with every attribute type
// (and one without objects), the demo stores, every level and a few
// boxes, random filters in both encodings, samples and both together give
// the unfiltered answer's rows the oracle keeps, in order, with exactly
// the edges and faces whose vertices are all kept; Count is their number
// and Density their cells.
func TestSelectionMatchesBruteForce(t *testing.T) {
	t.Parallel()
	ts, err := typesStores()
	if err != nil {
		t.Fatal(err)
	}
	ps := mustPageStores(t)
	stores := map[string]*zvf.Store{"types": ts["types"], "plain": ts["plain"], "types-nocache": ts["types-nocache"], "plain-nocache": ts["plain-nocache"]}
	for _, name := range []string{"cells", "axons", "skeletons", "meshes", "axons-v09"} {
		stores[name] = ps[name]
	}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range stores {
			if !yield(n) {
				return
			}
		}
	}) {
		s := stores[name]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			filters := 0
			for _, lv := range s.Levels() {
				l, _ := s.Level(lv)
				bs, shape := boxes(s)[:2], []int{3, 5, 2}
				if strings.HasPrefix(name, "types") || strings.HasPrefix(name, "plain") {
					// Many coordinates are multiples of 12.5: on cell edges.
					bs, shape = [][2][]float64{{{0, 0, 0}, {100, 100, 100}}, {{12.5, 0, 25}, {62.5, 87.5, 75}}}, []int{8, 4, 2}
				}
				for bi, box := range bs {
					all := emptyCols(wholeSel(t, l, box[0], box[1], zvf.Selection{}))
					tb := tableOf(t, l, all)
					for _, c := range selections(t, tb, uint64(lv*100+bi), 24) {
						checkSelection(t, ctx, l, fmt.Sprintf("level %d box %d %s", lv, bi, c.what), box, shape, all, tb, c)
						if c.sel.Filter != nil {
							filters++
						}
					}
				}
			}
			if filters == 0 {
				t.Fatal("no filter was tried")
			}
		})
	}
}

// checkSelection compares a selection's box answer, count and density on
// l with the brute-force restriction of the whole box's rows (all, as
// table tb) to the rows c keeps.
func checkSelection(t *testing.T, ctx context.Context, l *zvf.Level, what string, box [2][]float64, shape []int, all *flat, tb *table, c selectionCase) {
	t.Helper()
	want := restrict(all, tb, c.keep)
	got := emptyCols(wholeSel(t, l, box[0], box[1], c.sel))
	sameAnswer(t, what, got, want)
	n, err := l.Count(ctx, zvf.CountQuery{Min: box[0], Max: box[1], Selection: c.sel})
	if err != nil || n != int64(len(want.verts)/12) {
		t.Fatalf("%s: count %d (%v), want %d", what, n, err, len(want.verts)/12)
	}
	dens, err := l.Density(ctx, zvf.DensityQuery{Min: box[0], Max: box[1], Shape: shape, Selection: c.sel})
	if err != nil {
		t.Fatal(err)
	}
	if wd := densityOracle(tb, c.keep, box[0], box[1], shape); !slices.Equal(dens, wd) {
		t.Fatalf("%s: density %v, want %v", what, dens, wd)
	}
}

// TestSelectionKeepsSomeAndLeavesSome: the brute-force comparison above is
// not vacuous: its filters keep some rows and leave others, on every
// property kind, and samples keep about their share.
func TestSelectionKeepsSomeAndLeavesSome(t *testing.T) {
	t.Parallel()
	ts, err := typesStores()
	if err != nil {
		t.Fatal(err)
	}
	l, _ := ts["types"].Level(0)
	box := [2][]float64{{0, 0, 0}, {100, 100, 100}}
	tb := tableOf(t, l, emptyCols(wholeSel(t, l, box[0], box[1], zvf.Selection{})))
	mixed := 0
	cases := selections(t, tb, 1, 200)
	for _, c := range cases {
		kept := 0
		for _, k := range c.keep {
			if k {
				kept++
			}
		}
		if kept > 0 && kept < tb.n {
			mixed++
		}
		if c.sel.Filter == nil && c.sel.Sample > 0 && c.sel.Sample < 1 {
			if share := float64(kept) / float64(tb.n); math.Abs(share-c.sel.Sample) > 0.15 {
				t.Errorf("sample %v kept %.3f of the rows", c.sel.Sample, share)
			}
		}
	}
	if mixed < len(cases)/3 {
		t.Fatalf("only %d of %d selections keep some rows and leave others", mixed, len(cases))
	}
}

// TestFilterErrors: a filter naming a property the level lacks is
// ErrBadQuery wrapping a *cql2.Error that names the property and the
// level; one that does not fit is cql2's error; level=auto passes over
// levels that lack a property.
func TestFilterErrors(t *testing.T) {
	t.Parallel()
	ps := mustPageStores(t)
	s := ps["cells"]
	ctx := context.Background()
	box := boxes(s)[0]
	for _, c := range []struct {
		level    int
		filter   string
		contains []string
	}{
		{1, "cell_type = 'basket'", []string{`level 1 has no attribute "cell_type"`, "object_id"}},
		{0, "volum > 3", []string{`level 0 has no attribute "volum"`, "cell_type", "intensity"}},
		{0, "object.volume > 3", []string{"object attributes are not queryable"}},
		{0, "intensity = 'big'", []string{`"intensity" is float32`, "'big'"}},
		{0, "cell_type > 3", []string{"cell_type"}},
		{0, "intensity LIKE 'a%'", []string{"LIKE", "intensity"}},
		{0, "group < 3", []string{"group", "<"}},
		{0, "intensity[1] > 0", []string{"intensity[1]"}},
	} {
		e, err := cql2.ParseText(c.filter)
		if err != nil {
			t.Fatal(err)
		}
		l, _ := s.Level(c.level)
		_, err = l.BBox(ctx, zvf.BBoxQuery{Min: box[0], Max: box[1], Selection: zvf.Selection{Filter: e}}, func(*zvf.Batch) error { return nil })
		var ce *cql2.Error
		if !errors.Is(err, zvf.ErrBadQuery) || !errors.As(err, &ce) {
			t.Fatalf("%s at level %d: %v", c.filter, c.level, err)
		}
		for _, want := range c.contains {
			if !strings.Contains(ce.Error(), want) {
				t.Errorf("%s at level %d: %q lacks %q", c.filter, c.level, ce.Error(), want)
			}
		}
		if _, err := l.Count(ctx, zvf.CountQuery{Min: box[0], Max: box[1], Selection: zvf.Selection{Filter: e}}); !errors.As(err, &ce) {
			t.Errorf("count: %v", err)
		}
	}
	e, _ := cql2.ParseText("cell_type = 'basket'")
	if n, err := s.ChooseLevel(ctx, box[0], box[1], 10, nil, zvf.Selection{Filter: e}); err != nil || n != 0 {
		t.Fatalf("level=auto with a level-0 attribute: level %d, %v", n, err)
	}
	for _, bad := range []float64{-0.5, 1.5, math.NaN()} {
		l, _ := s.Level(0)
		if _, err := l.Count(ctx, zvf.CountQuery{Min: box[0], Max: box[1], Selection: zvf.Selection{Sample: bad}}); !errors.Is(err, zvf.ErrBadQuery) {
			t.Errorf("sample %v: %v", bad, err)
		}
	}
}

// TestSampleIsTheSameEverywhere: an object kept at one level, in one box,
// is kept at every level and in every box that holds it, whole within the
// box; sample=1 is the unsampled answer.
func TestSampleIsTheSameEverywhere(t *testing.T) {
	t.Parallel()
	ps := mustPageStores(t)
	s := ps["axons"]
	sel := zvf.Selection{Sample: 0.25}
	kept := map[int64]bool{}
	for _, lv := range s.Levels() {
		l, _ := s.Level(lv)
		for _, box := range boxes(s) {
			all := wholeSel(t, l, box[0], box[1], zvf.Selection{})
			got := wholeSel(t, l, box[0], box[1], sel)
			in := map[int64]bool{}
			for _, id := range got.ids {
				in[id] = true
			}
			want := 0
			for _, id := range all.ids {
				if in[id] {
					want++
				}
				if k, seen := kept[id]; seen && k != in[id] {
					t.Fatalf("object %d kept %v here, %v elsewhere", id, in[id], k)
				}
				kept[id] = in[id]
			}
			if want != len(got.ids) {
				t.Fatalf("level %d: kept objects have %d rows in the box, the sample %d", lv, want, len(got.ids))
			}
			one := wholeSel(t, l, box[0], box[1], zvf.Selection{Sample: 1})
			sameAnswer(t, "sample=1", one, all)
		}
	}
}
