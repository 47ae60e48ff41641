package zvf

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zvfserve/zvfserve/cache"
)

// levelTable holds a small line level's chunks together, prepared once
// for the level rather than once a chunk: every chunk's vertices and
// preparation by key index, each chunk's first row in the level's row
// numbering (a global row), and per global row whether it starts its
// fragment and which global row continues it. A warm answer then matches
// the chunks its box touches, copies their batches, and joins its rows
// with one pass over them, a continuation being an index into the table
// instead of a look-up of the chunk it leads to (a coarse level's answer
// is hundreds of chunks of a few rows, where those per-chunk steps cost
// more than the rows). It answers exactly as the per-chunk path (see
// tableBBox), and only what that path answers the same for: levels whose
// chunks are all prepared with non-empty fragments.
type levelTable struct {
	cvs   []*chunkVerts
	preps []*chunkPrep
	// start[i] is chunk i's first global row; start[len(cvs)] the level's rows.
	start []int32
	// head[g]: global row g is its fragment's first (no edge from g-1).
	head []bool
	// cont[g]: the global row continuing g's streamline when g is its
	// fragment's last row and something continues it, else -1.
	cont []int32
	// verts and ids: every global row's vertex and wire-form owner id,
	// in global row order; inCell: chunk i's rows lie in its cell. An
	// answer reads these, not each chunk's structs (a cache miss or two
	// a chunk).
	verts, ids []byte
	inCell     []bool
}

// tableState is a level's table bookkeeping: off once the level is found
// unfit for a table (too large for the cache, a chunk without a
// preparation, a corrupt or unsupported chunk), so no request tries again; ref finds the
// cached table without hashing its key; key is its cache key.
type tableState struct {
	once  sync.Once
	key   string
	fit   bool
	limit int64 // bytes a table may hold
	off   atomic.Bool
	ref   atomic.Pointer[cache.Ref]
	// building: a build is under way (in the background, see levelTable).
	building atomic.Bool
	// retryAt (unix ns by the storage's clock, 0: none) is when a build
	// may start again after one failed on a storage error; failures
	// counts those failures in a row, each doubling the wait.
	retryAt  atomic.Int64
	failures atomic.Int32
	// answers counts the answers the table gave, builds the tables
	// built (tests read them).
	answers, builds atomic.Int64
}

// tableShare: a level's table may take at most this share of the cache's
// budget (its vertices included, which it keeps alive).
const tableShare = 16

// tableRowsPerChunk: a table is for levels of small chunks, where the
// per-chunk path's steps a chunk outweigh its rows. With larger chunks
// the per-chunk path copies a covered chunk's prepared edges whole, and
// the table's row-at-a-time answer was slower: the bench's streamline
// level 0 (781 rows a chunk) took 775–793 µs a 50k answer against
// 553–576 without it; level 1 (15 a chunk) 73–83 against 100–110.
const tableRowsPerChunk = 64

// errNoTable: the level has a chunk the table does not cover.
var errNoTable = errors.New("zvf: level not fit for a level table")

// tableFits reports, once per level, whether the level may have a table:
// a line level with objects whose vertices, ids and row tables fit
// 1/tableShare of a byte-budgeted cache.
func (l *Level) tableFits() bool {
	t := &l.table
	t.once.Do(func() {
		t.key = l.cacheKey("leveltable")
		st, ok := l.s.cache.(interface{ Stats() cache.Stats })
		if !ok || l.s.noTables || !l.lines() || l.objects == nil || len(l.keys) == 0 {
			return
		}
		t.limit = st.Stats().Budget / tableShare
		rows := l.meta.VertexCount
		t.fit = rows < 1<<31-1 && l.tableBytes(rows) <= t.limit &&
			(l.s.tablesAnyChunk || rows <= tableRowsPerChunk*int64(len(l.keys)))
	})
	return t.fit && !t.off.Load()
}

