package zvf

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"sync"

	"github.com/zvfserve/zvfserve/zvf/ragged"
	"github.com/zvfserve/zvfserve/zvf/zarr"
)

func le64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }

type conn struct {
	edges, faces []int64
	faceWidth    int
}

// connect rebuilds connectivity among a set of rows. lookup maps (chunk,
// row) to the answer's row index; frags lists each chunk's fragments (rows
// in order) for the implicit-sequential skeleton rule.
//
// Graph: links/0 edges and cross-chunk edges with both ends present.
// Skeleton: explicit [child, parent] links win; otherwise a row's parent is
// the previous row of its fragment (no edge is invented across chunk seams
// or between trees, unlike the reference reader). Mesh: faces whose
// corners are all present.
func (l *Level) connect(ctx context.Context, keys []Key, lookup func(ks string, row int64) (int64, bool), frags map[string][][]int64) (conn, error) {
	var c conn
	geom := l.geometry()
	if geom != "graph" && geom != "skeleton" && geom != "mesh" {
		return c, nil
	}
	explicitChild := map[string]map[int64]bool{}
	mark := func(ks string, row int64) {
		m := explicitChild[ks]
		if m == nil {
			m = map[int64]bool{}
			explicitChild[ks] = m
		}
		m[row] = true
	}
	emit := func(idx []int64, width int) {
		if width == 2 {
			c.edges = append(c.edges, idx...)
		} else {
			c.faces = append(c.faces, idx...)
			c.faceWidth = width
		}
	}
	idx := make([]int64, 0, 8)
	if w := l.linkWidth; l.intra != "" {
		for _, key := range keys {
			ks := key.String()
			links, err := l.links0(ctx, key)
			if err != nil {
				return c, err
			}
			for r := 0; r+w <= len(links); r += w {
				rec := links[r : r+w]
				if geom == "skeleton" {
					mark(ks, rec[0])
				}
				idx = idx[:0]
				ok := true
				for _, v := range rec {
					i, found := lookup(ks, v)
					if !found {
						ok = false
						break
					}
					idx = append(idx, i)
				}
				if ok {
					emit(idx, w)
				}
			}
		}
	}
	ccl, err := l.lay.crossLinks(ctx, 0, keys)
	if err != nil {
		return c, err
	}
	for _, rec := range ccl {
		if geom == "skeleton" && len(rec) == 2 {
			mark(Key(rec[0].Chunk).String(), rec[0].Row)
		}
		idx = idx[:0]
		ok := true
		for _, ep := range rec {
			i, found := lookup(Key(ep.Chunk).String(), ep.Row)
			if !found {
				ok = false
				break
			}
			idx = append(idx, i)
		}
		if ok {
			emit(idx, len(rec))
		}
	}
	if geom == "skeleton" {
		for _, key := range keys { // in key order, not map order: equal requests give equal bytes
			ks := key.String()
			fl := frags[ks]
			ex := explicitChild[ks]
			for _, rows := range fl {
				for i := 1; i < len(rows); i++ {
					if ex[rows[i]] {
						continue
					}
					a, ok1 := lookup(ks, rows[i])
					b, ok2 := lookup(ks, rows[i-1])
					if ok1 && ok2 {
						c.edges = append(c.edges, a, b)
					}
				}
			}
		}
	}
	return c, nil
}

// links0 returns the rows of a chunk's links among its own rows
// (link_width int64 each, endpoints in the order written).
func (l *Level) links0(ctx context.Context, key Key) ([]int64, error) {
	ks := key.String()
	v, err := l.cached(ctx, l.cacheKey("links0", ks), func(ctx context.Context) (any, int64, error) {
		b, err := l.blob(ctx, l.intra, key)
		if errors.Is(err, ErrNotFound) {
			return []int64{}, 16, nil
		}
		if err != nil {
			return nil, 0, err
		}
		rows, sigma, err := ragged.DecodeLinkCell(b, true, l.linkWidth, l.intraPerm)
		if err != nil {
			return nil, 0, l.s.errf(ErrCorrupt, l.n, l.intra, ks, "%w", err)
		}
		cv, err := l.vertices(ctx, key)
		if err != nil {
			return nil, 0, err
		}
		for _, v := range rows {
			if v >= int64(cv.rows) {
				return nil, 0, l.s.errf(ErrCorrupt, l.n, l.intra, ks, "link endpoint %d outside the chunk's %d rows", v, cv.rows)
			}
		}
		out := ragged.InputOrder(rows, sigma, l.linkWidth)
		return out, int64(len(b)) + 24, nil
	})
	if err != nil {
		return nil, err
	}
	return v.([]int64), nil
}

