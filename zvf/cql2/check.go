package cql2

import (
	"fmt"
	"math"
	"math/big"
	"slices"
	"sort"
)

// Filter is a parsed filter checked against a Schema and compiled: what
// its evaluators run. It is immutable and safe for concurrent use; each
// goroutine evaluates through its own Evaluator.
type Filter struct {
	expr   Expr
	schema *Schema
	root   *cnode
	attrs  []int   // Schema.Queryables indices of the attributes leaves read, in first-use order
	slots  []ref   // distinct (attribute, channel) pairs leaves read; ref.attr indexes attrs
	shared []bool  // per slot: more than one leaf reads it (so it is gathered once per block)
	leaves []*leaf // every leaf, leaf.id its index
	ids    bool    // a leaf reads object ids
	groups bool    // a leaf reads group membership
}

// Check checks e against the queryables of s and compiles it. A filter
// that does not fit (an unknown property, LIKE on a number, a string
// literal against a float, an operator group does not take) is an *Error
// naming the property; a malformed Schema is a plain error.
func Check(e Expr, s *Schema) (*Filter, error) {
	// The filter keeps its own copy: the caller may reuse its slice.
	own := *s
	own.Queryables = slices.Clone(s.Queryables)
	x, err := indexSchema(&own)
	if err != nil {
		return nil, err
	}
	c := &checker{x: x, f: &Filter{expr: e, schema: &own}, attrAt: map[int]int{}, slotAt: map[ref]int{}}
	root, err := c.compile(e, false)
	if err != nil {
		return nil, err
	}
	c.f.root = root
	return c.f, nil
}

// String is the filter in cql2-text.
func (f *Filter) String() string { return f.expr.String() }

// Expr is the filter as parsed.
func (f *Filter) Expr() Expr { return f.expr }

// Attributes are the attributes an evaluator needs bound (Evaluator.Bind),
// in the order the filter first uses them. An attribute the filter names
// whose test does not depend on its values (IS NULL of an integer) is not
// among them.
func (f *Filter) Attributes() []string {
	names := make([]string, len(f.attrs))
	for i, a := range f.attrs {
		names[i] = f.schema.Queryables[a].Name
	}
	return names
}

// NeedsObjectIDs reports whether an evaluator needs the rows' object ids
// (Evaluator.BindObjectIDs): the filter tests object_id or group.
func (f *Filter) NeedsObjectIDs() bool { return f.ids || f.groups }

// NeedsGroups reports whether an evaluator needs group membership
// (Evaluator.BindGroups).
func (f *Filter) NeedsGroups() bool { return f.groups }

// Three-valued logic: false < unknown < true, so AND is the minimum and
// OR the maximum; with these values they are also the bitwise AND and OR
// (and NOT, which the compiled tree no longer has, would swap 0 and 3).
const (
	vFalse   uint8 = 0
	vUnknown uint8 = 1
	vTrue    uint8 = 3
)

type cop uint8

const (
	cConst cop = iota
	cLeaf
	cAnd
	cOr
)

// cnode is a compiled expression: NOT is pushed into the leaves (and
// through AND and OR by De Morgan's laws, which hold in three-valued
// logic), so only AND, OR, leaves and constants remain.
type cnode struct {
	op   cop
	val  uint8 // cConst
	leaf *leaf
	args []*cnode
}

type leafKind uint8

const (
	lkFloat      leafKind = iota // fiv over finite values; unknown when not finite
	lkFloatNull                  // true when not finite
	lkInt                        // iiv over signed values
	lkUint                       // uiv over unsigned values
	lkCat                        // a label predicate, through a table over codes
	lkString                     // a string predicate per row
	lkObject                     // iiv over object ids; unknown without an object
	lkObjectNull                 // true without an object
	lkGroup                      // member of one of groups; unknown without a group
	lkGroupNull                  // true without a group
)

type leaf struct {
	id   int
	kind leafKind
	neg  bool // the outcome's true and false swap (unknown stays)
	slot int  // Filter.slots index (column leaves)
	fiv  []fInterval
	iiv  []iInterval
	uiv  []uInterval
	sp   strPred
	grp  []int64 // sorted group ids
}

// interval is a closed interval of one of the three numeric domains; a
// leaf's intervals are sorted and disjoint.
type interval[T float64 | int64 | uint64] struct{ lo, hi T }

type (
	fInterval = interval[float64]
	iInterval = interval[int64]
	uInterval = interval[uint64]
)

type checker struct {
	x      *schemaIndex
	f      *Filter
	attrAt map[int]int // Schema index → Filter.attrs index
	slotAt map[ref]int // (Filter.attrs index, channel) → Filter.slots index
}

