package zvf

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/zvfserve/zvfserve/zvf/manifest"
)

// inverseOnce lazily maps (chunk, fragment) to the object ids that name
// it, and to the fragment that follows it in each object's manifest
// (built from every manifest on first use, then kept with the level).
// A build that fails — a cancelled request, a backend blip — is not kept:
// the next caller builds again, so one failure never fails every later
// answer of the version.
type inverseOnce struct {
	inv      atomic.Pointer[inverse]
	mu       sync.Mutex
	building chan struct{} // closed when the build in progress ends; nil when none is
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
	// lines: the level's geometry is a line's (its chunks' preparations
	// then hold their edges, see chunkPrep.edges).
	lines  bool
	chunks map[string]*chunkInverse
	// byKey is chunks by the level's key index (nil where no manifest
	// names the chunk): a bbox finds a page chunk's entries by its
	// candidate's index, without building and hashing its key string.
	byKey []*chunkInverse
}

type chunkInverse struct {
	frags []int64   // fragment numbers, ascending
	owner []int64   // first object naming frags[i]
	next  []fragRef // the fragment after frags[i] in that path; ks "" when none
	// nextChunks lists the chunks the next references name, each once in
	// the order first named, and nextIn[i] is next[i]'s among them (-1
	// when none): a bbox resolves each neighbour once per chunk, not once
	// per fragment.
	nextChunks []string
	nextKey    []int32 // nextChunks' indices among the level's keys, -1 when not one
	nextIn     []int32
	// The fragments whose next is frags[i]: prev[prevAt[i]:prevAt[i+1]]
	// (line geometries only; a page needs the continuations that reach
	// back into it).
	prevAt []int32
	prev   []fragRef
}

// prevs lists the fragments whose next is entry e.
func (ci *chunkInverse) prevs(e int) []fragRef {
	if ci.prevAt == nil {
		return nil
	}
	return ci.prev[ci.prevAt[e]:ci.prevAt[e+1]]
}

// of returns the chunk's entries (nil when no manifest names it), looked up
// without building the key string.
func (inv *inverse) of(key Key) *chunkInverse {
	var buf [96]byte
	return inv.chunks[string(key.appendTo(buf[:0]))]
}

// ofChunk is of for a chunk of a bbox answer, found by its candidate's key
// index.
func (inv *inverse) ofChunk(ai *answerIndex, c *rankedChunk) *chunkInverse {
	if c.pos >= 0 && c.pos < len(ai.cand) {
		if ki := int(ai.cand[c.pos]); ki >= 0 && ki < len(inv.byKey) {
			return inv.byKey[ki]
		}
	}
	return inv.of(c.key)
}

