package zvf

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/zvfserve/zvfserve/zvf/cql2"
)

// Selection narrows the rows of a box query (bbox, count, density): a
// CQL2 filter, then a sample of the objects that pass it. The answer is
// the unselected answer's rows for which both hold, in the same order.
type Selection struct {
	// Filter keeps the rows for which it is true (nil: every row). It is
	// checked against each level's queryables (Level.Queryables).
	Filter cql2.Expr
	// Sample, in (0, 1], keeps a row iff SampleHash of its object's id
	// (of its position, for a row without an object) is below
	// Sample·2⁶⁴; 0 and 1 keep every row.
	Sample float64
}

func (q Selection) active() bool { return q.Filter != nil || (q.Sample > 0 && q.Sample < 1) }

// SampleHash is the hash sampling keeps an object by: the first output of
// SplitMix64 seeded with the id (two's complement as a uint64). It is a
// function of the id alone, so every level, box, page and replica keeps
// the same objects.
func SampleHash(id int64) uint64 { return splitmix64(uint64(id)) }

// PositionHash is the hash sampling keeps a row without an object by:
// h = 0, then for each coordinate x in axis order h = SplitMix64(h XOR
// the IEEE 754 bits of x widened exactly to float64).
func PositionHash(coords []float64) uint64 {
	h := uint64(0)
	for _, x := range coords {
		h = splitmix64(h ^ math.Float64bits(x))
	}
	return h
}