func constNode(v uint8) *cnode { return &cnode{op: cConst, val: v} }

// compile compiles e, negated when neg.
func (c *checker) compile(e Expr, neg bool) (*cnode, error) {
	switch e := e.(type) {
	case BoolLit:
		if e.Value != neg {
			return constNode(vTrue), nil
		}
		return constNode(vFalse), nil
	case *Not:
		return c.compile(e.Arg, !neg)
	case *And:
		return c.compileGroup(e.Args, neg, neg)
	case *Or:
		return c.compileGroup(e.Args, !neg, neg)
	case *Compare:
		return c.compileCompare(e, neg)
	case *Between:
		return c.compileBetween(e, neg)
	case *In:
		return c.compileIn(e, neg)
	case *Like:
		return c.compileLike(e, neg)
	case *IsNull:
		return c.compileIsNull(e, neg)
	case nil:
		return nil, errorf("empty filter")
	}
	return nil, fmt.Errorf("cql2: unknown expression type %T", e)
}

// compileGroup compiles args joined by OR (or) or AND (!or), each negated
// when neg, folding constants.
func (c *checker) compileGroup(args []Expr, or, neg bool) (*cnode, error) {
	if len(args) == 0 {
		return nil, errorf("AND or OR without arguments")
	}
	op, absorb, identity := cAnd, vFalse, vTrue
	if or {
		op, absorb, identity = cOr, vTrue, vFalse
	}
	n := &cnode{op: op}
	for _, a := range args {
		k, err := c.compile(a, neg)
		if err != nil {
			return nil, err
		}
		switch {
		case k.op == cConst && k.val == absorb:
			// Keep checking the other arguments (their errors matter), but
			// the outcome is decided.
			n = constNode(absorb)
		case k.op == cConst && k.val == identity:
		case n.op == cConst:
		case k.op == op:
			n.args = append(n.args, k.args...)
		default:
			n.args = append(n.args, k)
		}
	}
	switch {
	case n.op == cConst:
		return n, nil
	case len(n.args) == 0:
		return constNode(identity), nil
	case len(n.args) == 1:
		return n.args[0], nil
	}
	return n, nil
}

// operand resolves a predicate's property operand.
func (c *checker) operand(s Scalar, what string) (ref, string, error) {
	p, ok := s.(Property)
	if !ok {
		return ref{}, "", errorf("%s needs a property on its left, got %s", what, literalWords(s))
	}
	r, err := c.x.resolve(p.Name)
	return r, p.Name, err
}

// literalWords names a literal for messages: string 'a', number 3, TRUE.
func literalWords(s Scalar) string {
	switch s := s.(type) {
	case StringLit:
		return "string " + truncate(s.String())
	case NumberLit:
		return "number " + s.String()
	case BoolLit:
		return "boolean " + s.String()
	case Property:
		return "property " + truncate(s.String())
	}
	return fmt.Sprintf("%T", s)
}

func (c *checker) compileCompare(e *Compare, neg bool) (*cnode, error) {
	prop, lit, op := e.Left, e.Right, e.Op
	_, lp := e.Left.(Property)
	_, rp := e.Right.(Property)
	switch {
	case lp && rp:
		return nil, propErrorf(e.Left.(Property).Name, "comparing two properties (%s %s %s) is not supported; compare a property with a literal",
			truncate(e.Left.String()), e.Op, truncate(e.Right.String()))
	case !lp && !rp:
		return nil, errorf("comparison of two literals (%s %s %s); compare a property with a literal", truncate(e.Left.String()), e.Op, truncate(e.Right.String()))
	case rp:
		prop, lit, op = e.Right, e.Left, e.Op.flip()
	}
	if op == Ne {
		op, neg = Eq, !neg
	}
	name := prop.(Property).Name
	r, err := c.x.resolve(name)
	if err != nil {
		return nil, err
	}
	if r.attr == refGroup {
		if op != Eq {
			return nil, propErrorf(name, "only =, <>, IN and IS NULL apply to group, not %s", e.Op)
		}
		return c.groupLeaf(name, []Scalar{lit}, neg)
	}
	if op == Eq {
		return c.valueLeaf(r, name, string(e.Op), numPred{op: Eq}, []Scalar{lit}, neg)
	}
	return c.valueLeaf(r, name, string(e.Op), numPred{op: op}, []Scalar{lit}, neg)
}

func (c *checker) compileBetween(e *Between, neg bool) (*cnode, error) {
	r, name, err := c.operand(e.Value, "BETWEEN")
	if err != nil {
		return nil, err
	}
	if !c.numeric(r) {
		return nil, propErrorf(name, "BETWEEN applies to numeric properties; %q is %s", name, c.x.describe(r))
	}
	return c.valueLeaf(r, name, "BETWEEN", numPred{between: true}, []Scalar{e.Low, e.High}, neg)
}