func (l *Level) inverseMap(ctx context.Context) (*inverse, error) {
	o := &l.inverse
	for {
		if inv := o.inv.Load(); inv != nil {
			return inv, nil
		}
		o.mu.Lock()
		if b := o.building; b != nil {
			o.mu.Unlock()
			select {
			case <-b: // built, or failed: look again
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		b := make(chan struct{})
		o.building = b
		o.mu.Unlock()
		inv, err := l.buildInverse(ctx)
		o.mu.Lock()
		if err == nil {
			o.inv.Store(inv)
		}
		o.building = nil
		o.mu.Unlock()
		close(b)
		return inv, err
	}
}

// invEntry is one manifest's mention of a fragment, in the order objects
// and their paths name them.
type invEntry struct {
	frag, owner int64
	next        fragRef
	hasNext     bool
}

// buildInverse reads every stored manifest once (eachManifest: its work
// follows what is stored, not num_objects). Mentions are appended to their
// chunk's list (the chunk's key is looked up once per manifest block, not
// per fragment), then each list is sorted stably by fragment: the first
// mention names the owner, the first with a successor names the next
// fragment — the same answer as visiting objects in id order.
func (l *Level) buildInverse(ctx context.Context) (*inverse, error) {
	index := map[string]int{}
	var keys []string
	var lists [][]invEntry
	var kbuf [96]byte
	// Every mention is kept, outside the cache's budget, and a manifest
	// may name the same fragments again and again (a few KB of zstd named
	// 6.1 million): the entries are bounded like an array read whole.
	lim := l.s.codecs.Limits().MaxReadBytes
	maxMentions := lim / int64(unsafe.Sizeof(invEntry{}))
	var mentions int64
	tooMany := func(id int64) error {
		return l.s.errf(ErrUnsupported, l.n, "object_index/manifests", "", "the manifests name more than %d fragments (object %d and before): their owners map would pass the %d-byte limit of an array read whole",
			maxMentions, id, lim)
	}
	visit := func(id int64, blocks []manifest.Block) error {
		for _, b := range blocks {
			if mentions += b.Len(); mentions > maxMentions {
				return tooMany(id)
			}
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
		return nil
	}
	// Rows repeating a manifest visited before (the fill value's) would
	// only add later mentions of the same fragments: neither the first
	// owner nor the first next changes, so only the count is kept.
	again := func(row, n int64, blocks []manifest.Block) error {
		var m int64
		for _, b := range blocks {
			m += b.Len() // at most maxMentions: the row visited before passed
		}
		if m == 0 {
			return nil
		}
		if k := (maxMentions - mentions) / m; k < n {
			id, err := l.objectAt(ctx, row+k)
			if err != nil {
				return err
			}
			return tooMany(id)
		}
		mentions += n * m
		return nil
	}
	if err := l.eachManifest(ctx, visit, again, nil); err != nil {
		return nil, err
	}
	inv := &inverse{lines: l.lines(), chunks: make(map[string]*chunkInverse, len(keys)), byKey: make([]*chunkInverse, len(l.keys))}
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
		ci.indexNext(l.keySet)
		inv.chunks[keys[c]] = ci
		if ki, ok := l.keySet[keys[c]]; ok {
			inv.byKey[ki] = ci
		}
	}
	switch l.geometry() {
	case "polyline", "streamline", "line":
		inv.linkPrevs(keys)
	}
	return inv, nil
}

// indexNext fills nextChunks and nextIn from next. The references to a
// chunk share its key string, so a repeat is found by a pointer
// comparison (at most a few dozen neighbours: a linear scan).
func (ci *chunkInverse) indexNext(keySet map[string]int) {
	ci.nextIn = make([]int32, len(ci.next))
	for e, nx := range ci.next {
		ci.nextIn[e] = -1
		if nx.ks == "" {
			continue
		}
		k := slices.Index(ci.nextChunks, nx.ks)
		if k < 0 {
			k = len(ci.nextChunks)
			ci.nextChunks = append(ci.nextChunks, nx.ks)
			ki, ok := keySet[nx.ks]
			if !ok {
				ki = -1
			}
			ci.nextKey = append(ci.nextKey, int32(ki))
		}
		ci.nextIn[e] = int32(k)
	}
}

// linkPrevs fills every entry's prev list from the next links, visiting
// chunks in the order given (so the lists do not depend on map order).
func (inv *inverse) linkPrevs(keys []string) {
	at := func(ref fragRef) (*chunkInverse, int) {
		t := inv.chunks[ref.ks]
		if t == nil {
			return nil, 0
		}
		j, ok := slices.BinarySearch(t.frags, ref.frag)
		if !ok {
			return nil, 0
		}
		return t, j
	}
	for _, ks := range keys {
		ci := inv.chunks[ks]
		ci.prevAt = make([]int32, len(ci.frags)+1)
	}
	for _, ks := range keys { // count, into prevAt[j+1]
		for _, nx := range inv.chunks[ks].next {
			if t, j := at(nx); t != nil && nx.ks != "" {
				t.prevAt[j+1]++
			}
		}
	}
	for _, ks := range keys {
		ci := inv.chunks[ks]
		for j := 1; j < len(ci.prevAt); j++ {
			ci.prevAt[j] += ci.prevAt[j-1]
		}
		ci.prev = make([]fragRef, ci.prevAt[len(ci.frags)])
	}
	fill := map[*chunkInverse][]int32{}
	for _, ks := range keys {
		ci := inv.chunks[ks]
		for e, nx := range ci.next {
			t, j := at(nx)
			if t == nil || nx.ks == "" {
				continue
			}
			n := fill[t]
			if n == nil {
				n = make([]int32, len(t.frags))
				fill[t] = n
			}
			t.prev[t.prevAt[j]+n[j]] = fragRef{ks: ks, frag: ci.frags[e]}
			n[j]++
		}
	}
}

// fragLast returns the last row of fragment f of cv, as fragFirst.
func fragLast(cv *chunkVerts, f int) (int64, bool) {
	if cv.frags == nil {
		return int64(cv.rows) - 1, f == 0 && cv.rows > 0
	}
	if f < 0 || f >= cv.frags.Len() {
		return 0, false // a manifest naming a fragment the chunk does not have
	}
	if s, c, isRange := cv.frags.Range(f); isRange {
		return s + c - 1, c > 0
	}
	ix := cv.frags.Indices(f)
	if len(ix) == 0 {
		return 0, false
	}
	return ix[len(ix)-1], true
}

// fragFirst returns the first row of fragment f of cv (a chunk without a
// fragment index is one fragment); ok is false when it is empty.
func fragFirst(cv *chunkVerts, f int) (int64, bool) {
	if cv.frags == nil {
		return 0, f == 0 && cv.rows > 0
	}
	if f < 0 || f >= cv.frags.Len() {
		return 0, false // a manifest naming a fragment the chunk does not have
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