func (l *Level) groups(ctx context.Context) (*ragged.Groups, error) {
	v, err := l.cached(ctx, l.cacheKey("groups"), func(ctx context.Context) (any, int64, error) {
		if l.s.format == format09 {
			return l.groups09(ctx)
		}
		read := func(name string) ([]byte, error) {
			a, err := zarr.OpenArray(ctx, l.s.st, join(l.path, "groups/"+name), l.s.codecs)
			if err != nil {
				return nil, l.s.wrap(kindOf(err), l.n, "groups/"+name, "", err)
			}
			b, err := a.ReadBytes(ctx)
			if err != nil {
				return nil, l.s.wrap(kindOf(err), l.n, "groups/"+name, "", err)
			}
			return b, nil
		}
		d, err := read("data")
		if err != nil {
			return nil, 0, err
		}
		o, err := read("offsets")
		if err != nil {
			return nil, 0, err
		}
		g, err := ragged.DecodeGroups(d, o)
		if err != nil {
			return nil, 0, l.s.errf(ErrCorrupt, l.n, "groups", "", "%w", err)
		}
		return g, int64(len(d)+len(o)) * 2, nil
	})
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, l.s.errf(ErrNotFound, l.n, "groups", "", "level %d has no groups", l.n)
		}
		return nil, err
	}
	return v.(*ragged.Groups), nil
}

// groups09 reads ZVF 0.9's groups: one variable-length array, element g
// holding group g's member ids (little-endian int64), or empty for a range
// group whose [start, stop) is in group_ranges.
func (l *Level) groups09(ctx context.Context) (any, int64, error) {
	arr, err := zarr.OpenArray(ctx, l.s.st, join(l.path, "groups"), l.s.codecs)
	if err != nil {
		return nil, 0, l.s.wrap(kindOf(err), l.n, "groups", "", err)
	}
	if m := arr.Meta(); len(m.Shape) != 1 || !m.DataType.Variable() {
		return nil, 0, l.s.errf(ErrCorrupt, l.n, "groups", "", "%s, where ZVF 0.9 groups are a 1-D variable_length_bytes array", m)
	}
	c, err := arr.Read(ctx)
	if err != nil {
		return nil, 0, l.s.wrap(kindOf(err), l.n, "groups", "", err)
	}
	// Range members are not backed by bytes: at most one per object (or
	// 2^24 on a level without an object index).
	maxRange := int64(1 << 24)
	if l.objects != nil {
		maxRange = l.objects.num
	}
	g, err := ragged.GroupsFromElements(c.Elems, l.groupRanges, maxRange)
	if err != nil {
		return nil, 0, l.s.errf(ErrCorrupt, l.n, "groups", "", "%w", err)
	}
	var size int64 = 64
	for _, e := range c.Elems {
		size += int64(len(e)) + 24
	}
	return g, 2 * size, nil
}

// inverseOnce lazily maps (chunk, fragment) to the object ids that name
// it, and to the fragment that follows it in each object's manifest.
type inverseOnce struct {
	once sync.Once
	inv  *inverse
	err  error
}

type fragRef struct {
	ks   string
	frag int64
}

// inverse answers, for every fragment some manifest names: which object
// names it first, and which fragment follows it in that object's path.
// Per chunk, fragments are kept sorted so a bbox walks them alongside the
// chunk's own fragments instead of looking each one up.
type inverse struct {
	chunks map[string]*chunkInverse
}