// tableBytes is about what a table of rows rows holds: each row's vertex
// twice (the chunk's and the table's copy), its id twice, its row tables,
// and each chunk's structs.
func (l *Level) tableBytes(rows int64) int64 {
	return rows*int64(2*l.vdt.Size*l.s.dims+8+8+4+1) + int64(len(l.keys))*(256+4)
}

// levelTable returns the level's table, or nil when it has none yet;
// the answer then takes the per-chunk path at once. A level read before
// (a level's first answer reads only its own box) that has no table gets
// one built in the background: one build a level at a time, reading the
// chunks not cached l.s.conc at a time, under the store's background
// context (retiring the version or Close ends it), never under a
// request's. A build that finds a chunk the table does not cover, a
// corrupt or unsupported chunk (a Draco level), or that panics, turns the
// table off for this version of the store, so no later request starts
// another; one that ends with the store's context leaves a later request
// to try again, and one that met a storage error too, once a wait has
// passed (see buildFailed).
func (l *Level) levelTable(inv *inverse) *levelTable {
	if !l.tableFits() {
		return nil
	}
	t := &l.table
	if rc := l.s.refs; rc != nil {
		if v, ok := rc.DerefUncounted(t.ref.Load()); ok {
			return v.(*levelTable)
		}
	} else if v, ok := l.s.peek(t.key); ok {
		return v.(*levelTable)
	}
	if l.seenGen.Load() == 0 {
		return nil
	}
	if at := t.retryAt.Load(); at != 0 && l.s.st.Now().UnixNano() < at {
		return nil
	}
	if !t.building.CompareAndSwap(false, true) {
		return nil
	}
	if !l.s.builds.start(func(ctx context.Context) { l.buildInBackground(ctx, inv) }) {
		t.off.Store(true) // the store is closed: it builds nothing more
		t.building.Store(false)
	}
	return nil
}

// buildInBackground builds the level's table into the cache (see
// levelTable), keeping a ref to it, or turns the table off.
func (l *Level) buildInBackground(ctx context.Context, inv *inverse) {
	t := &l.table
	defer t.building.Store(false)
	_, err := l.cached(ctx, t.key, func(ctx context.Context) (v any, size int64, err error) {
		defer l.s.recoverInto(&err, "level table build")
		return l.buildTable(ctx, inv)
	})
	if err != nil {
		if errors.Is(err, errNoTable) || errors.Is(err, ErrCorrupt) || errors.Is(err, ErrUnsupported) || errors.Is(err, cache.ErrPanic) {
			t.off.Store(true)
		} else if ctx.Err() == nil {
			l.buildFailed(err)
		}
		return
	}
	t.failures.Store(0)
	t.retryAt.Store(0)
	// A table the cache did not keep (the version retired, or a budget
	// that cannot hold it) would be built again and again, each build
	// reading the chunks the cache no longer keeps either: the level's
	// answers take the per-chunk path.
	kept := false
	if rc := l.s.refs; rc != nil {
		var r *cache.Ref
		if _, r, kept = rc.PeekRef(t.key); kept {
			t.ref.Store(r)
		}
	} else {
		_, kept = l.s.cache.Peek(t.key)
	}
	if !kept {
		t.off.Store(true)
	}
}

// Waits before background work that failed on a storage error (a level
// table's build, a listing check) is tried again: the first, doubled
// after each failure in a row, up to the last. Without them every request
// started it again, each reading from a backend that was failing.
const (
	retryFirst = time.Second
	retryMost  = 5 * time.Minute
)

// retryWait is the wait after the nth failure in a row.
func retryWait(n int32) time.Duration {
	if n > 16 {
		return retryMost
	}
	return min(retryFirst<<max(n-1, 0), retryMost)
}

// buildFailed records a build that met a storage error: the next may
// start once a wait has passed, and the failure is logged (the level
// answers from its chunks meanwhile, as fast as before it had a table).
func (l *Level) buildFailed(err error) {
	t := &l.table
	n := t.failures.Add(1)
	wait := retryWait(n)
	t.retryAt.Store(l.s.st.Now().Add(wait).UnixNano())
	l.s.log.Warn("a level table's build failed reading the store; the level answers from its chunks, and the build is tried again after a wait",
		"store", l.s.name, "level", l.n, "err", err, "failures", n, "retry_in", wait)
}

