package api

import (
	"bufio"
	"sync"

	"github.com/zvfserve/zvfserve/zvf"
)

// Text formats spend most of a large answer's time formatting numbers
// (about 50 ns a float32 coordinate), so one request would use one core
// while the others idle. rowFormatter formats a batch's rows on several
// cores: rows are cut into contiguous segments, each formatted into its
// own buffer, and the buffers written in order, so the bytes are the ones
// a single core would write. It works in rounds of workers × segRows rows
// so that memory stays bounded whatever the batch's size. A batch is one
// chunk's rows, often fewer than a segment, so small batches are first
// gathered into a run (batchRun) and formatted a round at a time.

// segRows is the rows one worker formats per round: large enough that
// starting a goroutine (about a microsecond) is noise beside formatting
// them (about 0.5 ms), small enough that a round's buffers stay near
// 100 KB each.
const segRows = 4096

type rowFormatter struct {
	workers int      // cores to use; 1 formats on the caller's goroutine
	segs    [][]byte // one buffer per worker, reused across rounds
}

// format writes rows [0, rows) of a batch: each(dst, lo, hi) appends rows
// lo..hi-1 (and whatever separates them from the rows before lo) to dst.
func (f *rowFormatter) format(w *bufio.Writer, rows int, each func(dst []byte, lo, hi int) []byte) error {
	p := min(f.workers, (rows+segRows-1)/segRows)
	if p <= 1 {
		if len(f.segs) == 0 {
			f.segs = make([][]byte, 1)
		}
		for lo := 0; lo < rows; lo += segRows {
			f.segs[0] = each(f.segs[0][:0], lo, min(lo+segRows, rows))
			if _, err := w.Write(f.segs[0]); err != nil {
				return err
			}
		}
		return nil
	}
	if len(f.segs) < p {
		f.segs = append(f.segs, make([][]byte, p-len(f.segs))...)
	}
	var wg sync.WaitGroup
	var failed struct {
		sync.Mutex
		v any
	}
	for start := 0; start < rows; start += p * segRows {
		n := 0 // segments this round
		for s := 0; s < p && start+s*segRows < rows; s++ {
			n++
			lo := start + s*segRows
			hi := min(lo+segRows, rows)
			if s == 0 {
				continue // the caller's own share, below
			}
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
		f.segs[0] = each(f.segs[0][:0], start, min(start+segRows, rows))
		wg.Wait()
		if failed.v != nil {
			panic(failed.v)
		}
		for _, b := range f.segs[:n] {
			if _, err := w.Write(b); err != nil {
				return err
			}
		}
	}
	return nil
}

// round is the rows worth formatting at once on f's workers.
func (f *rowFormatter) round() int { return f.workers * segRows }

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
// otherwise.
type batcher struct {
	rows rowFormatter
	run  batchRun
}

// batch passes b to write at once, or adds it to the run and passes the
// run when it holds a round.
func (t *batcher) batch(b *zvf.Batch, write func(*zvf.Batch) error) error {
	if t.rows.workers <= 1 || (t.run.b.Rows == 0 && b.Rows >= t.rows.round()) {
		return write(b)
	}
	t.run.add(b)
	if t.run.b.Rows < t.rows.round() {
		return nil
	}
	return t.flush(write)
}

// flush passes the rows held back, if any.
func (t *batcher) flush(write func(*zvf.Batch) error) error {
	if t.run.b.Rows == 0 {
		return nil
	}
	err := write(&t.run.b)
	t.run.b.Rows = 0
	return err
}