type chunkInverse struct {
	frags []int64   // fragment numbers, ascending
	owner []int64   // first object naming frags[i]
	next  []fragRef // the fragment after frags[i] in that path; ks "" when none
}

// of returns the chunk's entries (nil when no manifest names it), looked up
// without building the key string.
func (inv *inverse) of(key Key) *chunkInverse {
	var buf [96]byte
	return inv.chunks[string(key.appendTo(buf[:0]))]
}

func (l *Level) inverseMap(ctx context.Context) (*inverse, error) {
	l.inverse.once.Do(func() {
		l.inverse.inv, l.inverse.err = l.buildInverse(ctx)
	})
	return l.inverse.inv, l.inverse.err
}

// invEntry is one manifest's mention of a fragment, in the order objects
// and their paths name them.
type invEntry struct {
	frag, owner int64
	next        fragRef
	hasNext     bool
}

// buildInverse reads every manifest once. Mentions are appended to their
// chunk's list (the chunk's key is looked up once per manifest block, not
// per fragment), then each list is sorted stably by fragment: the first
// mention names the owner, the first with a successor names the next
// fragment — the same answer as visiting objects in id order.
func (l *Level) buildInverse(ctx context.Context) (*inverse, error) {
	index := map[string]int{}
	var keys []string
	var lists [][]invEntry
	var kbuf [96]byte
	for row := int64(0); row < l.objects.num; row++ {
		id, err := l.objectAt(ctx, row) // the row itself, or object_ids[row] (vlen_manifests_v2)
		if err != nil {
			return nil, err
		}
		blocks, err := l.refsRow(ctx, id, row)
		if err != nil {
			return nil, err
		}
		prevChunk, prevPos := -1, 0
		for _, b := range blocks {
			kb := Key(b.Chunk).appendTo(kbuf[:0])
			c, ok := index[string(kb)] // no allocation for a known chunk
			if !ok {
				c = len(keys)
				index[string(kb)] = c
				keys = append(keys, string(kb))
				lists = append(lists, nil)
			}
			ks := keys[c]
			for j := int64(0); j < b.Len(); j++ {
				f := b.Fragment(j)
				if prevChunk >= 0 {
					if e := &lists[prevChunk][prevPos]; !e.hasNext {
						e.next, e.hasNext = fragRef{ks, f}, true
					}
				}
				lists[c] = append(lists[c], invEntry{frag: f, owner: id})
				prevChunk, prevPos = c, len(lists[c])-1
			}
		}
	}
	inv := &inverse{chunks: make(map[string]*chunkInverse, len(keys))}
	for c, list := range lists {
		slices.SortStableFunc(list, func(a, b invEntry) int { return cmp.Compare(a.frag, b.frag) })
		ci := &chunkInverse{frags: make([]int64, 0, len(list)), owner: make([]int64, 0, len(list)), next: make([]fragRef, 0, len(list))}
		for i := 0; i < len(list); {
			j := i + 1
			for j < len(list) && list[j].frag == list[i].frag {
				j++
			}
			ci.frags = append(ci.frags, list[i].frag)
			ci.owner = append(ci.owner, list[i].owner)
			var next fragRef
			for _, e := range list[i:j] {
				if e.hasNext {
					next = e.next
					break
				}
			}
			ci.next = append(ci.next, next)
			i = j
		}
		inv.chunks[keys[c]] = ci
	}
	return inv, nil
}

// fragFirst returns the first row of fragment f of cv (a chunk without a
// fragment index is one fragment); ok is false when it is empty.
func fragFirst(cv *chunkVerts, f int) (int64, bool) {
	if cv.frags == nil {
		return 0, f == 0 && cv.rows > 0
	}
	if s, c, isRange := cv.frags.Range(f); isRange {
		return s, c > 0
	}
	ix := cv.frags.Indices(f)
	if len(ix) == 0 {
		return 0, false
	}
	return ix[0], true
}