func (c *checker) compileIn(e *In, neg bool) (*cnode, error) {
	r, name, err := c.operand(e.Value, "IN")
	if err != nil {
		return nil, err
	}
	if len(e.List) == 0 {
		return nil, propErrorf(name, "IN needs at least one value")
	}
	if r.attr == refGroup {
		return c.groupLeaf(name, e.List, neg)
	}
	return c.valueLeaf(r, name, "IN", numPred{op: Eq}, e.List, neg)
}

func (c *checker) compileLike(e *Like, neg bool) (*cnode, error) {
	r, name, err := c.operand(e.Value, "LIKE")
	if err != nil {
		return nil, err
	}
	if r.attr < 0 || (c.kind(r) != Categorical && c.kind(r) != String) {
		return nil, propErrorf(name, "LIKE applies to string and categorical properties; %q is %s", name, c.x.describe(r))
	}
	if msg := checkPattern(e.Pattern); msg != "" {
		return nil, propErrorf(name, "LIKE pattern %s %s", truncate(StringLit{e.Pattern}.String()), msg)
	}
	return c.columnLeaf(r, &leaf{kind: c.strKind(r), neg: neg, sp: strPred{op: spLike, like: compileLike(e.Pattern)}}), nil
}

func (c *checker) compileIsNull(e *IsNull, neg bool) (*cnode, error) {
	r, _, err := c.operand(e.Value, "IS NULL")
	if err != nil {
		return nil, err
	}
	switch r.attr {
	case refObjectID:
		return c.specialLeaf(&leaf{kind: lkObjectNull, neg: neg}, false), nil
	case refGroup:
		return c.specialLeaf(&leaf{kind: lkGroupNull, neg: neg}, true), nil
	}
	switch c.kind(r) {
	case Float:
		return c.columnLeaf(r, &leaf{kind: lkFloatNull, neg: neg}), nil
	case Categorical:
		return c.columnLeaf(r, &leaf{kind: lkCat, neg: neg, sp: strPred{op: spNull}}), nil
	}
	// Integers and strings are never null.
	if neg {
		return constNode(vTrue), nil
	}
	return constNode(vFalse), nil
}

func (c *checker) kind(r ref) Kind { return c.x.s.Queryables[r.attr].Kind }

func (c *checker) numeric(r ref) bool {
	if r.attr == refObjectID {
		return true
	}
	if r.attr == refGroup {
		return false
	}
	k := c.kind(r)
	return k == Float || k == Int || k == Uint
}

func (c *checker) strKind(r ref) leafKind {
	if c.kind(r) == Categorical {
		return lkCat
	}
	return lkString
}

// columnLeaf registers l as reading the column of r.
func (c *checker) columnLeaf(r ref, l *leaf) *cnode {
	a, ok := c.attrAt[r.attr]
	if !ok {
		a = len(c.f.attrs)
		c.attrAt[r.attr] = a
		c.f.attrs = append(c.f.attrs, r.attr)
	}
	sr := ref{attr: a, channel: r.channel}
	s, ok := c.slotAt[sr]
	if !ok {
		s = len(c.f.slots)
		c.slotAt[sr] = s
		c.f.slots = append(c.f.slots, sr)
		c.f.shared = append(c.f.shared, false)
	} else {
		c.f.shared[s] = true
	}
	l.slot = s
	return c.addLeaf(l)
}

// specialLeaf registers l as reading object ids (and groups).
func (c *checker) specialLeaf(l *leaf, groups bool) *cnode {
	c.f.ids = true
	c.f.groups = c.f.groups || groups
	return c.addLeaf(l)
}

func (c *checker) addLeaf(l *leaf) *cnode {
	l.id = len(c.f.leaves)
	c.f.leaves = append(c.f.leaves, l)
	return &cnode{op: cLeaf, leaf: l}
}

// groupLeaf is group = g or group IN (…): the literals must be integers.
func (c *checker) groupLeaf(name string, lits []Scalar, neg bool) (*cnode, error) {
	ids := make([]int64, 0, len(lits))
	for _, s := range lits {
		n, ok := s.(NumberLit)
		if !ok || !n.Int || (!n.Neg && n.Mag > math.MaxInt64) || (n.Neg && n.Mag > 1<<63) {
			return nil, propErrorf(name, "group ids are 64-bit integers; got %s", literalWords(s))
		}
		v := int64(n.Mag) // wraps to MinInt64 for -2⁶³, as it should
		if n.Neg {
			v = -v
		}
		ids = append(ids, v)
	}
	slices.Sort(ids)
	return c.specialLeaf(&leaf{kind: lkGroup, neg: neg, grp: slices.Compact(ids)}, true), nil
}

