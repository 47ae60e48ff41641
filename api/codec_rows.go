package api

import (
	"bufio"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zvfserve/zvfserve/zvf"
)

// Text formats spend most of a large answer's time formatting numbers
// (about 50 ns a float32 coordinate), so one request would use one core
// while the others idle. rowFormatter formats a batch's rows on several
// cores: rows are cut into contiguous segments, each formatted into its
// own buffer, and the buffers written in order, so the bytes are the ones
// a single core would write. It works in rounds of a bounded size, in
// bytes of text as well as rows, so that memory stays bounded whatever the
// batch's size and however wide its rows (a 128-channel attribute is about
// 2 KB of text a row). A batch is one chunk's rows, often fewer than a
// segment, so small batches are first gathered into a run (batchRun) and
// formatted a round at a time.

// A segment is what one worker formats per round: at most maxSegRows rows
// and segBytes of text, and a worker of its own is worth minSegBytes of
// text at least. Each round is a fork and a join (waking an idle core
// costs tens of microseconds), so rounds are large: 16,384 rows of three
// float32 coordinates (at most 51 bytes of text each, with the brackets
// and comma) are about 10 ms of formatting and at most 816 KiB of JSON.
const (
	maxSegRows  = 16384
	segBytes    = maxSegRows * 51
	minSegBytes = 2048 * 51
)

// segRows is the most rows of width bytes of text (at most; 0: unknown,
// taken as narrow) one segment holds, and minSegRows the fewest worth a
// worker of their own.
func segRows(width int) int    { return min(maxSegRows, max(1, segBytes/max(width, 1))) }
func minSegRows(width int) int { return min(maxSegRows, max(1, minSegBytes/max(width, 1))) }

type rowFormatter struct {
	workers int      // cores to use at most; 1 formats on the caller's goroutine
	segs    [][]byte // one buffer per worker, reused across rounds
	// busy counts the server's answers formatting rows at this moment
	// (nil: none other). Splitting a round pays only with an idle core:
	// with as many answers formatting as cores, the fork and join and
	// gathering rows into rounds are cost without gain (16 clients on
	// two cores, BenchmarkBBoxJSON50kClients), so each answer then
	// formats on its own goroutine.
	busy   *atomic.Int32
	active bool // counted in busy
}

// share is the workers worth using now: the cores that no other answer
// is formatting on, and at least one.
func (f *rowFormatter) share() int {
	if f.busy == nil || f.workers <= 1 {
		return max(f.workers, 1)
	}
	others := int(f.busy.Load())
	if f.active {
		others--
	}
	return max(1, min(f.workers, f.workers-others))
}

// format writes rows [0, rows) of a batch, each at most width bytes of
// text: each(dst, lo, hi) appends rows lo..hi-1 (and whatever separates
// them from the rows before lo) to dst. A round's rows are split evenly
// between the workers it is worth.
func (f *rowFormatter) format(w *bufio.Writer, rows, width int, each func(dst []byte, lo, hi int) []byte) error {
	if len(f.segs) < max(f.workers, 1) {
		f.segs = append(f.segs, make([][]byte, max(f.workers, 1)-len(f.segs))...)
	}
	if f.busy != nil && !f.active {
		f.active = true
		f.busy.Add(1)
		defer func() {
			f.active = false
			f.busy.Add(-1)
		}()
	}
	per, least := segRows(width), minSegRows(width)
	for start := 0; start < rows; {
		workers := f.share()
		n := min(rows-start, workers*per)
		k := max(1, min(workers, n/least)) // segments this round
		if k == 1 {
			f.segs[0] = each(f.segs[0][:0], start, start+n)
		} else {
			f.fork(start, n, k, each)
		}
		for _, b := range f.segs[:k] {
			if _, err := w.Write(b); err != nil {
				return err
			}
		}
		start += n
	}
	return nil
}

// fork formats rows start … start+n-1 into k segments, k-1 of them on
// goroutines of their own.
func (f *rowFormatter) fork(start, n, k int, each func(dst []byte, lo, hi int) []byte) {
	var wg sync.WaitGroup
	var failed struct {
		sync.Mutex
		v any
	}
	per := (n + k - 1) / k
	for s := 1; s < k; s++ {
		lo := start + s*per
		hi := min(lo+per, start+n)
		wg.Go(func() {
			// A panic here would end the process: hand it to the
			// request's goroutine, whose recoverer answers 500.
			defer func() {
				if v := recover(); v != nil {
					failed.Lock()
					failed.v = v
					failed.Unlock()
				}
			}()
			f.segs[s] = each(f.segs[s][:0], lo, hi)
		})
	}
	f.segs[0] = each(f.segs[0][:0], start, min(start+per, start+n))
	wg.Wait()
	if failed.v != nil {
		panic(failed.v)
	}
}