// buildTable reads every chunk of the level (those not cached
// concurrently) and prepares the table, with its size in bytes.
func (l *Level) buildTable(ctx context.Context, inv *inverse) (*levelTable, int64, error) {
	l.table.builds.Add(1)
	n := len(l.keys)
	t := &levelTable{cvs: make([]*chunkVerts, n), preps: make([]*chunkPrep, n), start: make([]int32, n+1)}
	if err := l.readAllChunks(ctx, t.cvs); err != nil {
		return nil, 0, err
	}
	size := int64(64 + 8*2*n + 4*(n+1))
	for i, cv := range t.cvs {
		p := cv.prepared(l.keys[i], inv)
		if p == nil || p.cont == nil || p.ids == nil {
			return nil, 0, errNoTable
		}
		for f := range len(p.bounds) - 1 {
			if p.bounds[f+1] <= p.bounds[f] {
				// An empty fragment: the per-chunk path follows its
				// continuation in a covered chunk and not in a cut one.
				return nil, 0, errNoTable
			}
		}
		t.preps[i] = p
		if int64(t.start[i])+int64(cv.rows) >= 1<<31-1 {
			return nil, 0, errNoTable
		}
		t.start[i+1] = t.start[i] + int32(cv.rows)
		size += int64(len(cv.data)) + prepBytes(cv, true, true)
	}
	rows := int(t.start[n])
	if l.tableBytes(int64(rows)) > l.table.limit {
		return nil, 0, errNoTable // the rows read outnumber what the metadata said
	}
	t.head = make([]bool, rows)
	t.cont = make([]int32, rows)
	rowBytes := l.vdt.Size * l.s.dims
	t.verts = make([]byte, 0, rows*rowBytes)
	t.ids = make([]byte, 0, 8*rows)
	t.inCell = make([]bool, n)
	for i, cv := range t.cvs {
		t.verts = append(t.verts, cv.data[:cv.rows*rowBytes]...)
		t.ids = append(t.ids, t.preps[i].ids...)
		t.inCell[i] = cv.inCell
	}
	size += int64((5+rowBytes+8)*rows + n)
	for i, p := range t.preps {
		s := t.start[i]
		nf := len(p.bounds) - 1
		for f := range nf {
			t.head[s+p.bounds[f]] = true
			for r := p.bounds[f]; r < p.bounds[f+1]; r++ {
				t.cont[s+r] = -1
			}
			last := s + p.bounds[f+1] - 1
			switch ce := &p.cont[f]; {
			case ce.in == contSelf:
				if g := int(ce.frag); g < nf {
					t.cont[last] = s + p.bounds[g]
				}
			case ce.in >= 0 && int(ce.in) < n:
				if d, g := t.preps[ce.in], int(ce.frag); g < len(d.bounds)-1 {
					t.cont[last] = t.start[ce.in] + d.bounds[g]
				}
			}
		}
	}
	return t, size, nil
}

