package zvf

import (
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/zvfserve/zvfserve/fragindex"
)

// TestNextChunksKeyPos: the key-index → candidate table finds a chunk
// among the candidates (and none outside them, nor for a key index that
// is none of the level's), and is all -1 again after each answer, also
// when a later answer's level has fewer or more keys — a stale entry
// would join an edge to the wrong chunk.
func TestNextChunksKeyPos(t *testing.T) {
	var n nextChunks
	for _, tc := range []struct {
		keys int
		cand []int32
	}{
		{10, []int32{2, 5, 7}},
		{4, []int32{0, 3}},
		{16, []int32{1, 9, 15}},
		{10, nil},
	} {
		ai := &answerIndex{l: &Level{keys: make([]Key, tc.keys)}, cand: tc.cand, byPos: make([]*rankedChunk, len(tc.cand))}
		for p := range ai.byPos {
			ai.byPos[p] = &rankedChunk{pos: p, cv: &chunkVerts{}}
		}
		n.index(ai)
		for ki := int32(-1); ki <= int32(tc.keys)+20; ki++ {
			d := n.of(ki)
			want := -1
			for p, c := range tc.cand {
				if c == ki {
					want = p
				}
			}
			switch {
			case want < 0 && d != nil:
				t.Errorf("keys %d: key %d is no candidate, found at position %d", tc.keys, ki, d.pos)
			case want >= 0 && (d == nil || d.pos != want):
				t.Errorf("keys %d: key %d: got %v, want position %d", tc.keys, ki, d, want)
			}
		}
		n.unindex(ai)
		for ki, p := range n.keyPos {
			if p != -1 {
				t.Fatalf("after an answer over %d keys: keyPos[%d] = %d, want -1", tc.keys, ki, p)
			}
		}
		if len(tc.cand) > 0 && n.of(tc.cand[0]) != nil {
			t.Errorf("keys %d: a chunk found after the answer", tc.keys)
		}
	}
}

// TestPrepBytesCoverThePreparation: what a chunk's preparation holds —
// its per-fragment tables and, on a level with objects, every row's id
// in the wire's form and a line level's edges — is within what
// prepBytes charged the cache's budget for it when its vertices were
// cached.
func TestPrepBytesCoverThePreparation(t *testing.T) {
	for _, rows := range []int{0, 1, 100, 5000} {
		cv := &chunkVerts{rows: rows}
		key := Key{0, 0, 0}
		inv := &inverse{lines: true, chunks: map[string]*chunkInverse{key.String(): {frags: []int64{0}, owner: []int64{42}, next: []fragRef{{}}, nextIn: []int32{-1}}}}
		p := buildPrep(cv, key, inv)
		if p == nil {
			t.Fatalf("%d rows: no preparation", rows)
		}
		held := 4*len(p.bounds) + 8*len(p.owner) + int(unsafe.Sizeof(contEntry{}))*len(p.cont) + len(p.ids) +
			8*cap(p.edges) + int(unsafe.Sizeof(edgeHole{}))*cap(p.holes)
		if charged := prepBytes(cv, true, true); int64(held) > charged {
			t.Errorf("%d rows: the preparation holds %d bytes, %d charged", rows, held, charged)
		}
		if len(p.edges) != max(rows-1, 0) {
			t.Errorf("%d rows in one fragment: %d prepared edges", rows, len(p.edges))
		}
		if len(p.ids) != 8*rows || rows > 0 && p.ids[8*rows-8] != 42 {
			t.Errorf("%d rows: %d id bytes", rows, len(p.ids))
		}
	}
}

// TestFragRanks: the branch-free merge gives each fragment the rank of
// the first row at or after its start, as the plain walk does, with
// empty fragments, rows before the first fragment's end, after the last
// and none at all.
func TestFragRanks(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := range 2000 {
		nf := r.IntN(12)
		bounds := make([]int32, nf+1)
		for f := 1; f <= nf; f++ {
			bounds[f] = bounds[f-1] + int32(r.IntN(5)) // 0: an empty fragment
		}
		var rows []int32
		for row := range bounds[nf] {
			if r.IntN(3) == 0 {
				rows = append(rows, row)
			}
		}
		want := make([]int32, len(bounds))
		i := 0
		for f, b := range bounds {
			for i < len(rows) && rows[i] < b {
				i++
			}
			want[f] = int32(i)
		}
		sc := &bboxScratch{rowArena: []int32{-7}}
		if got := fragRanks(sc, bounds, rows); !slices.Equal(got, want) {
			t.Fatalf("trial %d: bounds %v rows %v: %v, want %v", trial, bounds, rows, got, want)
		}
	}
}