// batchRun concatenates consecutive batches into one. A batch's slices are
// only valid during the reader's emit call, so rows are copied: 12 bytes
// a vertex, far less than the ~100 ns formatting one costs.
type batchRun struct {
	b     zvf.Batch
	vdata []byte
	ids   []int64
	adata [][]byte
}

// add appends b's rows to the run.
func (r *batchRun) add(b *zvf.Batch) {
	if r.b.Rows == 0 {
		r.b = zvf.Batch{Chunk: b.Chunk, First: b.First, Vertices: b.Vertices, Attributes: append(r.b.Attributes[:0], b.Attributes...)}
		r.vdata, r.ids = r.vdata[:0], r.ids[:0]
		for len(r.adata) < len(b.Attributes) {
			r.adata = append(r.adata, nil)
		}
		for k := range r.adata {
			r.adata[k] = r.adata[k][:0]
		}
	}
	r.vdata = append(r.vdata, b.Vertices.Data[:b.Rows*b.Vertices.RowBytes()]...)
	r.b.Vertices.Data = r.vdata
	if b.ObjectIDs != nil {
		r.ids = append(r.ids, b.ObjectIDs[:b.Rows]...)
		r.b.ObjectIDs = r.ids
	}
	for k := range b.Attributes {
		c := &b.Attributes[k]
		r.adata[k] = append(r.adata[k], c.Data[:b.Rows*c.RowBytes()]...)
		r.b.Attributes[k].Data = r.adata[k]
	}
	r.b.Rows += b.Rows
}

// batcher feeds an encoder's write with batches of at least a round's
// rows when it formats on several cores, and with each batch as it comes
// otherwise (one core, or every core busy formatting other answers).
type batcher struct {
	rows  rowFormatter
	run   batchRun
	width int // the most text one row of this answer takes (see textWidth)
	sent  int // rows of this answer written so far
	now   func() time.Time
	held  time.Time // when the run's first rows came
	lines []byte    // NDJSON lines made from prepared text on their way out
}

// holdMax is how long rows wait for a round to fill: from slow storage,
// where chunks come one every few milliseconds, an answer keeps streaming
// (and starts within the request timeout) instead of waiting for a round.
const holdMax = 10 * time.Millisecond

// batchers recycles batchers (their buffers: a round of rows and its
// text, a megabyte or two) across a server's text answers.
type batchers struct {
	pool     sync.Pool
	now      func() time.Time // the server's clock
	pageHold int64            // the JSON page bound (Options.JSONPageBytes); 0: jsonPageHold
	busy     atomic.Int32     // answers formatting rows now (rowFormatter.busy)
}

// get returns a batcher using every core.
func (p *batchers) get() *batcher {
	if b, ok := p.pool.Get().(*batcher); ok {
		return b
	}
	now := p.now
	if now == nil {
		now = time.Now
	}
	return &batcher{rows: rowFormatter{workers: runtime.GOMAXPROCS(0), busy: &p.busy}, now: now}
}

// put keeps t for the next answer unless an unusual answer grew its
// buffers past what is worth holding.
func (p *batchers) put(t *batcher) {
	if t.size() > 16<<20 {
		return
	}
	t.run.b = zvf.Batch{Attributes: t.run.b.Attributes[:0]}
	t.sent, t.width = 0, 0
	p.pool.Put(t)
}

// size is the memory t's buffers hold, in bytes.
func (t *batcher) size() int64 {
	n := cap(t.run.vdata) + 8*cap(t.run.ids) + cap(t.lines)
	for _, b := range t.run.adata {
		n += cap(b)
	}
	for _, b := range t.rows.segs {
		n += cap(b)
	}
	return int64(n)
}

// batch passes b to write at once, or adds it to the run and passes the
// run when it holds enough rows — a few thousand for an answer's first
// bytes (so that it starts streaming at once), then twice as many each
// time up to a round — or has waited holdMax.
func (t *batcher) batch(b *zvf.Batch, write func(*zvf.Batch) error) error {
	workers := t.rows.share()
	want := min(max(t.sent, minSegRows(t.width)*workers), workers*segRows(t.width))
	if t.run.b.Rows == 0 && (workers <= 1 || b.Rows >= want) {
		t.sent += b.Rows
		return write(b)
	}
	now := t.now()
	if t.run.b.Rows == 0 {
		t.held = now
	}
	t.run.add(b)
	if t.run.b.Rows < want && now.Sub(t.held) < holdMax {
		return nil
	}
	return t.flush(write)
}

// flush passes the rows held back, if any.
func (t *batcher) flush(write func(*zvf.Batch) error) error {
	if t.run.b.Rows == 0 {
		return nil
	}
	t.sent += t.run.b.Rows
	err := write(&t.run.b)
	t.run.b.Rows = 0
	return err
}