// polylineEdges joins consecutive rows of every fragment of the emitted
// chunks, and a fragment's last row to the first row of the fragment that
// continues its streamline in another chunk, when both ends are in the
// answer. Edges come out in chunk, fragment, row order, so equal requests
// give equal bytes.
func (l *Level) polylineEdges(res *BBoxResult, emitted []*chunkMatch, answer [][]int32, pos map[string]int, inv *inverse) {
	for ci, m := range emitted {
		idx := answer[ci]
		fi := m.cv.frags
		nf := 1
		if fi != nil {
			nf = fi.Len()
		}
		var ci *chunkInverse
		if inv != nil {
			ci = inv.of(m.key)
		}
		e := 0 // ci's entry for fragment f, walked alongside
		for f := 0; f < nf; f++ {
			var prev int32 // answer index + 1 of the fragment's previous row
			step := func(r int64) {
				a := idx[r]
				if prev != 0 && a != 0 {
					res.Edges = append(res.Edges, int64(prev-1), int64(a-1))
				}
				prev = a
			}
			if fi == nil {
				for r := int64(0); r < int64(m.cv.rows); r++ {
					step(r)
				}
			} else if s, c, isRange := fi.Range(f); isRange {
				for r := s; r < s+c; r++ {
					step(r)
				}
			} else {
				for _, r := range fi.Indices(f) {
					step(r)
				}
			}
			if ci == nil || prev == 0 {
				continue // no continuation, or this fragment's last row is not in the answer
			}
			for e < len(ci.frags) && ci.frags[e] < int64(f) {
				e++
			}
			if e == len(ci.frags) || ci.frags[e] != int64(f) || ci.next[e].ks == "" {
				continue
			}
			nx := ci.next[e]
			j, ok := pos[nx.ks]
			if !ok {
				continue
			}
			r, ok := fragFirst(emitted[j].cv, int(nx.frag))
			if !ok || r >= int64(len(answer[j])) || answer[j][r] == 0 {
				continue
			}
			res.Edges = append(res.Edges, int64(prev-1), int64(answer[j][r]-1))
		}
	}
}

func (l *Level) bboxConnectivity(ctx context.Context, res *BBoxResult, emitted []*chunkMatch, answer [][]int32, inv *inverse) error {
	pos := make(map[string]int, len(emitted)) // chunk key -> index into emitted
	for i, m := range emitted {
		pos[m.key.String()] = i
	}
	lookup := func(ks string, row int64) (int64, bool) {
		i, ok := pos[ks]
		if !ok || row < 0 || row >= int64(len(answer[i])) || answer[i][row] == 0 {
			return 0, false
		}
		return int64(answer[i][row] - 1), true
	}
	// Empty, not absent: a client can tell "no edges here" from "this
	// geometry has none".
	if l.geometry() == "mesh" {
		res.Faces, res.FaceWidth = []int64{}, max(l.linkWidth, 3)
	} else {
		res.Edges = []int64{}
	}
	switch l.geometry() {
	case "polyline", "streamline", "line":
		res.Edges = make([]int64, 0, 2*res.Count) // about one edge a vertex
		l.polylineEdges(res, emitted, answer, pos, inv)
		return nil
	}
	frags := map[string][][]int64{}
	keys := make([]Key, 0, len(emitted))
	for _, m := range emitted {
		keys = append(keys, m.key)
		var fl [][]int64
		if m.cv.frags == nil {
			all := make([]int64, m.cv.rows)
			for i := range all {
				all[i] = int64(i)
			}
			fl = append(fl, all)
		} else {
			for f := 0; f < m.cv.frags.Len(); f++ {
				fl = append(fl, m.cv.frags.AppendRows(nil, f))
			}
		}
		frags[m.key.String()] = fl
	}
	c, err := l.connect(ctx, keys, lookup, frags)
	if err != nil {
		return err
	}
	if c.edges != nil {
		res.Edges = c.edges
	}
	if c.faces != nil {
		res.Faces, res.FaceWidth = c.faces, c.faceWidth
	}
	return nil
}