func splitmix64(x uint64) uint64 {
	z := x + 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// sampleThreshold is the hash bound below which rows are kept: hash/2⁶⁴
// < f is hash < ⌈f·2⁶⁴⌉ for an integer hash (f·2⁶⁴ is exact in float64).
func sampleThreshold(f float64) uint64 { return uint64(math.Ceil(f * 0x1p64)) }

// Queryables is what a filter may name at this level: its single- and
// multi-channel numeric and categorical vertex attributes, object_id where
// rows have objects (an object index) and group where the level has
// groups. An attribute named object_id or group is hidden by the special
// property where the level has it. Object attributes are not queryable.
func (l *Level) Queryables() cql2.Schema {
	l.schemaOnce.Do(func() {
		s := cql2.Schema{ObjectID: l.objects != nil, Group: l.numGroups > 0}
		for _, a := range l.vattrs {
			if q, ok := l.queryable(a, &s); ok {
				s.Queryables = append(s.Queryables, q)
			}
		}
		l.schema = s
	})
	s := l.schema
	s.Queryables = slices.Clone(s.Queryables) // the caller's to keep
	return s
}

// schemaRef returns the level's queryables without a copy (not to be
// modified).
func (l *Level) schemaRef() *cql2.Schema {
	l.Queryables()
	return &l.schema
}

// queryable describes a vertex attribute as cql2 sees it.
func (l *Level) queryable(a *attrMeta, s *cql2.Schema) (cql2.Queryable, bool) {
	if (s.ObjectID && a.Name == cql2.PropObjectID) || (s.Group && a.Name == cql2.PropGroup) {
		return cql2.Queryable{}, false
	}
	q := cql2.Queryable{Name: a.Name, Channels: max(a.Channels, 1)}
	switch {
	case a.Categories != nil:
		if a.dt.Kind == KindFloat {
			return q, false // codes must be integers
		}
		q.Kind, q.Labels, q.NullCode = cql2.Categorical, a.Categories, a.nullCode
	case a.dt.Kind == KindFloat:
		q.Kind, q.Bits = cql2.Float, 8*a.dt.Size
	case a.dt.Kind == KindInt:
		q.Kind, q.Bits = cql2.Int, 8*a.dt.Size
	case a.dt.Name == "bool":
		q.Kind = cql2.Uint // false 0, true 1
	case a.dt.Kind == KindUint:
		q.Kind, q.Bits = cql2.Uint, 8*a.dt.Size
	default:
		return q, false
	}
	return q, true
}

// missing returns the properties e names that this level lacks (sorted),
// each with why: an attribute it does not have, object_id without an
// object index, group without groups. A channel past the last or a
// multi-channel attribute named whole is not missing: CompileFilter says
// what is wrong with it.
func (l *Level) missing(e cql2.Expr) []string {
	s := l.schemaRef()
	var out []string
	for _, name := range cql2.Properties(e) {
		if l.hasProperty(s, name) {
			continue
		}
		out = append(out, name)
	}
	return out
}

func (l *Level) hasProperty(s *cql2.Schema, name string) bool {
	if (name == cql2.PropObjectID && s.ObjectID) || (name == cql2.PropGroup && s.Group) {
		return true
	}
	base := name
	if open := strings.LastIndexByte(name, '['); open > 0 && strings.HasSuffix(name, "]") {
		base = name[:open]
	}
	for _, q := range s.Queryables {
		if q.Name == name || q.Name == base {
			return true
		}
	}
	return false
}

// CompileFilter checks e against the level's queryables. A property the
// level lacks is an error (matching ErrBadQuery and wrapping a
// *cql2.Error) that names it and the level; any other misfit is cql2's
// *cql2.Error, wrapped the same way.
func (l *Level) CompileFilter(e cql2.Expr) (*cql2.Filter, error) {
	s := l.schemaRef()
	if miss := l.missing(e); len(miss) > 0 {
		return nil, l.s.errf(ErrBadQuery, l.n, "", "", "%w", l.missingError(s, miss[0]))
	}
	f, err := cql2.Check(e, s) // Check keeps its own copy
	if err != nil {
		return nil, l.s.errf(ErrBadQuery, l.n, "", "", "%w", err)
	}
	return f, nil
}

// missingError says that the level lacks property name, and what it has.
func (l *Level) missingError(s *cql2.Schema, name string) *cql2.Error {
	var why string
	switch {
	case name == cql2.PropObjectID:
		why = fmt.Sprintf("level %d has no object index, so no object_id", l.n)
	case name == cql2.PropGroup:
		why = fmt.Sprintf("level %d has no groups", l.n)
	case strings.HasPrefix(name, "object."):
		why = fmt.Sprintf("level %d has no vertex attribute %q (object attributes are not queryable)", l.n, name)
	default:
		why = fmt.Sprintf("level %d has no attribute %q", l.n, name)
	}
	var names []string
	for _, q := range s.Queryables {
		if q.Channels > 1 {
			names = append(names, fmt.Sprintf("%s[0] to %s[%d]", q.Name, q.Name, q.Channels-1))
		} else {
			names = append(names, q.Name)
		}
	}
	if s.ObjectID {
		names = append(names, cql2.PropObjectID)
	}
	if s.Group {
		names = append(names, cql2.PropGroup)
	}
	has := "nothing is queryable there"
	if len(names) > 0 {
		has = "its queryables are " + strings.Join(names, ", ")
	}
	return &cql2.Error{Msg: why + "; " + has, Pos: -1, Property: name}
}

// rowFilter is one query's selection compiled for a level: what narrows
// each chunk's box matches, identically wherever a chunk is matched (the
// page, the earlier chunks a page's connections reach back to, counts).
type rowFilter struct {
	l      *Level
	f      *cql2.Filter // nil: no filter
	attrs  []*attrMeta  // the attributes f reads, in f.Attributes() order
	akeys  [][]string   // per attribute, its cache key per chunk index
	owners bool         // rows need their objects (object_id, group, or a sample)
	inv    *inverse
	groups cql2.Groups
	sample bool
	thresh uint64 // sample: keep iff hash < thresh
	// none: no row of the level can pass (nothing is read).
	none bool
	// main evaluates chunks matched in place; free holds the evaluators
	// of chunks matched concurrently.
	main *cql2.Evaluator
	free chan *cql2.Evaluator
	// sels names the cached selections of the level's chunks for this
	// filter (nil: not cached, the store has no cache or the query no
	// filter).
	sels *selTable
}

// newRowFilter compiles q for the level; nil when q selects every row.
func (l *Level) newRowFilter(ctx context.Context, q Selection) (*rowFilter, error) {
	if q.Sample < 0 || q.Sample > 1 || math.IsNaN(q.Sample) {
		return nil, l.s.errf(ErrBadQuery, l.n, "", "", "sample %v is outside (0, 1]", q.Sample)
	}
	if !q.active() {
		return nil, nil
	}
	rf := &rowFilter{l: l}
	if q.Sample > 0 && q.Sample < 1 {
		rf.sample, rf.thresh = true, sampleThreshold(q.Sample)
		rf.owners = l.objects != nil
	}
	if q.Filter != nil {
		f, err := l.CompileFilter(q.Filter)
		if err != nil {
			return nil, err
		}
		rf.f = f
		for _, name := range f.Attributes() {
			i := slices.IndexFunc(l.vattrs, func(a *attrMeta) bool { return a.Name == name })
			if i < 0 {
				return nil, fmt.Errorf("zvf: filter attribute %q is not a vertex attribute", name) // Check resolved it: cannot happen
			}
			rf.attrs = append(rf.attrs, l.vattrs[i])
			rf.akeys = append(rf.akeys, l.attrKeys(l.vattrs[i]))
		}
		if f.NeedsObjectIDs() {
			rf.owners = true
		}
		if f.NeedsGroups() {
			if rf.groups, err = l.groupSets(ctx); err != nil {
				return nil, err
			}
		}
		rf.main = rf.newEvaluator()
		rf.none = !rf.main.MayMatch()
		rf.free = make(chan *cql2.Evaluator, l.s.conc)
		if l.s.cache != nil {
			if rf.sels, err = l.selTable(ctx, f); err != nil {
				return nil, err
			}
		}
	}
	if rf.owners {
		var err error
		if rf.inv, err = l.inverseMap(ctx); err != nil {
			return nil, err
		}
	}
	return rf, nil
}

func (rf *rowFilter) newEvaluator() *cql2.Evaluator {
	ev := rf.f.NewEvaluator()
	if rf.groups != nil {
		ev.BindGroups(rf.groups)
	}
	return ev
}

// evaluator lends an evaluator to a chunk matched concurrently; give it
// back with release.
func (rf *rowFilter) mainEvaluator() *cql2.Evaluator {
	if rf == nil {
		return nil
	}
	return rf.main
}

func (rf *rowFilter) evaluator() *cql2.Evaluator {
	if rf == nil || rf.f == nil {
		return nil
	}
	select {
	case ev := <-rf.free:
		return ev
	default:
		return rf.newEvaluator()
	}
}

func (rf *rowFilter) release(ev *cql2.Evaluator) {
	if rf == nil || ev == nil {
		return
	}
	select {
	case rf.free <- ev:
	default:
	}
}

// cachedAt reports whether everything the filter reads of chunk i is in
// the cache, so the chunk can be matched in place without a read.
func (rf *rowFilter) cachedAt(i int32) bool {
	if rf == nil {
		return true
	}
	if rf.sels != nil {
		if _, ok := rf.peekSel(i); ok {
			return true
		}
	}
	for _, keys := range rf.akeys {
		if _, ok := rf.l.s.peek(keys[i]); !ok {
			return false
		}
	}
	return true
}

// attrKeys returns the cache keys of attribute a's blob in each chunk
// (index as l.keys), built once per level.
func (l *Level) attrKeys(a *attrMeta) []string {
	l.akeysMu.Lock()
	defer l.akeysMu.Unlock()
	if keys, ok := l.akeys[a.Name]; ok {
		return keys
	}
	keys := make([]string, len(l.keys))
	for i, k := range l.keys {
		keys[i] = l.cacheKey("blob", "vertex_attributes/"+a.Name, k.String())
	}
	if l.akeys == nil {
		l.akeys = map[string][]string{}
	}
	l.akeys[a.Name] = keys
	return keys
}

// column is filter attribute k's rows of chunk key (rows rows): its
// cached blob found by its key built once (no key string per chunk), else
// read through the cache.
func (rf *rowFilter) column(ctx context.Context, k int, key Key, rows int) ([]byte, int, error) {
	l, a := rf.l, rf.attrs[k]
	var buf [96]byte
	if i, ok := l.keySet[string(key.appendTo(buf[:0]))]; ok {
		if v, ok := l.s.peek(rf.akeys[k][i]); ok {
			return l.attrRows(a, key, rows, v.([]byte))
		}
	}
	return l.attribute(ctx, a, key, rows)
}

// bind gives ev the columns the filter reads of chunk key (rows rows)
// and, when it reads them, the rows' objects (owner).
func (rf *rowFilter) bind(ctx context.Context, ev *cql2.Evaluator, key Key, rows int, owner []int64) error {
	l := rf.l
	for k, a := range rf.attrs {
		data, ch, err := rf.column(ctx, k, key, rows)
		if err != nil {
			return err
		}
		if ch != max(a.Channels, 1) {
			return l.s.errf(ErrUnsupported, l.n, "vertex_attributes/"+a.Name, key.String(),
				"%d channels in this chunk, where the level declares %d (no channel_names): the attribute cannot be filtered", ch, max(a.Channels, 1))
		}
		col := cql2.Column{DType: a.dt.Name, Data: data, Channels: ch, Labels: a.Categories, NullCode: a.nullCode}
		if err := ev.Bind(a.Name, col); err != nil {
			return err
		}
	}
	if rf.f.NeedsObjectIDs() {
		ev.BindObjectIDs(owner, -1)
	}
	return nil
}

// apply narrows m's rows to those the selection keeps, with ev (the
// filter's evaluator for this goroutine). m's owners are filled when the
// selection reads them. m's rows are its own (m.buf).
func (rf *rowFilter) apply(ctx context.Context, m *chunkMatch, ev *cql2.Evaluator) error {
	if m.count() == 0 {
		return nil
	}
	l := rf.l
	if rf.owners {
		m.owner = l.chunkOwners(m.owner[:0], m.key, m.cv, rf.inv)
		m.owned = true
	}
	if rf.f != nil {
		if err := rf.bind(ctx, ev, m.key, m.cv.rows, m.owner); err != nil {
			return err
		}
		var err error
		if m.all {
			m.rows, err = ev.SelectRange(m.rows[:0], 0, m.cv.rows)
			m.all = false
		} else {
			m.rows, err = ev.Select(m.rows[:0], m.rows)
		}
		m.buf = m.rows
		if err != nil {
			return err
		}
	}
	if rf.sample {
		rf.sampleMatch(m)
	}
	return nil
}

// sampleMatch narrows m's rows to the sampled ones, in its own buffer.
func (rf *rowFilter) sampleMatch(m *chunkMatch) {
	switch {
	case m.all:
		m.rows = appendRun(m.buf[:0], 0, m.cv.rows)
		m.all = false
	case len(m.rows) == 0:
		return
	case len(m.buf) > 0 && &m.rows[0] == &m.buf[0]:
	default: // a cached selection's rows: copied before they are narrowed
		m.rows = append(m.buf[:0], m.rows...)
	}
	m.vdata, m.vpos = nil, nil
	m.rows = rf.sampleRows(m)
	m.buf = m.rows
}

// sampleRows keeps m's rows whose object (or, without one, position)
// hashes below the threshold, in place. A chunk's rows come in runs of one
// object, so each run is hashed once.
func (rf *rowFilter) sampleRows(m *chunkMatch) []int32 {
	rows := m.rows
	out := rows[:0]
	lastID, lastKeep := int64(-1), false
	d := rf.l.s.dims
	f32 := rf.l.vdt.Name == "float32" // PositionHash without a call per coordinate
	var coords [maxDims]float64
	for _, r := range rows {
		id := int64(-1)
		if m.owned {
			id = m.owner[r]
		}
		var keep bool
		switch {
		case id >= 0 && id == lastID:
			keep = lastKeep
		case id >= 0:
			keep = SampleHash(id) < rf.thresh
			lastID, lastKeep = id, keep
		case f32:
			h, p := uint64(0), m.cv.data[4*d*int(r):]
			for a := 0; a < d; a++ {
				h = splitmix64(h ^ math.Float64bits(float64(math.Float32frombits(binary.LittleEndian.Uint32(p[4*a:])))))
			}
			keep = h < rf.thresh
		default:
			for a := 0; a < d; a++ {
				coords[a] = rf.l.vdt.At(m.cv.data, int(r)*d+a).Float64()
			}
			keep = PositionHash(coords[:d]) < rf.thresh
		}
		if keep {
			out = append(out, r)
		}
	}
	return out
}

// chunkOwners gives each row of a chunk the (first) object whose manifest
// names its fragment, -1 when none does, into dst (returned grown).
func (l *Level) chunkOwners(dst []int64, key Key, cv *chunkVerts, inv *inverse) []int64 {
	owner := slices.Grow(dst[:0], cv.rows)[:cv.rows]
	for i := range owner {
		owner[i] = -1
	}
	fi := cv.frags
	ci := inv.of(key)
	switch {
	case ci == nil: // no manifest names this chunk's fragments
	case fi == nil: // the chunk is one fragment
		if len(ci.frags) > 0 && ci.frags[0] == 0 {
			for i := range owner {
				owner[i] = ci.owner[0]
			}
		}
	default:
		for e, f := range ci.frags {
			if f < 0 || f >= int64(fi.Len()) {
				continue // a manifest naming a fragment the chunk does not have
			}
			id := ci.owner[e]
			if s, c, isRange := fi.Range(int(f)); isRange {
				for r := s; r < s+c; r++ {
					if owner[r] < 0 {
						owner[r] = id
					}
				}
				continue
			}
			for _, r := range fi.Indices(int(f)) {
				if owner[r] < 0 {
					owner[r] = id
				}
			}
		}
	}
	return owner
}

// groupSets is the level's group membership as a filter reads it, built
// once per store version.
func (l *Level) groupSets(ctx context.Context) (cql2.Groups, error) {
	v, err := l.cached(ctx, l.cacheKey("groupsets"), func(ctx context.Context) (any, int64, error) {
		g, err := l.groups(ctx)
		if err != nil {
			return nil, 0, err
		}
		members := make(map[int64][]int64, g.Len())
		n := int64(0)
		for i := 0; i < g.Len(); i++ {
			members[int64(i)] = g.Members(i)
			n += int64(len(g.Members(i)))
		}
		return cql2.NewGroupSets(members), 64 + 48*n, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(cql2.Groups), nil
}
