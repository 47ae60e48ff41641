package zvf

// bboxScratch is one query's reusable memory: the candidate list, a
// window of matches with their row lists, and the gather buffers. Pooled
// per store, so a warm query allocates nothing per chunk or per vertex.
type bboxScratch struct {
	cand  []int32
	slots []matchSlot  // matches' ring, beside ms
	rd    chunkReaders // matches' readers of chunks not cached
	ms    []chunkMatch
	// msUsed bounds the ring positions matches used since the scratch
	// was got (each pass starts at 0): putScratch resets only those, not
	// the whole ring for a small answer's few chunks.
	msUsed int
	vbuf   []byte
	abufs  [][]byte
	owner  []int64 // row owners of the current chunk
	ids    []int64 // the batch's object ids
	// wire: the query asked for the binary format's wire form
	// (BBoxQuery.Wire); the batch's ids are then in wireIDs.
	wire    bool
	wireIDs []byte
	// fr: the current batch's fragment ranks (fragRanks) when its chunk
	// is cut and prepared, for its ranked chunk to keep (ranked).
	fr   []int32
	cols []Column
	// ecost, erank: edgeCosts' scratch (a page bounded by its edge values).
	ecost []int64
	erank []int32
	batch Batch
	src   ChunkRows // batch.Source
	// counts: matching rows of each candidate chunk the page passed
	// (the next page's cursor and connectivity start from them).
	counts []int64
	ai     answerIndex
	next   nextChunks     // a page chunk's continuation chunks (lineEdges)
	byPos  []*rankedChunk // ai.byPos's memory
	page   []*rankedChunk // ai.page's memory (it grew from nil every answer)
	// The query's ranked chunks (ranked): rcUsed of the blocks rcs, their
	// rows in rowArena.
	rcs      [][]rankedChunk
	rcUsed   int
	rowArena []int32
	// rf is the query's selection (nil: every row in the box).
	rf *rowFilter
	// waiting: the query's BBoxQuery.Waiting.
	waiting StorageWait
	// copy: matching copies the rows' vertices as it finds them (for
	// the page; not when it only counts). bytesOnly: and the page needs
	// nothing else of its rows (see chunkMatch.bytesOnly).
	copy, bytesOnly bool
	// dst lends the page's matching the encoder's free space
	// (BBoxQuery.VertexDst; with bytesOnly only).
	dst VertexDst
	bt  boxTest // the box's test of the current matching pass
	// A level table's answer (tableBBox): its match, the answer's global
	// and chunk rows, where each candidate's end and whether the box
	// covers it, and each global row's answer index (-1 between answers).
	tm                      chunkMatch
	tglob, tloc, tseg, tans []int32
	tall                    []bool
	// choiceScans counts the level choices that passed over their
	// candidate chunks (seenSums did not decide); tests read it.
	choiceScans int
}

// Scratches kept across collections (Store.scratch): at most
// scratchesKept a store, each holding at most scratchKeepBytes of buffers
// (heldBytes), so a server serving many stores keeps at most 1 MiB a
// store beside the ring's few KiB of structs. A cold 50k-vertex binary
// answer's scratch holds about 0.7 MB (its chunks' matched vertices, one
// ring slot each). A larger scratch, or a second at once, goes back to
// the sync.Pool behind, as before.
const (
	scratchesKept    = 1
	scratchKeepBytes = 1 << 20
)

func (s *Store) getScratch() *bboxScratch {
	if sc, ok := s.scratch.Get(); ok {
		return sc
	}
	return &bboxScratch{}
}

