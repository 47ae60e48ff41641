package cql2

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// The randomised test compares the compiled evaluator with refEval, a
// tree walk over the parsed filter that reads each row's values decoded on
// their own and compares them the slow, obvious way (math/big for numbers,
// regexp for LIKE), over random rows of every data type.

// randAttr is one attribute of the random chunks.
type randAttr struct {
	q      Queryable
	dtype  string
	labels []string // categorical
	null   *int64   // categorical
}

func randAttrs() []randAttr {
	minus1 := int64(-1)
	fruit := []string{"apple", "apricot", "banana", "cherry", "date"}
	return []randAttr{
		{q: Queryable{Name: "f16", Kind: Float, Bits: 16}, dtype: "float16"},
		{q: Queryable{Name: "f32", Kind: Float, Bits: 32, Channels: 2}, dtype: "float32"},
		{q: Queryable{Name: "f64", Kind: Float, Bits: 64}, dtype: "float64"},
		{q: Queryable{Name: "i8", Kind: Int, Bits: 8}, dtype: "int8"},
		{q: Queryable{Name: "i16", Kind: Int, Bits: 16}, dtype: "int16"},
		{q: Queryable{Name: "i32", Kind: Int, Bits: 32}, dtype: "int32"},
		{q: Queryable{Name: "i64", Kind: Int}, dtype: "int64"},
		{q: Queryable{Name: "u8", Kind: Uint, Bits: 8}, dtype: "uint8"},
		{q: Queryable{Name: "u16", Kind: Uint, Bits: 16}, dtype: "uint16"},
		{q: Queryable{Name: "u32", Kind: Uint, Bits: 32}, dtype: "uint32"},
		{q: Queryable{Name: "u64", Kind: Uint, Bits: 64}, dtype: "uint64"},
		{q: Queryable{Name: "flag", Kind: Uint}, dtype: "bool"},
		{q: Queryable{Name: "cat", Kind: Categorical, Labels: fruit}, dtype: "uint8", labels: fruit},
		{q: Queryable{Name: "cati", Kind: Categorical, Labels: []string{"a", "b", "c"}}, dtype: "int16", labels: []string{"a", "b", "c"}, null: &minus1},
		{q: Queryable{Name: "s", Kind: String}},
	}
}

// refValue is one property of one row, as the reference reads it.
type refValue struct {
	null bool
	num  *big.Float // numbers, exactly
	str  string     // strings and labels
}

// randChunk is a chunk of random rows: the columns bound, and every
// value decoded independently of the package.
type randChunk struct {
	rows   int
	cols   map[string]Column
	vals   map[string][]refValue // by property name (f32[0], f32[1], …); one value when constant
	ids    []int64
	groups map[int64][]int64
	likes  map[string]*regexp.Regexp // refEval's LIKE patterns, compiled
}