// readAllChunks fills cvs with every chunk of the level: from the cache,
// or read l.s.conc at a time. It stops with errNoTable once the rows
// read make a table past the bound: the metadata's count, which the
// level passed tableFits on, may understate them, and the build holds
// every chunk it reads until it ends.
func (l *Level) readAllChunks(ctx context.Context, cvs []*chunkVerts) error {
	var rows atomic.Int64
	over := func(cv *chunkVerts) bool { return l.tableBytes(rows.Add(int64(cv.rows))) > l.table.limit }
	var missing []int32
	for i := range cvs {
		if v, ok := l.peekVerts(int32(i)); ok {
			if cvs[i] = v.(*chunkVerts); over(cvs[i]) {
				return errNoTable
			}
		} else {
			missing = append(missing, int32(i))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for range min(l.s.conc, len(missing)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k := next.Add(1) - 1
				if k >= int64(len(missing)) || ctx.Err() != nil {
					return
				}
				i := missing[k]
				cv, err := l.readChunk(ctx, i)
				if err == nil && over(cv) {
					err = errNoTable
				}
				if err != nil {
					mu.Lock()
					if first == nil {
						first = err
						cancel()
					}
					mu.Unlock()
					return
				}
				cvs[i] = cv
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}

// readChunk is verticesAt with a panic turned into an error.
func (l *Level) readChunk(ctx context.Context, i int32) (cv *chunkVerts, err error) {
	defer l.s.recoverInto(&err, "level table chunk")
	return l.verticesAt(ctx, i)
}

// tableFor returns the level's table when query q (with selection rf,
// attributes sel and inverse map inv) is one it answers: a line level's
// first page with connectivity and object ids in wire form, no filter,
// attribute or edge attribute. Everything else takes the per-chunk path.
func (l *Level) tableFor(q *BBoxQuery, rf *rowFilter, sel []*attrMeta, inv *inverse) *levelTable {
	if !q.Connectivity || !q.Wire || inv == nil || rf != nil || len(sel) > 0 || len(q.linkSel) > 0 ||
		q.Resume != nil || q.Offset != 0 {
		return nil
	}
	return l.levelTable(inv)
}

// tableBBox answers q from table t: the same batches, counts and edges,
// byte for byte, as the per-chunk path (BBox) gives. ok is false when the
// answer does not fit q.Limit (a page, not the whole answer): nothing was
// emitted and the per-chunk path answers it.
func (l *Level) tableBBox(ctx context.Context, t *levelTable, sc *bboxScratch, q *BBoxQuery, emit func(*Batch) error) (res BBoxResult, ok bool, err error) {
	sc.cand = l.candidates(sc.cand[:0], q.Min, q.Max)
	sc.bt = newBoxTest(l.vdt, l.s.dims, q.Min, q.Max)
	sc.bt.setCover(l)
	m := &sc.tm
	m.bt, m.copy, m.bytesOnly, m.dst, m.cnt = &sc.bt, false, false, nil, nil
	// Match every candidate first: the page's rows are known before any
	// is emitted, so an answer past the limit is left to the per-chunk
	// path whole. glob: the matching global rows in answer order, loc
	// the same as chunk rows; seg[p] ends candidate p's, all[p] says the
	// box took every row of it (a batch's Source tells). The answer's
	// vertices and ids are copied out as they are found, one after
	// another, so each batch is a slice of them.
	glob, loc, seg, all := sc.tglob[:0], sc.tloc[:0], sc.tseg[:0], sc.tall[:0]
	rowBytes := l.vdt.Size * l.s.dims
	vb, ib := sc.vbuf[:0], sc.wireIDs[:0]
	bt := &sc.bt
	own := bt.f32 && bt.cover // float32 × 3: tested here, a few rows a chunk
	for p, i := range sc.cand {
		if p&63 == 0 {
			if err := ctx.Err(); err != nil {
				return res, true, err
			}
		}
		s, e, key := t.start[i], t.start[i+1], l.keys[i]
		ids := t.ids[8*s : 8*e]
		whole := false
		switch {
		case own && len(key) == 3:
			// matchVerts' verdicts: a covered cell whose rows lie in it,
			// else each row's test on every axis (the same rows as its
			// kernels find; every row of a covered cell is all).
			cut := bt.cut3(key)
			if whole = cut == 0 && t.inCell[i]; whole {
				break
			}
			n0 := len(glob)
			data := t.verts[12*s : 12*e]
			for r := int32(0); len(data) >= 12; r, data = r+1, data[12:] {
				x := math.Float32frombits(binary.LittleEndian.Uint32(data[0:4]))
				y := math.Float32frombits(binary.LittleEndian.Uint32(data[4:8]))
				z := math.Float32frombits(binary.LittleEndian.Uint32(data[8:12]))
				if x >= bt.lo[0] && x <= bt.hi[0] && y >= bt.lo[1] && y <= bt.hi[1] && z >= bt.lo[2] && z <= bt.hi[2] {
					glob = append(glob, s+r)
					loc = append(loc, r)
					vb = append(vb, data[:12]...)
					ib = append(ib, ids[8*r:8*r+8]...)
				}
			}
			// Its rows are copied already; a covered cell whose rows all
			// pass is whole, as matchVerts' rowsWithin takes it.
			seg = append(seg, int32(len(glob)))
			all = append(all, cut == 0 && len(glob)-n0 == int(e-s))
			continue
		default:
			cv := t.cvs[i]
			l.matchVerts(key, cv, q.Min, q.Max, m)
			if whole = m.all; whole {
				break
			}
			for _, r := range m.rows {
				glob = append(glob, s+r)
			}
			loc = append(loc, m.rows...)
			vb = gather(vb, cv.data, m.rows, rowBytes)
			ib = gather(ib, ids, m.rows, 8)
		}
		if whole {
			k := len(glob)
			glob, loc = slices.Grow(glob, int(e-s))[:k+int(e-s)], slices.Grow(loc, int(e-s))[:k+int(e-s)]
			for r := range e - s {
				glob[k], loc[k] = s+r, r
				k++
			}
			vb = append(vb, t.verts[int(s)*rowBytes:int(e)*rowBytes]...)
			ib = append(ib, ids...)
		}
		seg = append(seg, int32(len(glob)))
		all = append(all, whole)
	}
	sc.tglob, sc.tloc, sc.tseg, sc.tall, sc.vbuf, sc.wireIDs = glob, loc, seg, all, vb, ib
	count := int64(len(glob))
	if q.Limit > 0 && count > q.Limit {
		return res, false, nil
	}
	l.table.answers.Add(1)
	l.s.countHits(len(sc.cand))
	l.startBatches(sc)
	batch, src := &sc.batch, &sc.src
	lo := int32(0)
	for p, i := range sc.cand {
		res.Chunks++
		hi := seg[p]
		if hi == lo {
			continue
		}
		n := int(hi - lo)
		src.key, src.cv, src.all, src.first, src.n, src.rows = l.keys[i], t.cvs[i], all[p], 0, n, nil
		if !all[p] {
			src.rows = loc[lo:hi]
		}
		batch.Chunk, batch.Rows, batch.First, batch.Attributes, batch.ObjectIDs = l.keys[i], n, int64(lo), sc.cols[:0], nil
		batch.Vertices.Data = vb[int(lo)*rowBytes : int(hi)*rowBytes]
		batch.WireIDs = ib[8*lo : 8*hi]
		res.Count += int64(n)
		lo = hi
		if err := emit(batch); err != nil {
			return res, true, err
		}
	}
	res.Matched, res.MatchedKnown = res.Count, true
	res.WireEdges = t.edges(sc, q.WireBuf, glob)
	return res, true, nil
}

// edges is the answer's edges in the wire's form, in the per-chunk
// path's order (chunk, then row: a row's edge from the row before in its
// fragment, then its continuation), glob being the answer's global rows.
func (t *levelTable) edges(sc *bboxScratch, buf []byte, glob []int32) []byte {
	rows := len(t.head)
	if len(sc.tans) < rows {
		sc.tans = make([]int32, rows)
		for g := range sc.tans {
			sc.tans[g] = -1
		}
	}
	ans := sc.tans
	for i, g := range glob {
		ans[g] = int32(i)
	}
	w := slices.Grow(buf[:0], 8*len(glob))
	for i, g := range glob {
		if !t.head[g] && i > 0 && glob[i-1] == g-1 {
			w = binary.LittleEndian.AppendUint64(w, uint64(uint32(i-1))|uint64(uint32(i))<<32)
		}
		if c := t.cont[g]; c >= 0 {
			if b := ans[c]; b >= 0 {
				w = binary.LittleEndian.AppendUint64(w, uint64(uint32(i))|uint64(uint32(b))<<32)
			}
		}
	}
	for _, g := range glob {
		ans[g] = -1
	}
	if w == nil {
		return []byte{}
	}
	return w
}
