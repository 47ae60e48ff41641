package cql2

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
)

// blockSize is how many rows go through the tree at a time: small enough
// that every intermediate stays in the L1 cache.
const blockSize = 512

// Evaluator evaluates a Filter over the rows of one chunk after another.
// Bind each of Filter.Attributes (and object ids and groups when the filter
// needs them) for a chunk, then call Eval, EvalRange, Select or
// SelectRange for its rows. Bindings stay until replaced. An Evaluator
// reuses its buffers, so a warm evaluation allocates nothing; it is not
// safe for concurrent use.
type Evaluator struct {
	f      *Filter
	cols   []binding   // per Filter.attrs
	slots  []slotBuf   // per Filter.slots
	leaves []leafState // per Filter.leaves
	ids    []int64
	none   int64
	idsSet bool
	groups Groups
	bufs   [][]uint8 // scratch per tree depth
	res    []uint8
	seq    []int32 // consecutive rows for the range calls
	gen    uint64  // counts blocks; a slot gathered in this block is reused
}

// slotBuf holds one (attribute, channel)'s values for the current block,
// widened to one of three types.
type slotBuf struct {
	gen uint64
	f   []float64
	i   []int64
	u   []uint64
}

type leafState struct {
	// Categorical: the outcome per code, worked out from the dictionary
	// labels (with null code null when hasNull), and of a code without a
	// label.
	tab     []uint8
	oob     uint8
	labels  []string
	null    int64
	hasNull bool
	built   bool
	// Group leaves: the outcome for object lastID, since a chunk's rows
	// come in runs of one object.
	lastID int64
	lastV  uint8
	memo   bool
}

// NewEvaluator returns an evaluator with nothing bound yet. Categorical
// tests start from the queryables' labels, so that MayMatch can tell
// before any chunk is read whether a filter can match at all.
func (f *Filter) NewEvaluator() *Evaluator {
	e := &Evaluator{
		f:      f,
		cols:   make([]binding, len(f.attrs)),
		slots:  make([]slotBuf, len(f.slots)),
		leaves: make([]leafState, len(f.leaves)),
		res:    make([]uint8, blockSize),
	}
	for i, a := range f.attrs {
		q := &f.schema.Queryables[a]
		e.cols[i].labels = q.Labels
		if q.NullCode != nil {
			e.cols[i].null, e.cols[i].hasNull = *q.NullCode, true
		}
	}
	e.buildTables()
	return e
}

// Bind binds attribute name's values for the chunk being evaluated. An
// attribute the filter does not need is ignored. A column that does not fit
// the queryable (kind, width, channels, a partial row) is an error.
func (e *Evaluator) Bind(name string, c Column) error {
	for i, a := range e.f.attrs {
		q := &e.f.schema.Queryables[a]
		if q.Name != name {
			continue
		}
		b, err := bind(q, c, &e.cols[i])
		if err != nil {
			return err
		}
		e.cols[i] = b
		if q.Kind == Categorical {
			e.buildTables()
		}
		return nil
	}
	return nil
}

// BindObjectIDs binds the rows' object ids (row r's object is ids[r]);
// none marks a row without an object, whose object_id and group are null.
func (e *Evaluator) BindObjectIDs(ids []int64, none int64) {
	e.ids, e.none, e.idsSet = ids, none, true
	e.forgetGroups()
}

// BindGroups binds group membership (it must answer for the objects of
// the ids bound).
func (e *Evaluator) BindGroups(g Groups) {
	e.groups = g
	e.forgetGroups()
}

func (e *Evaluator) forgetGroups() {
	for i := range e.leaves {
		e.leaves[i].memo = false
	}
}