var stringPool = []string{"", "a", "ab", "abc", "b", "ba", "a%b", "a_b", "é", "日本", "it's", `\`, "apple", "date"}

func randFloat(r *rand.Rand) float64 {
	switch r.IntN(10) {
	case 0:
		return []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), 1e-40, math.MaxFloat32, 1e300}[r.IntN(7)]
	case 1, 2:
		return float64(float32(r.NormFloat64() * 10))
	}
	return []float64{-2, -1, -0.5, 0, 0.5, 1, 2, 2.5, 3}[r.IntN(9)]
}

func randInt(r *rand.Rand, bits int) int64 {
	if r.IntN(6) == 0 {
		lo, hi := int64(-1)<<(bits-1), int64(uint64(1)<<(bits-1)-1)
		return []int64{lo, hi, lo + 1, hi - 1}[r.IntN(4)]
	}
	return int64(r.IntN(11) - 5)
}

func randUint(r *rand.Rand, bits int) uint64 {
	if r.IntN(6) == 0 {
		hi := uint64(1)<<(bits-1)<<1 - 1
		return []uint64{hi, hi - 1, 1 << (bits - 1)}[r.IntN(3)]
	}
	return uint64(r.IntN(6))
}

// halfValue decodes binary16 bits the long way.
func halfValue(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	e, m := int(h>>10&0x1f), float64(h&0x3ff)
	switch {
	case e == 31 && m == 0:
		return sign * math.Inf(1)
	case e == 31:
		return math.NaN()
	case e == 0:
		return sign * m / 1024 * math.Pow(2, -14)
	}
	return sign * (1 + m/1024) * math.Pow(2, float64(e-15))
}

func newRandChunk(r *rand.Rand, attrs []randAttr) randChunk {
	n := 1 + r.IntN(1300) // crosses block boundaries
	c := randChunk{rows: n, cols: map[string]Column{}, vals: map[string][]refValue{}, likes: map[string]*regexp.Regexp{}}
	for _, a := range attrs {
		constant := r.IntN(8) == 0
		rows := n
		if constant {
			rows = 1
		}
		ch := max(a.q.Channels, 1)
		col := Column{DType: a.dtype, Channels: a.q.Channels, Constant: constant}
		names := []string{a.q.Name}
		if ch > 1 {
			names = nil
			for i := range ch {
				names = append(names, fmt.Sprintf("%s[%d]", a.q.Name, i))
			}
		}
		vals := make([][]refValue, ch)
		labels := a.labels
		if a.q.Kind == Categorical && r.IntN(3) == 0 {
			// This chunk's own dictionary.
			labels = slices.Clone(a.labels)
			r.Shuffle(len(labels), func(i, j int) { labels[i], labels[j] = labels[j], labels[i] })
			labels = append(labels[:r.IntN(len(labels)+1)], "granule")
			col.Labels = labels
		}
		col.NullCode = a.null
		for range rows {
			for k := range ch {
				var v refValue
				switch a.dtype {
				case "float16":
					var h uint16
					if r.IntN(3) == 0 {
						h = uint16(r.Uint32())
					} else {
						h = uint16([]uint16{0x0000, 0x8000, 0x3c00, 0xbc00, 0x4000, 0x3800, 0x4100, 0x7c00, 0x7e00, 0x0001}[r.IntN(10)])
					}
					col.Data = binary.LittleEndian.AppendUint16(col.Data, h)
					f := halfValue(h)
					v = refValue{null: math.IsNaN(f) || math.IsInf(f, 0), num: finiteBig(f)}
				case "float32":
					f := float32(randFloat(r))
					col.Data = binary.LittleEndian.AppendUint32(col.Data, math.Float32bits(f))
					v = refValue{null: f != f || math.IsInf(float64(f), 0), num: finiteBig(float64(f))}
				case "float64":
					f := randFloat(r)
					col.Data = binary.LittleEndian.AppendUint64(col.Data, math.Float64bits(f))
					v = refValue{null: math.IsNaN(f) || math.IsInf(f, 0), num: finiteBig(f)}
				case "int8", "int16", "int32", "int64":
					_, size, _, _ := parseDType(a.dtype)
					bits := 8 * size
					x := randInt(r, bits)
					if a.q.Kind == Categorical {
						x = int64(r.IntN(len(labels)+3)) - 2 // -2 (no label), -1 (null), codes, past the end
					}
					col.Data = appendLE(col.Data, uint64(x), bits/8)
					v = refValue{num: new(big.Float).SetInt64(x)}
					if a.q.Kind == Categorical {
						v = labelValue(x, labels, a.null)
					}
				case "uint8", "uint16", "uint32", "uint64", "bool":
					bits := a.q.Bits
					if bits == 0 {
						bits = 1
					}
					x := randUint(r, bits)
					if a.q.Kind == Categorical {
						x = uint64(r.IntN(len(labels) + 2))
						if r.IntN(20) == 0 {
							x = 255
						}
						bits = 8
					}
					col.Data = appendLE(col.Data, x, max(bits/8, 1))
					if a.dtype == "bool" && x != 0 {
						x = 1 // any byte but 0 is true: 1
					}
					v = refValue{num: new(big.Float).SetUint64(x)}
					if a.q.Kind == Categorical {
						v = labelValue(int64(x), labels, a.null)
					}
				default: // string
					s := stringPool[r.IntN(len(stringPool))]
					col.Strings = append(col.Strings, s)
					v = refValue{str: s}
				}
				vals[k] = append(vals[k], v)
			}
		}
		c.cols[a.q.Name] = col
		for k, name := range names {
			c.vals[name] = vals[k]
		}
	}
	c.ids = make([]int64, n)
	for i := range c.ids {
		c.ids[i] = int64(r.IntN(7)) - 1 // -1 is none
		if i > 0 && r.IntN(3) > 0 {
			c.ids[i] = c.ids[i-1] // runs of one object
		}
	}
	c.groups = map[int64][]int64{}
	for g := range int64(4) {
		for id := range int64(6) {
			if r.IntN(3) == 0 {
				c.groups[g] = append(c.groups[g], id)
			}
		}
	}
	return c
}

func appendLE(b []byte, v uint64, size int) []byte {
	for i := range size {
		b = append(b, byte(v>>(8*i)))
	}
	return b
}

func finiteBig(f float64) *big.Float {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil
	}
	return big.NewFloat(f)
}

func labelValue(code int64, labels []string, null *int64) refValue {
	if (null != nil && code == *null) || code < 0 || code >= int64(len(labels)) {
		return refValue{null: true}
	}
	return refValue{str: labels[code]}
}

// value is property name of row i.
func (c *randChunk) value(name string, i int) refValue {
	vs := c.vals[name]
	if len(vs) == 1 {
		return vs[0] // constant
	}
	return vs[i]
}

func (c *randChunk) member(g, id int64) bool { return slices.Contains(c.groups[g], id) }

func (c *randChunk) grouped(id int64) bool {
	for _, ids := range c.groups {
		if slices.Contains(ids, id) {
			return true
		}
	}
	return false
}

// refEval is the filter's value for row i: 0 false, 1 unknown, 2 true.
func refEval(e Expr, s *Schema, c *randChunk, i int) uint8 {
	switch e := e.(type) {
	case BoolLit:
		if e.Value {
			return 2
		}
		return 0
	case *Not:
		return 2 - refEval(e.Arg, s, c, i)
	case *And:
		v := uint8(2)
		for _, a := range e.Args {
			v = min(v, refEval(a, s, c, i))
		}
		return v
	case *Or:
		v := uint8(0)
		for _, a := range e.Args {
			v = max(v, refEval(a, s, c, i))
		}
		return v
	case *IsNull:
		if e.Value.(Property).Name == PropGroup {
			return truth(c.ids[i] == -1 || !c.grouped(c.ids[i]))
		}
		return truth(refOperand(e.Value, s, c, i).null)
	case *Compare:
		if p, ok := e.Left.(Property); ok && p.Name == PropGroup {
			return refGroupOf(e.Right, e.Op == Ne, c, i)
		}
		if p, ok := e.Right.(Property); ok && p.Name == PropGroup {
			return refGroupOf(e.Left, e.Op == Ne, c, i)
		}
		l, r := refOperand(e.Left, s, c, i), refOperand(e.Right, s, c, i)
		if l.null || r.null {
			return 1
		}
		var k int
		if l.num != nil {
			k = l.num.Cmp(r.num)
		} else {
			k = strings.Compare(l.str, r.str)
		}
		switch e.Op {
		case Eq:
			return truth(k == 0)
		case Ne:
			return truth(k != 0)
		case Lt:
			return truth(k < 0)
		case Le:
			return truth(k <= 0)
		case Gt:
			return truth(k > 0)
		}
		return truth(k >= 0)
	case *Between:
		v, lo, hi := refOperand(e.Value, s, c, i), refOperand(e.Low, s, c, i), refOperand(e.High, s, c, i)
		if v.null {
			return 1
		}
		return truth(lo.num.Cmp(v.num) <= 0 && v.num.Cmp(hi.num) <= 0)
	case *In:
		if p := e.Value.(Property); p.Name == PropGroup {
			v := uint8(0)
			for _, g := range e.List {
				v = max(v, refGroupOf(g, false, c, i))
			}
			return v
		}
		v := refOperand(e.Value, s, c, i)
		if v.null {
			return 1
		}
		for _, l := range e.List {
			w := refOperand(l, s, c, i)
			if (v.num != nil && v.num.Cmp(w.num) == 0) || (v.num == nil && v.str == w.str) {
				return 2
			}
		}
		return 0
	case *Like:
		v := refOperand(e.Value, s, c, i)
		if v.null {
			return 1
		}
		re, ok := c.likes[e.Pattern]
		if !ok {
			re = likeRegexp(e.Pattern)
			c.likes[e.Pattern] = re
		}
		return truth(re.MatchString(v.str))
	}
	panic(fmt.Sprintf("refEval: %T", e))
}

func truth(b bool) uint8 {
	if b {
		return 2
	}
	return 0
}

// refGroup is group = g (negated when ne) for row i.
func refGroupOf(g Scalar, ne bool, c *randChunk, i int) uint8 {
	id := c.ids[i]
	if id == -1 || !c.grouped(id) {
		return 1
	}
	n := g.(NumberLit)
	v := truth(n.Int && !n.Neg && c.member(int64(n.Mag), id))
	if ne {
		return 2 - v
	}
	return v
}

// refOperand reads a property of row i or a literal. An integer literal is
// exact; any other literal is its float64.
func refOperand(s Scalar, sch *Schema, c *randChunk, i int) refValue {
	switch s := s.(type) {
	case Property:
		if s.Name == PropObjectID {
			if c.ids[i] == -1 {
				return refValue{null: true}
			}
			return refValue{num: new(big.Float).SetInt64(c.ids[i])}
		}
		return c.value(s.Name, i)
	case NumberLit:
		if s.Int {
			f := new(big.Float).SetUint64(s.Mag)
			if s.Neg {
				f.Neg(f)
			}
			return refValue{num: f}
		}
		return refValue{num: big.NewFloat(s.Float)}
	case StringLit:
		return refValue{str: s.Value}
	}
	panic(fmt.Sprintf("refOperand: %T", s))
}

// likeRegexp is the LIKE pattern as a regular expression.
func likeRegexp(p string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString(`^(?s:`)
	for i := 0; i < len(p); {
		r, n := utf8.DecodeRuneInString(p[i:])
		i += n
		switch r {
		case '%':
			b.WriteString(".*")
		case '_':
			b.WriteString(".")
		case '\\':
			r, n = utf8.DecodeRuneInString(p[i:])
			i += n
			fallthrough
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString(`)$`)
	return regexp.MustCompile(b.String())
}

// randFilter builds random valid filters over the random chunks'
// properties.
type randFilter struct {
	r     *rand.Rand
	attrs []randAttr
	c     *randChunk
}

func (g *randFilter) expr(depth int) Expr {
	r := g.r
	if depth > 0 && r.IntN(3) > 0 {
		switch r.IntN(5) {
		case 0:
			return &Not{Arg: g.expr(depth - 1)}
		case 1, 2:
			return &And{Args: g.exprs(depth - 1)}
		default:
			return &Or{Args: g.exprs(depth - 1)}
		}
	}
	if r.IntN(30) == 0 {
		return BoolLit{Value: r.IntN(2) == 0}
	}
	return g.predicate()
}

func (g *randFilter) exprs(depth int) []Expr {
	args := make([]Expr, 2+g.r.IntN(2))
	for i := range args {
		args[i] = g.expr(depth)
	}
	return args
}

var numOps = []CompareOp{Eq, Ne, Lt, Le, Gt, Ge}

func (g *randFilter) predicate() Expr {
	r := g.r
	switch r.IntN(12) {
	case 0:
		return g.groupPredicate()
	case 1:
		return g.numberPredicate(Property{PropObjectID}, true)
	}
	a := g.attrs[r.IntN(len(g.attrs))]
	p := Property{a.q.Name}
	if a.q.Channels > 1 {
		p.Name = fmt.Sprintf("%s[%d]", a.q.Name, r.IntN(a.q.Channels))
	}
	if r.IntN(10) == 0 {
		return &IsNull{Value: p}
	}
	if a.q.Kind == Categorical || a.q.Kind == String {
		lit := func() Scalar { return StringLit{g.stringLit(a)} }
		switch r.IntN(4) {
		case 0:
			return &Like{Value: p, Pattern: []string{"a%", "%b", "_", "%", "", `a\%b`, `a\_b`, "%a%b%", "_b%", `\\`, "日%", "%'%", "é", "ap%", "%e", "_a%e"}[r.IntN(16)]}
		case 1:
			list := []Scalar{lit()}
			for r.IntN(2) == 0 {
				list = append(list, lit())
			}
			return &In{Value: p, List: list}
		}
		if r.IntN(4) == 0 {
			return &Compare{Op: numOps[r.IntN(6)], Left: lit(), Right: p}
		}
		return &Compare{Op: numOps[r.IntN(6)], Left: p, Right: lit()}
	}
	return g.numberPredicate(p, a.q.Kind != Float)
}

func (g *randFilter) numberPredicate(p Property, integer bool) Expr {
	r := g.r
	lit := func() Scalar { return g.numberLit(p.Name, integer) }
	switch r.IntN(6) {
	case 0:
		lo, hi := lit(), lit()
		return &Between{Value: p, Low: lo, High: hi}
	case 1:
		list := []Scalar{lit()}
		for r.IntN(2) == 0 {
			list = append(list, lit())
		}
		return &In{Value: p, List: list}
	case 2:
		return &Compare{Op: numOps[r.IntN(6)], Left: lit(), Right: p}
	}
	return &Compare{Op: numOps[r.IntN(6)], Left: p, Right: lit()}
}

func (g *randFilter) groupPredicate() Expr {
	r := g.r
	p := Property{PropGroup}
	lit := func() Scalar { return intLit(int64(r.IntN(6)) - 1) }
	switch r.IntN(4) {
	case 0:
		return &IsNull{Value: p}
	case 1:
		return &In{Value: p, List: []Scalar{lit(), lit()}}
	case 2:
		return &Compare{Op: Ne, Left: p, Right: lit()}
	}
	return &Compare{Op: Eq, Left: lit(), Right: p}
}

func intLit(v int64) NumberLit {
	if v < 0 {
		return NumberLit{Float: float64(v), Int: true, Neg: true, Mag: uint64(-v)}
	}
	return NumberLit{Float: float64(v), Int: true, Mag: uint64(v)}
}

// numberLit is a literal near the chunk's values of property name, or at
// the edges of the types.
func (g *randFilter) numberLit(name string, integer bool) Scalar {
	r := g.r
	if vs := g.c.vals[name]; len(vs) > 0 && r.IntN(2) == 0 {
		v := vs[r.IntN(len(vs))]
		if v.num != nil {
			f, _ := v.num.Float64()
			if integer && v.num.IsInt() && r.IntN(3) > 0 {
				i, _ := v.num.Int(nil)
				if i.IsUint64() {
					return NumberLit{Float: f, Int: true, Mag: i.Uint64()}
				}
				return NumberLit{Float: f, Int: true, Neg: true, Mag: new(big.Int).Neg(i).Uint64()}
			}
			switch r.IntN(3) {
			case 0:
				f += 0.5
			case 1:
				f = math.Nextafter(f, math.Inf(1))
			}
			if f == 0 {
				f = 0 // no negative zero in literals
			}
			return NumberLit{Float: f}
		}
	}
	switch r.IntN(4) {
	case 0:
		return NumberLit{Float: []float64{0.5, -0.5, 1e300, -1e300, 18446744073709551616, 2.5, 127.5, 1e-40}[r.IntN(8)]}
	case 1:
		return NumberLit{Float: math.MaxUint64, Int: true, Mag: math.MaxUint64}
	case 2:
		if r.IntN(2) == 0 {
			return NumberLit{Float: -(1 << 63), Int: true, Neg: true, Mag: 1 << 63}
		}
		return NumberLit{Float: 1 << 63, Int: true, Mag: 1 << 63}
	}
	return intLit([]int64{0, 1, -1, 127, 128, -128, -129, 255, 256, 32767, -32768, 65535, 1 << 31, 1 << 32, math.MaxInt64, 1<<53 + 1}[r.IntN(16)])
}

func (g *randFilter) stringLit(a randAttr) string {
	if a.q.Kind == Categorical && g.r.IntN(2) == 0 {
		return append(slices.Clone(a.labels), "granule", "nope")[g.r.IntN(len(a.labels)+2)]
	}
	return stringPool[g.r.IntN(len(stringPool))]
}

// TestEvalRandom: the compiled evaluator agrees with refEval on random
// filters over random rows of every type, through both encodings, on
// every row-selection call; MayMatch never rules out a chunk with a
// passing row.
func TestEvalRandom(t *testing.T) {
	attrs := randAttrs()
	schema := &Schema{ObjectID: true, Group: true}
	for _, a := range attrs {
		schema.Queryables = append(schema.Queryables, a.q)
	}
	trials := 120
	if testing.Short() {
		trials = 30
	}
	r := rand.New(rand.NewPCG(27, 1))
	var passed, total int
	for trial := range trials {
		c := newRandChunk(r, attrs)
		g := &randFilter{r: r, attrs: attrs, c: &c}
		for range 8 {
			e := g.expr(3)
			// Both encodings give the tree back.
			text, js := e.String(), FormatJSON(e)
			if back, err := ParseText(text); err != nil || !reflect.DeepEqual(back, e) {
				t.Fatalf("text %s: %v (%#v)", text, err, back)
			}
			if back, err := ParseJSON([]byte(js)); err != nil || !reflect.DeepEqual(back, e) {
				t.Fatalf("JSON %s: %v", js, err)
			}
			f, err := Check(e, schema)
			if err != nil {
				t.Fatalf("Check(%s): %v", text, err)
			}
			ev := f.NewEvaluator()
			levelMay := ev.MayMatch()
			for _, name := range f.Attributes() {
				if err := ev.Bind(name, c.cols[name]); err != nil {
					t.Fatal(err)
				}
			}
			ev.BindObjectIDs(c.ids, -1)
			ev.BindGroups(NewGroupSets(c.groups))
			chunkMay := ev.MayMatch()

			want := make([]bool, c.rows)
			var wantRows []int32
			for i := range want {
				want[i] = refEval(e, schema, &c, i) == 2
				if want[i] {
					wantRows = append(wantRows, int32(i))
				}
			}
			passed += len(wantRows)
			total += c.rows
			got := make([]bool, c.rows)
			if err := ev.EvalRange(0, got); err != nil {
				t.Fatal(err)
			}
			if i := firstDiff(got, want); i >= 0 {
				t.Fatalf("trial %d: %s: row %d: got %v, want %v", trial, text, i, got[i], want[i])
			}
			// A random selection, out of order and repeated, through Eval
			// and in-place Select.
			rows := make([]int32, r.IntN(2*c.rows))
			for i := range rows {
				rows[i] = int32(r.IntN(c.rows))
			}
			out := make([]bool, len(rows))
			if err := ev.Eval(rows, out); err != nil {
				t.Fatal(err)
			}
			var sel []int32
			for i, row := range rows {
				if out[i] != want[row] {
					t.Fatalf("trial %d: %s: Eval row %d: got %v, want %v", trial, text, row, out[i], want[row])
				}
				if out[i] {
					sel = append(sel, row)
				}
			}
			if got, err := ev.Select(rows[:0], rows); err != nil || !slices.Equal(got, sel) {
				t.Fatalf("trial %d: %s: Select %v, want %v (%v)", trial, text, got, sel, err)
			}
			if got, err := ev.SelectRange(nil, 0, c.rows); err != nil || !slices.Equal(got, wantRows) {
				t.Fatalf("trial %d: %s: SelectRange %v, want %v (%v)", trial, text, got, wantRows, err)
			}
			// The level's answer assumes the queryables' dictionary; a chunk
			// may bind its own.
			ownDict := false
			for _, name := range f.Attributes() {
				ownDict = ownDict || c.cols[name].Labels != nil
			}
			if len(wantRows) > 0 && ((!levelMay && !ownDict) || !chunkMay) {
				t.Fatalf("trial %d: %s: %d rows pass, MayMatch level %v chunk %v", trial, text, len(wantRows), levelMay, chunkMay)
			}
		}
	}
	// The filters must not be trivial: some rows pass, most do not.
	if passed == 0 || passed == total {
		t.Fatalf("%d of %d rows passed", passed, total)
	}
	t.Logf("%d of %d rows passed", passed, total)
}

func firstDiff(a, b []bool) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}