// numPred is a numeric predicate before it is fitted to a column's type:
// the value equal to one of the literals (op Eq), op the one literal, or
// between the two.
type numPred struct {
	op      CompareOp // Eq, Lt, Le, Gt, Ge
	between bool
}

// valueLeaf is a comparison, BETWEEN or IN of the property r with lits.
func (c *checker) valueLeaf(r ref, name, what string, p numPred, lits []Scalar, neg bool) (*cnode, error) {
	if r.attr == refObjectID {
		nums, err := c.numbers(r, name, lits)
		if err != nil {
			return nil, err
		}
		iv := p.integerIntervals(nums, big.NewInt(math.MinInt64), big.NewInt(math.MaxInt64))
		return c.specialLeaf(&leaf{kind: lkObject, neg: neg, iiv: toInt64(iv)}, false), nil
	}
	q := c.x.s.Queryables[r.attr]
	switch q.Kind {
	case Float:
		nums, err := c.numbers(r, name, lits)
		if err != nil {
			return nil, err
		}
		return c.columnLeaf(r, &leaf{kind: lkFloat, neg: neg, fiv: p.floatIntervals(nums)}), nil
	case Int, Uint:
		nums, err := c.numbers(r, name, lits)
		if err != nil {
			return nil, err
		}
		bits := q.Bits
		if bits == 0 {
			bits = 64
		}
		var lo, hi *big.Int
		if q.Kind == Int {
			lo = new(big.Int).Neg(new(big.Int).Lsh(big.NewInt(1), uint(bits-1)))
			hi = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(bits-1)), big.NewInt(1))
		} else {
			lo = big.NewInt(0)
			hi = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(bits)), big.NewInt(1))
		}
		iv := p.integerIntervals(nums, lo, hi)
		// Integers are never null: a test that no value or every value
		// passes is a constant.
		switch {
		case len(iv) == 0:
			return constNode(boolValue(neg)), nil
		case len(iv) == 1 && iv[0][0].Cmp(lo) == 0 && iv[0][1].Cmp(hi) == 0:
			return constNode(boolValue(!neg)), nil
		}
		if q.Kind == Int {
			return c.columnLeaf(r, &leaf{kind: lkInt, neg: neg, iiv: toInt64(iv)}), nil
		}
		uiv := make([]uInterval, len(iv))
		for i, v := range iv {
			uiv[i] = uInterval{v[0].Uint64(), v[1].Uint64()}
		}
		return c.columnLeaf(r, &leaf{kind: lkUint, neg: neg, uiv: uiv}), nil
	}
	// Categorical and String compare strings.
	strs := make([]string, len(lits))
	for i, s := range lits {
		v, ok := s.(StringLit)
		if !ok {
			return nil, propErrorf(name, "property %q is %s; it cannot be compared with %s", name, c.x.describe(r), literalWords(s))
		}
		strs[i] = v.Value
	}
	sp := strPred{op: spIn, vals: strs}
	switch {
	case p.between:
		return nil, propErrorf(name, "%s applies to numeric properties; %q is %s", what, name, c.x.describe(r))
	case p.op == Eq:
		slices.Sort(sp.vals)
		sp.vals = slices.Compact(sp.vals)
	default:
		sp.op, sp.vals = strOpOf(p.op), nil
		sp.lit = strs[0]
	}
	return c.columnLeaf(r, &leaf{kind: c.strKind(r), neg: neg, sp: sp}), nil
}

func boolValue(b bool) uint8 {
	if b {
		return vTrue
	}
	return vFalse
}

// numbers checks that every literal is a number.
func (c *checker) numbers(r ref, name string, lits []Scalar) ([]NumberLit, error) {
	nums := make([]NumberLit, len(lits))
	for i, s := range lits {
		n, ok := s.(NumberLit)
		if !ok {
			return nil, propErrorf(name, "property %q is %s; it cannot be compared with %s", name, c.x.describe(r), literalWords(s))
		}
		nums[i] = n
	}
	return nums, nil
}