// heldBytes is what sc's buffers hold (their capacity), the ring's
// matches' included; not the structs themselves.
func (sc *bboxScratch) heldBytes() int {
	n := 4*cap(sc.cand) + cap(sc.vbuf) + 8*cap(sc.owner) + 8*cap(sc.ids) + cap(sc.wireIDs) + 8*cap(sc.counts) +
		8*cap(sc.byPos) + 8*cap(sc.page) + 4*cap(sc.rowArena) +
		4*(cap(sc.tglob)+cap(sc.tloc)+cap(sc.tseg)+cap(sc.tans)+cap(sc.tm.buf)) + cap(sc.tall)
	for _, b := range sc.abufs {
		n += cap(b)
	}
	for b := range sc.rcs {
		n += 64 * cap(sc.rcs[b]) // a rankedChunk is some 64 bytes (with its row slice)
	}
	for i := range sc.ms {
		m := &sc.ms[i]
		n += 4*cap(m.buf) + 4*cap(m.pbuf) + 8*cap(m.owner) + cap(m.vown)
	}
	return n
}

// putScratch returns sc for the next query: kept across collections when
// small (see scratchesKept), else to the pool unless it grew past what is
// worth keeping at all (a 1M-vertex answer's buffers stay with the GC).
func (s *Store) putScratch(sc *bboxScratch) {
	if cap(sc.vbuf) > 16<<20 {
		sc.vbuf = nil
	}
	if cap(sc.counts) > 1<<20 {
		sc.counts = nil
	}
	if cap(sc.ecost) > 1<<20 || cap(sc.erank) > 1<<20 {
		sc.ecost, sc.erank = nil, nil
	}
	if cap(sc.owner) > 1<<20 || cap(sc.ids) > 1<<20 {
		sc.owner, sc.ids = nil, nil
	}
	sc.fr = nil      // in the arena, reused by the next query
	sc.waiting = nil // an encoder's: not the scratch's to keep
	if cap(sc.wireIDs) > 8<<20 {
		sc.wireIDs = nil
	}
	for i := range sc.abufs {
		if cap(sc.abufs[i]) > 16<<20 {
			sc.abufs[i] = nil
		}
	}
	for i := range sc.ms[:sc.msUsed] {
		if cap(sc.ms[i].buf) > 1<<18 || cap(sc.ms[i].pbuf) > 1<<18 { // rows is buf, or a cached selection's
			sc.ms[i].buf, sc.ms[i].pbuf = nil, nil
		}
		if cap(sc.ms[i].owner) > 1<<18 {
			sc.ms[i].owner = nil
		}
		if cap(sc.ms[i].vown) > 4<<20 {
			sc.ms[i].vown = nil
		}
		sc.ms[i].vdata, sc.ms[i].bt, sc.ms[i].dst, sc.ms[i].lent = nil, nil, nil, nil
		sc.ms[i].cv, sc.ms[i].rows, sc.ms[i].vpos = nil, nil, nil // a cached selection's: not the scratch's to keep
	}
	sc.tm.cv, sc.tm.rows, sc.tm.bt, sc.tm.vdata = nil, nil, nil, nil // the table's chunk: not the scratch's to keep
	if cap(sc.tglob) > 1<<18 || cap(sc.tans) > 1<<20 {
		sc.tglob, sc.tloc, sc.tseg, sc.tall, sc.tans, sc.tm.buf = nil, nil, nil, nil, nil, nil
	}
	clear(sc.slots[:sc.msUsed])
	sc.msUsed = 0
	clear(sc.byPos)
	clear(sc.page)
	sc.page = sc.page[:0]
	if cap(sc.page) > 1<<16 {
		sc.page = nil
	}
	for b := 0; b*rankedBlock < sc.rcUsed; b++ { // what they point to is the GC's again
		clear(sc.rcs[b])
	}
	sc.rcUsed, sc.rowArena = 0, sc.rowArena[:0]
	if len(sc.rcs) > 64 || cap(sc.rowArena) > 1<<20 {
		sc.rcs, sc.rowArena = nil, nil
	}
	clear(sc.src.attrs)
	sc.batch, sc.src = Batch{}, ChunkRows{attrs: sc.src.attrs[:0]}
	sc.ai = answerIndex{}
	sc.rf, sc.copy, sc.bytesOnly, sc.bt, sc.dst = nil, false, false, boxTest{}, nil
	clear(sc.cols)
	if sc.heldBytes() > scratchKeepBytes {
		s.scratch.PutPooled(sc)
		return
	}
	s.scratch.Put(sc)
}