// buildTables works out each categorical test per code of its
// attribute's dictionary, where the dictionary changed.
func (e *Evaluator) buildTables() {
	for _, l := range e.f.leaves {
		if l.kind != lkCat {
			continue
		}
		st := &e.leaves[l.id]
		b := &e.cols[e.f.slots[l.slot].attr]
		if st.built && sameStrings(st.labels, b.labels) && st.hasNull == b.hasNull && st.null == b.null {
			continue
		}
		st.built, st.labels, st.hasNull, st.null = true, b.labels, b.hasNull, b.null
		t, f, n := vTrue, vFalse, vUnknown // a label passing, failing; null
		if l.neg {
			t, f = f, t
		}
		if l.sp.op == spNull {
			n = t
		}
		st.tab = slices.Grow(st.tab[:0], len(b.labels))[:len(b.labels)]
		for code, label := range b.labels {
			switch {
			case b.hasNull && b.null == int64(code):
				st.tab[code] = n
			case l.sp.op == spNull:
				st.tab[code] = f
			case l.sp.match(label):
				st.tab[code] = t
			default:
				st.tab[code] = f
			}
		}
		st.oob = n
	}
}

// sameStrings reports whether a and b are the same slice (not merely
// equal): a dictionary bound again for the next chunk is not worked out
// again.
func sameStrings(a, b []string) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// MayMatch reports whether any row of the chunk bound could pass: false
// when the filter is false or unknown for every value the bindings allow.
// It uses what is known before rows are read: the categorical
// dictionaries (a label the dictionary lacks matches no row) and
// Constant columns (exact); other properties may take any value. Nothing
// needs to be bound: a fresh evaluator answers for the whole level from
// the queryables' labels (for a level whose chunks share that
// dictionary).
func (e *Evaluator) MayMatch() bool {
	return e.outcomes(e.f.root)&(1<<vTrue) != 0
}

// outcomes is the set of values (bit v for value v) n may take.
func (e *Evaluator) outcomes(n *cnode) uint8 {
	const all = 1<<vFalse | 1<<vUnknown | 1<<vTrue
	switch n.op {
	case cConst:
		return 1 << n.val
	case cLeaf:
		l := n.leaf
		switch l.kind {
		case lkObject, lkObjectNull, lkGroup, lkGroupNull:
			return all
		}
		b := &e.cols[e.f.slots[l.slot].attr]
		if b.set && b.constant {
			var v [1]uint8
			e.gen++
			e.evalLeaf(l, []int32{0}, v[:])
			return 1 << v[0]
		}
		switch l.kind {
		case lkCat:
			st := &e.leaves[l.id]
			m := uint8(1) << st.oob // a code without a label cannot be ruled out
			for _, v := range st.tab {
				m |= 1 << v
			}
			return m
		case lkInt, lkUint, lkString:
			return 1<<vFalse | 1<<vTrue
		}
		return all
	}
	m := e.outcomes(n.args[0])
	for _, a := range n.args[1:] {
		k := e.outcomes(a)
		var r uint8
		for _, x := range [...]uint8{vFalse, vUnknown, vTrue} {
			for _, y := range [...]uint8{vFalse, vUnknown, vTrue} {
				if m&(1<<x) != 0 && k&(1<<y) != 0 {
					if n.op == cAnd {
						r |= 1 << min(x, y)
					} else {
						r |= 1 << max(x, y)
					}
				}
			}
		}
		m = r
	}
	return m
}

// Eval sets out[i] to whether the filter is true for row rows[i] (an index
// into the bound columns); out must be at least as long as rows.
func (e *Evaluator) Eval(rows []int32, out []bool) error {
	if len(out) < len(rows) {
		return fmt.Errorf("cql2: Eval of %d rows into %d results", len(rows), len(out))
	}
	limit, err := e.ready()
	if err != nil {
		return err
	}
	for at := 0; at < len(rows); at += blockSize {
		blk := rows[at:min(at+blockSize, len(rows))]
		res, err := e.block(blk, limit)
		if err != nil {
			return err
		}
		o := out[at : at+len(res)]
		for i, v := range res {
			o[i] = v == vTrue
		}
	}
	return nil
}