// floatIntervals is the set of float64 values passing p with nums (read
// as float64): v < c is v <= the float64 just below c, and so on.
func (p numPred) floatIntervals(nums []NumberLit) []fInterval {
	inf := math.Inf(1)
	switch {
	case p.between:
		lo, hi := nums[0].Float, nums[1].Float
		if lo > hi {
			return nil
		}
		return []fInterval{{lo, hi}}
	case p.op == Lt:
		return []fInterval{{-inf, math.Nextafter(nums[0].Float, -inf)}}
	case p.op == Le:
		return []fInterval{{-inf, nums[0].Float}}
	case p.op == Gt:
		return []fInterval{{math.Nextafter(nums[0].Float, inf), inf}}
	case p.op == Ge:
		return []fInterval{{nums[0].Float, inf}}
	}
	pts := make([]float64, len(nums))
	for i, n := range nums {
		pts[i] = n.Float
	}
	slices.Sort(pts)
	pts = slices.Compact(pts)
	iv := make([]fInterval, len(pts))
	for i, v := range pts {
		iv[i] = fInterval{v, v}
	}
	return iv
}

// exact is the literal's value as the comparison reads it: an integer
// literal exactly, any other as its float64.
func (n NumberLit) exact() *big.Float {
	if n.Int {
		f := new(big.Float).SetUint64(n.Mag)
		if n.Neg {
			f.Neg(f)
		}
		return f
	}
	return big.NewFloat(n.Float)
}

func floorInt(x *big.Float) *big.Int {
	i, acc := x.Int(nil)
	if acc == big.Above {
		i.Sub(i, big.NewInt(1))
	}
	return i
}

func ceilInt(x *big.Float) *big.Int {
	i, acc := x.Int(nil)
	if acc == big.Below {
		i.Add(i, big.NewInt(1))
	}
	return i
}

// integerIntervals is the set of integers in [dlo, dhi] passing p with
// nums, exactly (x < 2.5 is x <= 2; x = 2.5 is nothing).
func (p numPred) integerIntervals(nums []NumberLit, dlo, dhi *big.Int) [][2]*big.Int {
	var lo, hi *big.Int
	switch {
	case p.between:
		lo, hi = ceilInt(nums[0].exact()), floorInt(nums[1].exact())
	case p.op == Lt:
		lo, hi = dlo, new(big.Int).Sub(ceilInt(nums[0].exact()), big.NewInt(1))
	case p.op == Le:
		lo, hi = dlo, floorInt(nums[0].exact())
	case p.op == Gt:
		lo, hi = new(big.Int).Add(floorInt(nums[0].exact()), big.NewInt(1)), dhi
	case p.op == Ge:
		lo, hi = ceilInt(nums[0].exact()), dhi
	default:
		var pts []*big.Int
		for _, n := range nums {
			v, acc := n.exact().Int(nil)
			if acc == big.Exact && v.Cmp(dlo) >= 0 && v.Cmp(dhi) <= 0 {
				pts = append(pts, v)
			}
		}
		sort.Slice(pts, func(i, j int) bool { return pts[i].Cmp(pts[j]) < 0 })
		pts = slices.CompactFunc(pts, func(a, b *big.Int) bool { return a.Cmp(b) == 0 })
		iv := make([][2]*big.Int, len(pts))
		for i, v := range pts {
			iv[i] = [2]*big.Int{v, v}
		}
		return iv
	}
	if lo.Cmp(dlo) < 0 {
		lo = dlo
	}
	if hi.Cmp(dhi) > 0 {
		hi = dhi
	}
	if lo.Cmp(hi) > 0 {
		return nil
	}
	return [][2]*big.Int{{lo, hi}}
}

// toInt64 converts intervals within the int64 range.
func toInt64(iv [][2]*big.Int) []iInterval {
	out := make([]iInterval, len(iv))
	for i, v := range iv {
		out[i] = iInterval{v[0].Int64(), v[1].Int64()}
	}
	return out
}

// Properties are the property names e uses, sorted, each once: with
// level=auto, a level qualifies only if it has all of them.
func Properties(e Expr) []string {
	var names []string
	var walk func(Expr)
	scalar := func(s Scalar) {
		if p, ok := s.(Property); ok {
			names = append(names, p.Name)
		}
	}
	walk = func(e Expr) {
		switch e := e.(type) {
		case *And:
			for _, a := range e.Args {
				walk(a)
			}
		case *Or:
			for _, a := range e.Args {
				walk(a)
			}
		case *Not:
			walk(e.Arg)
		case *Compare:
			scalar(e.Left)
			scalar(e.Right)
		case *Between:
			scalar(e.Value)
			scalar(e.Low)
			scalar(e.High)
		case *In:
			scalar(e.Value)
			for _, v := range e.List {
				scalar(v)
			}
		case *Like:
			scalar(e.Value)
		case *IsNull:
			scalar(e.Value)
		}
	}
	walk(e)
	slices.Sort(names)
	return slices.Compact(names)
}