// BenchmarkFragRanks: a cut chunk of the bench's streamline store —
// about 800 rows in 15 fragments, two thirds of them in the box, in runs.
func BenchmarkFragRanks(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	bounds := []int32{0}
	for len(bounds) < 16 {
		bounds = append(bounds, bounds[len(bounds)-1]+int32(20+r.IntN(80)))
	}
	var rows []int32
	in := true
	for row := range bounds[len(bounds)-1] {
		if r.IntN(20) == 0 {
			in = !in
		}
		if in {
			rows = append(rows, row)
		}
	}
	sc := &bboxScratch{}
	b.ReportAllocs()
	for b.Loop() {
		sc.rowArena = sc.rowArena[:0]
		fragRanks(sc, bounds, rows)
	}
}

// TestWholeEdgesAsTheWalk: a covered chunk that a page holds whole gets
// the same wire edges from its prepared edges (copies with its first
// answer index added, continuations to other chunks at their holes) as
// from the walk a fragment, with empty fragments first, between and
// last, and continuations in the chunk, into another and to nothing.
func TestWholeEdgesAsTheWalk(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	self, other := Key{0, 0, 0}, Key{0, 0, 1}
	for trial := range 500 {
		nf := 1 + r.IntN(12)
		frags := make([]fragindex.Fragment, nf)
		bounds := make([]int64, nf+1)
		for f := range nf {
			n := int64(r.IntN(5)) // 0: an empty fragment
			frags[f] = fragindex.RangeFragment(bounds[f], n)
			bounds[f+1] = bounds[f] + n
		}
		if bounds[nf] == 0 {
			continue
		}
		cv, ci, p := randomLineChunk(t, r, frags, bounds, self, other)
		if p == nil || p.edges == nil {
			t.Fatalf("trial %d: no prepared edges", trial)
		}
		held := 4*len(p.bounds) + 8*len(p.owner) + int(unsafe.Sizeof(contEntry{}))*len(p.cont) + len(p.ids) +
			8*cap(p.edges) + int(unsafe.Sizeof(edgeHole{}))*cap(p.holes)
		if charged := prepBytes(cv, true, true); int64(held) > charged {
			t.Fatalf("trial %d: the preparation holds %d bytes, %d charged", trial, held, charged)
		}
		walk := *p
		walk.edges, walk.holes = nil, nil
		// The other chunk: covered, before this one in the answer, its
		// fragment g holding rows [2g, 2g+2) but the empty fragment 1.
		d := &rankedChunk{all: true, start: 3, cv: &chunkVerts{rows: 6}, bounds: []int32{0, 2, 2, 4, 6}, boundsRead: true}
		answer := func(p *chunkPrep, known bool) []byte {
			if !known {
				for f := range p.cont {
					p.cont[f].row.Store(contRowUnknown) // each answer looks the rows up again
				}
			}
			c := &rankedChunk{all: true, start: 9 + int64(r.IntN(3)), cv: cv}
			sc := &bboxScratch{}
			ai := &answerIndex{l: &Level{keys: []Key{self, other}}, sc: sc, cand: []int32{1, 0}, byPos: []*rankedChunk{d, c}, to: 1 << 20}
			sc.next.index(ai)
			defer sc.next.unindex(ai)
			o := lineOut{wire: true, w: []byte{0xee}}
			p.lineEdges(&o, ai, c)
			return o.w
		}
		// Each twice: first looking the continuing rows up, then with
		// the rows the first answer kept (coveredNext's case).
		seed := r.Uint64()
		for _, known := range []bool{false, true} {
			r = rand.New(rand.NewPCG(seed, 1))
			got := answer(p, known)
			r = rand.New(rand.NewPCG(seed, 1))
			if want := answer(&walk, known); !slices.Equal(got, want) {
				t.Fatalf("trial %d (rows known: %v): bounds %v, inverse %+v:\nprepared %v\nwalk     %v", trial, known, bounds, ci, got, want)
			}
		}
	}
}