// EvalRange is Eval of the rows start, start+1, …, start+len(out)-1.
func (e *Evaluator) EvalRange(start int, out []bool) error {
	limit, err := e.ready()
	if err != nil {
		return err
	}
	for at := 0; at < len(out); at += blockSize {
		blk, err := e.sequence(start+at, min(blockSize, len(out)-at))
		if err != nil {
			return err
		}
		res, err := e.block(blk, limit)
		if err != nil {
			return err
		}
		o := out[at : at+len(res)]
		for i, v := range res {
			o[i] = v == vTrue
		}
	}
	return nil
}

// Select appends to dst the rows (of rows, in order) for which the filter
// is true. dst may be rows[:0]: a match list filtered in place.
func (e *Evaluator) Select(dst, rows []int32) ([]int32, error) {
	limit, err := e.ready()
	if err != nil {
		return dst, err
	}
	for at := 0; at < len(rows); at += blockSize {
		blk := rows[at:min(at+blockSize, len(rows))]
		res, err := e.block(blk, limit)
		if err != nil {
			return dst, err
		}
		dst = appendTrue(dst, blk, res)
	}
	return dst, nil
}

// SelectRange appends to dst the rows among start … start+n-1 for which
// the filter is true.
func (e *Evaluator) SelectRange(dst []int32, start, n int) ([]int32, error) {
	limit, err := e.ready()
	if err != nil {
		return dst, err
	}
	for at := 0; at < n; at += blockSize {
		blk, err := e.sequence(start+at, min(blockSize, n-at))
		if err != nil {
			return dst, err
		}
		res, err := e.block(blk, limit)
		if err != nil {
			return dst, err
		}
		dst = appendTrue(dst, blk, res)
	}
	return dst, nil
}

// appendTrue appends the rows whose result is true, without a branch per
// row: every row is written, and the length advances past the true ones.
// In place (dst aliasing rows) a write never passes the row being read.
func appendTrue(dst, rows []int32, res []uint8) []int32 {
	n := len(dst)
	dst = slices.Grow(dst, len(rows))[:n+len(rows)]
	for i, v := range res {
		dst[n] = rows[i]
		n += int(v >> 1)
	}
	return dst[:n]
}

// sequence is the rows start … start+n-1.
func (e *Evaluator) sequence(start, n int) ([]int32, error) {
	if start < 0 || start > math.MaxInt32-n {
		return nil, fmt.Errorf("cql2: rows %d to %d are outside the int32 range", start, start+n-1)
	}
	if e.seq == nil {
		e.seq = make([]int32, blockSize)
	}
	s := e.seq[:n]
	for i := range s {
		s[i] = int32(start + i)
	}
	return s, nil
}

// ready checks that everything the filter reads is bound and returns how
// many rows the bindings hold.
func (e *Evaluator) ready() (int, error) {
	limit := math.MaxInt
	for i, b := range e.cols {
		if !b.set {
			return 0, fmt.Errorf("cql2: attribute %q is not bound", e.f.schema.Queryables[e.f.attrs[i]].Name)
		}
		limit = min(limit, b.rows)
	}
	if e.f.NeedsObjectIDs() {
		if !e.idsSet {
			return 0, fmt.Errorf("cql2: object ids are not bound")
		}
		limit = min(limit, len(e.ids))
	}
	if e.f.groups && e.groups == nil {
		return 0, fmt.Errorf("cql2: groups are not bound")
	}
	return limit, nil
}

// block evaluates the filter for up to blockSize rows, each below limit.
func (e *Evaluator) block(rows []int32, limit int) ([]uint8, error) {
	if limit < math.MaxInt {
		var most uint32
		for _, r := range rows {
			most = max(most, uint32(r)) // a negative row reads as a huge one
		}
		if len(rows) > 0 && uint64(most) >= uint64(limit) {
			for _, r := range rows {
				if r < 0 || int(r) >= limit {
					return nil, fmt.Errorf("cql2: row %d is outside the %d rows bound", r, limit)
				}
			}
		}
	}
	e.gen++
	res := e.res[:len(rows)]
	e.evalInto(e.f.root, rows, res, 0)
	return res, nil
}

// scratch is the buffer of tree depth d.
func (e *Evaluator) scratch(d, n int) []uint8 {
	for len(e.bufs) <= d {
		e.bufs = append(e.bufs, make([]uint8, blockSize))
	}
	return e.bufs[d][:n]
}

// evalInto writes n's value for each row into dst.
func (e *Evaluator) evalInto(n *cnode, rows []int32, dst []uint8, depth int) {
	switch n.op {
	case cConst:
		for i := range dst {
			dst[i] = n.val
		}
		return
	case cLeaf:
		e.evalLeaf(n.leaf, rows, dst)
		return
	}
	e.evalInto(n.args[0], rows, dst, depth+1)
	tmp := e.scratch(depth, len(rows))
	for _, a := range n.args[1:] {
		// Stop once every row is decided: all false under AND, all true
		// under OR.
		if n.op == cAnd && allFalse(dst) || n.op == cOr && allTrue(dst) {
			return
		}
		e.evalInto(a, rows, tmp, depth+1)
		if n.op == cAnd {
			andInto(dst, tmp)
		} else {
			orInto(dst, tmp)
		}
	}
}

// With false 0, unknown 1 and true 3, Kleene's AND is the bitwise AND of
// the values and OR the bitwise OR, so the combining loops take eight rows
// a word.

func andInto(dst, src []uint8) {
	src = src[:len(dst)]
	i := 0
	for ; i+8 <= len(dst); i += 8 {
		binary.LittleEndian.PutUint64(dst[i:], binary.LittleEndian.Uint64(dst[i:])&binary.LittleEndian.Uint64(src[i:]))
	}
	for ; i < len(dst); i++ {
		dst[i] &= src[i]
	}
}

func orInto(dst, src []uint8) {
	src = src[:len(dst)]
	i := 0
	for ; i+8 <= len(dst); i += 8 {
		binary.LittleEndian.PutUint64(dst[i:], binary.LittleEndian.Uint64(dst[i:])|binary.LittleEndian.Uint64(src[i:]))
	}
	for ; i < len(dst); i++ {
		dst[i] |= src[i]
	}
}

func allFalse(v []uint8) bool {
	var acc uint64
	i := 0
	for ; i+8 <= len(v); i += 8 {
		acc |= binary.LittleEndian.Uint64(v[i:])
	}
	for ; i < len(v); i++ {
		acc |= uint64(v[i])
	}
	return acc == 0
}

func allTrue(v []uint8) bool {
	const ones = uint64(vTrue) * 0x0101010101010101
	acc := ones
	i := 0
	for ; i+8 <= len(v); i += 8 {
		acc &= binary.LittleEndian.Uint64(v[i:])
	}
	for ; i < len(v); i++ {
		acc &= uint64(v[i]) * 0x0101010101010101
	}
	return acc == ones
}

// b2u is 1 for true, 0 for false (compiled without a branch).
func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// The slot readers gather a slot's values for this block once, however
// many leaves read them.

func (e *Evaluator) floats(slot int, rows []int32) []float64 {
	return gatherSlot(e, slot, rows, &e.slots[slot].f, gatherFloat)
}

func (e *Evaluator) ints(slot int, rows []int32) []int64 {
	return gatherSlot(e, slot, rows, &e.slots[slot].i, gatherInt)
}

func (e *Evaluator) uints(slot int, rows []int32) []uint64 {
	return gatherSlot(e, slot, rows, &e.slots[slot].u, gatherUint)
}

// gatherSlot fills buf, one of slot's three widenings, with the rows'
// values unless this block already did, and returns them.
func gatherSlot[T any](e *Evaluator, slot int, rows []int32, buf *[]T, gather func([]T, *binding, int, []int32)) []T {
	if *buf == nil {
		*buf = make([]T, blockSize)
	}
	if s := &e.slots[slot]; s.gen != e.gen {
		sr := e.f.slots[slot]
		b := &e.cols[sr.attr]
		gather(*buf, b, sr.channel*b.size, rows)
		s.gen = e.gen
	}
	return (*buf)[:len(rows)]
}