// TestCutEdgesByRowAsByFragment: a chunk the box cuts gets the same
// edges, in the same order, from the walk of its matching rows (what a
// coarse level's chunks of one-row fragments take) as from the walk a
// fragment, in wire and int64 form, for any rows matching, any page
// window over them, empty fragments anywhere, and continuations in the
// chunk, into another and to nothing.
func TestCutEdgesByRowAsByFragment(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	self, other := Key{0, 0, 0}, Key{0, 0, 1}
	for trial := range 2000 {
		nf := 1 + r.IntN(12)
		frags := make([]fragindex.Fragment, nf)
		bounds := make([]int64, nf+1)
		oneRow := trial%4 == 0 // a coarse level's chunk: a row a fragment
		for f := range nf {
			n := int64(r.IntN(4)) // 0: an empty fragment
			if oneRow {
				n = 1
			}
			frags[f] = fragindex.RangeFragment(bounds[f], n)
			bounds[f+1] = bounds[f] + n
		}
		if bounds[nf] == 0 {
			continue
		}
		cv, ci, p := randomLineChunk(t, r, frags, bounds, self, other)
		wantOneRow := true // also when chance made every fragment a row
		for f := range nf {
			wantOneRow = wantOneRow && bounds[f+1]-bounds[f] == 1
		}
		if p == nil || p.oneRow != wantOneRow {
			t.Fatalf("trial %d: preparation %v, bounds %v: want one row a fragment: %v", trial, p != nil, bounds, wantOneRow)
		}
		var rows []int32
		for row := range int32(cv.rows) {
			if r.IntN(3) > 0 {
				rows = append(rows, row)
			}
		}
		if len(rows) == 0 {
			continue
		}
		lo := r.IntN(len(rows))
		hi := lo + 1 + r.IntN(len(rows)-lo)
		start := int64(9 + r.IntN(3))
		to := start + int64(hi)
		if r.IntN(2) == 0 {
			to = 1 << 20 // continuations may reach past the window
		}
		wire := r.IntN(2) == 0
		dAll := r.IntN(2) == 0
		answer := func(byRow, known bool) ([]byte, []int64) {
			if !known {
				for f := range p.cont {
					p.cont[f].row.Store(contRowUnknown) // each answer looks the rows up again
				}
			}
			// The other chunk: before this one in the answer, its
			// fragment g holding rows [2g, 2g+2) but the empty fragment 1;
			// covered, or cut with rows 0, 2, 3 and 5 matching.
			d := &rankedChunk{start: 3, rows: []int32{0, 2, 3, 5}, cv: &chunkVerts{rows: 6}, bounds: []int32{0, 2, 2, 4, 6}, boundsRead: true}
			if dAll {
				d.all, d.rows = true, nil
			}
			c := &rankedChunk{start: start, rows: rows, cv: cv, prep: p} // as ranked leaves it
			sc := &bboxScratch{}
			ai := &answerIndex{l: &Level{keys: []Key{self, other}}, sc: sc, cand: []int32{1, 0}, byPos: []*rankedChunk{d, c}, from: start + int64(lo), to: to}
			sc.next.index(ai)
			defer sc.next.unindex(ai)
			o := lineOut{wire: wire}
			if wire {
				o.w = []byte{0xee}
			}
			if byRow {
				p.cutEdgesByRow(&o, ai, c, lo, hi)
			} else {
				p.cutEdgesByFrag(&o, ai, c, int64(lo), int64(hi))
			}
			return o.w, o.e
		}
		// Each twice: first looking the continuing rows up, then with
		// the rows the first answer kept.
		gotW, gotE := answer(true, false)
		gotKnownW, gotKnownE := answer(true, true)
		wantW, wantE := answer(false, false)
		wantKnownW, wantKnownE := answer(false, true)
		if !slices.Equal(gotW, wantW) || !slices.Equal(gotE, wantE) || !slices.Equal(gotKnownW, wantKnownW) || !slices.Equal(gotKnownE, wantKnownE) {
			t.Fatalf("trial %d: bounds %v, rows %v, window [%d, %d), wire %v, other chunk covered %v, inverse %+v:\nby row      %v %v, rows known %v %v\nby fragment %v %v, rows known %v %v",
				trial, bounds, rows, lo, hi, wire, dAll, ci, gotW, gotE, gotKnownW, gotKnownE, wantW, wantE, wantKnownW, wantKnownE)
		}
	}
}

// randomLineChunk prepares a line chunk of the fragments frags (rows
// bounds) at key self, whose fragments continue at random: to none, to
// one of its own (or to none of them), or into chunk other.
func randomLineChunk(t *testing.T, r *rand.Rand, frags []fragindex.Fragment, bounds []int64, self, other Key) (*chunkVerts, *chunkInverse, *chunkPrep) {
	t.Helper()
	nf := len(frags)
	b, err := fragindex.Encode(frags)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := fragindex.Decode(b, bounds[nf])
	if err != nil {
		t.Fatal(err)
	}
	cv := &chunkVerts{rows: int(bounds[nf]), frags: fi}
	ci := &chunkInverse{nextChunks: []string{self.String(), other.String()}, nextKey: []int32{0, 1}}
	for f := range nf {
		var nx fragRef
		in := int32(-1)
		switch r.IntN(4) {
		case 0:
			continue // named by no object
		case 1:
			nx, in = fragRef{ks: self.String(), frag: int64(r.IntN(nf + 1))}, 0 // nf: none of the chunk's
		case 2:
			nx, in = fragRef{ks: other.String(), frag: int64(r.IntN(4))}, 1
		}
		ci.frags = append(ci.frags, int64(f))
		ci.owner = append(ci.owner, int64(f))
		ci.next = append(ci.next, nx)
		ci.nextIn = append(ci.nextIn, in)
	}
	return cv, ci, buildPrep(cv, self, &inverse{lines: true, chunks: map[string]*chunkInverse{self.String(): ci}})
}