// evalLeaf writes l's value for each row into dst.
func (e *Evaluator) evalLeaf(l *leaf, rows []int32, dst []uint8) {
	nb := b2u(l.neg)
	switch l.kind {
	case lkFloat:
		if sr := e.f.slots[l.slot]; len(l.fiv) == 1 && !e.f.shared[l.slot] {
			// The common case, a column one test reads, in one pass.
			b := &e.cols[sr.attr]
			switch b.dt {
			case dtF32:
				floatKernel32(dst, b.data, b.stride, sr.channel*4, rows, l.fiv[0], nb)
				return
			case dtF64:
				floatKernel64(dst, b.data, b.stride, sr.channel*8, rows, l.fiv[0], nb)
				return
			}
		}
		floatKernel(dst, e.floats(l.slot, rows), l.fiv, nb)
	case lkFloatNull:
		for i, v := range e.floats(l.slot, rows) {
			dst[i] = (b2u(!(math.Abs(v) <= math.MaxFloat64)) ^ nb) * vTrue // NaN and ±Inf are null
		}
	case lkInt:
		intKernel(dst, e.ints(l.slot, rows), l.iiv, nb)
	case lkUint:
		uintKernel(dst, e.uints(l.slot, rows), l.uiv, nb)
	case lkCat:
		st := &e.leaves[l.id]
		tab, oob, n := st.tab, st.oob, uint64(len(st.tab))
		for i, c := range e.uints(l.slot, rows) {
			if c < n {
				dst[i] = tab[c]
			} else {
				dst[i] = oob
			}
		}
	case lkString:
		b := &e.cols[e.f.slots[l.slot].attr]
		for i, r := range rows {
			if b.constant {
				r = 0
			}
			dst[i] = (b2u(l.sp.match(b.strs[r])) ^ nb) * vTrue
		}
	case lkObject:
		e.objectKernel(l, rows, dst, nb)
	case lkObjectNull:
		for i, r := range rows {
			dst[i] = (b2u(e.ids[r] == e.none) ^ nb) * vTrue
		}
	case lkGroup, lkGroupNull:
		e.groupKernel(l, rows, dst, nb)
	}
}

// floatKernel: unknown for NaN and ±Inf, else whether v is in iv (xor
// neg). Every step is branch-free: fin is 1 for a finite value (NaN fails
// the comparison too), and the result is t when fin, else unknown.
func floatKernel(dst []uint8, vals []float64, iv []fInterval, nb uint8) {
	if len(iv) == 1 {
		lo, hi := iv[0].lo, iv[0].hi
		for i, v := range vals {
			t := ((b2u(v >= lo) & b2u(v <= hi)) ^ nb) * vTrue
			fin := b2u(math.Abs(v) <= math.MaxFloat64)
			dst[i] = t&(fin*vTrue) | (fin ^ 1)
		}
		return
	}
	for i, v := range vals {
		t := (b2u(inIntervals(v, iv)) ^ nb) * vTrue
		fin := b2u(math.Abs(v) <= math.MaxFloat64)
		dst[i] = t&(fin*vTrue) | (fin ^ 1)
	}
}

// floatKernel32 is floatKernel of one interval reading float32 values
// straight from the column; a value is finite unless its exponent bits are
// all ones.
func floatKernel32(dst []uint8, data []byte, stride, off int, rows []int32, iv fInterval, nb uint8) {
	lo, hi := iv.lo, iv.hi
	dst = dst[:len(rows)]
	for i, r := range rows {
		o := int(r)*stride + off
		bits := binary.LittleEndian.Uint32(data[o : o+4])
		v := float64(math.Float32frombits(bits))
		t := ((b2u(v >= lo) & b2u(v <= hi)) ^ nb) * vTrue
		fin := b2u(bits&0x7f800000 != 0x7f800000)
		dst[i] = t&(fin*vTrue) | (fin ^ 1)
	}
}

// floatKernel64 is floatKernel32 for float64 values.
func floatKernel64(dst []uint8, data []byte, stride, off int, rows []int32, iv fInterval, nb uint8) {
	lo, hi := iv.lo, iv.hi
	dst = dst[:len(rows)]
	for i, r := range rows {
		o := int(r)*stride + off
		bits := binary.LittleEndian.Uint64(data[o : o+8])
		v := math.Float64frombits(bits)
		t := ((b2u(v >= lo) & b2u(v <= hi)) ^ nb) * vTrue
		fin := b2u(bits&0x7ff0000000000000 != 0x7ff0000000000000)
		dst[i] = t&(fin*vTrue) | (fin ^ 1)
	}
}

// inIntervals reports whether v lies in one of iv (sorted and disjoint):
// a binary search over many intervals, a scan over a few.
func inIntervals[T float64 | int64 | uint64](v T, iv []interval[T]) bool {
	if len(iv) > 8 {
		i, _ := slices.BinarySearchFunc(iv, v, func(x interval[T], v T) int {
			if x.hi < v {
				return -1
			}
			if x.lo > v {
				return 1
			}
			return 0
		})
		return i < len(iv) && iv[i].lo <= v && v <= iv[i].hi
	}
	for _, x := range iv {
		if v >= x.lo && v <= x.hi {
			return true
		}
	}
	return false
}

func intKernel(dst []uint8, vals []int64, iv []iInterval, nb uint8) {
	if len(iv) == 1 {
		lo, span := iv[0].lo, uint64(iv[0].hi-iv[0].lo)
		for i, v := range vals {
			dst[i] = (b2u(uint64(v-lo) <= span) ^ nb) * vTrue
		}
		return
	}
	for i, v := range vals {
		dst[i] = (b2u(inIntervals(v, iv)) ^ nb) * vTrue
	}
}

func uintKernel(dst []uint8, vals []uint64, iv []uInterval, nb uint8) {
	if len(iv) == 1 {
		lo, span := iv[0].lo, iv[0].hi-iv[0].lo
		for i, v := range vals {
			dst[i] = (b2u(v-lo <= span) ^ nb) * vTrue
		}
		return
	}
	for i, v := range vals {
		dst[i] = (b2u(inIntervals(v, iv)) ^ nb) * vTrue
	}
}

// objectKernel: unknown without an object, else whether the id is in iiv.
func (e *Evaluator) objectKernel(l *leaf, rows []int32, dst []uint8, nb uint8) {
	ids, none := e.ids, e.none
	for i, r := range rows {
		id := ids[r]
		if id == none {
			dst[i] = vUnknown
			continue
		}
		dst[i] = (b2u(inIntervals(id, l.iiv)) ^ nb) * vTrue
	}
}

// groupKernel: group = g (IN …) is unknown for a row without an object or
// whose object is in no group, else whether the object is in one of the
// groups; group IS NULL is true for those rows.
func (e *Evaluator) groupKernel(l *leaf, rows []int32, dst []uint8, nb uint8) {
	st := &e.leaves[l.id]
	ids, none, g := e.ids, e.none, e.groups
	for i, r := range rows {
		id := ids[r]
		if st.memo && id == st.lastID {
			dst[i] = st.lastV
			continue
		}
		var v uint8
		switch {
		case l.kind == lkGroupNull:
			v = (b2u(id == none || !g.Grouped(id)) ^ nb) * vTrue
		case id == none || !g.Grouped(id):
			v = vUnknown
		default:
			in := false
			for _, gid := range l.grp {
				if g.Member(gid, id) {
					in = true
					break
				}
			}
			v = (b2u(in) ^ nb) * vTrue
		}
		st.lastID, st.lastV, st.memo = id, v, true
		dst[i] = v
	}
}
