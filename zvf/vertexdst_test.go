package zvf_test

import (
	"bytes"
	"context"
	"runtime"
	"testing"
	"weak"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/synth"
	"github.com/zvfserve/zvfserve/zvf/writer"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// lender is a zvf.VertexDst as an encoder's body buffer behaves: each
// space is valid until the next batch. It hands out exactly the room asked
// for (an append past it would move the bytes elsewhere) and scribbles on
// the space it lent before, so a batch read after its emit shows.
//
// With size set it lends as api's binary encoder does from a body buffer
// of that many bytes: only when the block (a 16-byte header, n bytes, up
// to 7 of padding) fits what the blocks written so far left free.
type lender struct {
	none  bool // lend nothing
	tight bool // refuse every other ask: a chunk's first, for all its rows
	asks  int
	size  int // the body buffer's bytes (0: unbounded)
	used  int // of size, by the blocks written (wrote)
	last  []byte
	lends int
}

func (d *lender) VertexSpace(n int) []byte {
	d.asks++
	if d.none || d.tight && d.asks%2 == 1 || d.size > 0 && d.size-d.used < 16+n+7 {
		return nil
	}
	if d.last != nil {
		s := d.last[:cap(d.last)]
		for i := range s {
			s[i] = 0xa5
		}
	}
	d.lends++
	d.last = make([]byte, 0, n)
	return d.last
}

// wrote takes a vertices block of n bytes from the modelled body buffer:
// in its free space when it fits, else across flushes (bufio.Writer).
func (d *lender) wrote(n int) {
	if d == nil || d.size == 0 {
		return
	}
	d.used += 16 + n + (8-n%8)%8
	if d.used > d.size {
		d.used %= d.size
	}
}

// copies is what an answer's vertex bytes cost in copies between
// buffers before an encoder holds them in its body: a batch sliced from a
// cached chunk the box covers is copied once (by the encoder), one the
// reader matched into lent space once (by the reader, where the encoder
// writes it), one matched into the reader's own buffer twice.
type copies struct {
	body         []byte // the answer's vertex bytes
	copied       int    // bytes copied to put them in a body
	cut, inPlace int    // batches of chunks the box cuts; of those, in lent space
}

// answerCopies answers q (d, when set, lends space) and counts its copies.
func answerCopies(tb testing.TB, l *zvf.Level, q zvf.BBoxQuery, d *lender) copies {
	tb.Helper()
	var c copies
	if d != nil {
		q.VertexDst = d
	}
	_, err := l.BBox(context.Background(), q, func(b *zvf.Batch) error {
		data := b.Vertices.Data
		c.body = append(c.body, data...)
		defer d.wrote(len(data))
		lo, _, all := b.Source.Span()
		switch {
		case all || len(data) == 0:
			c.copied += len(data)
		case d != nil && cap(d.last) > 0 && &data[0] == &d.last[:1][0]:
			c.copied += len(data)
			c.inPlace++
		default:
			c.copied += 2 * len(data)
		}
		if !all && lo == 0 && len(data) > 0 {
			c.cut++
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// TestVertexDstLent: a binary point answer whose query lends space
// (BBoxQuery.VertexDst) has each chunk the box cuts matched into that
// space — its batch's vertices start there, so every vertex byte is
// copied once on its way to the body, not twice — and answers the same
// bytes as without, warm or cold, whole, paged or from an offset.
func TestVertexDstLent(t *testing.T) {
	ctx := context.Background()
	const n = 60_000
	st, err := synth.Points(ctx, n, 1, writer.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	min, max := synth.BoxFor(n, 12_000, 301)
	for _, tc := range []struct {
		name          string
		offset, limit int64
		none, tight   bool
	}{
		{name: "whole"},
		{name: "room for the overlapped bins only", tight: true},
		{name: "offset", offset: 777},
		{name: "limit", limit: 5_001},
		{name: "nothing lent", none: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := zvftest.OpenSub(t, st, "points", cache.New(1<<30))
			l, err := s.Level(0)
			if err != nil {
				t.Fatal(err)
			}
			q := zvf.BBoxQuery{Min: min, Max: max, Wire: true, Offset: tc.offset, Limit: tc.limit}
			// Cold first: chunks read and matched ahead by the readers
			// are never matched into lent space.
			cold := answerCopies(t, l, q, &lender{none: tc.none, tight: tc.tight})
			want := answerCopies(t, l, q, nil)
			if !bytes.Equal(cold.body, want.body) {
				t.Fatalf("cold answer with a lender: %d bytes, want the %d without", len(cold.body), len(want.body))
			}
			d := &lender{none: tc.none, tight: tc.tight}
			got := answerCopies(t, l, q, d)
			if !bytes.Equal(got.body, want.body) {
				t.Fatalf("warm answer with a lender: %d bytes, want the %d without", len(got.body), len(want.body))
			}
			if got.cut == 0 || want.copied == len(want.body) {
				t.Fatal("the box cuts no chunk: the test tests nothing")
			}
			wantIn, wantCopied := got.cut, len(got.body)
			if tc.none {
				wantIn, wantCopied = 0, want.copied
			}
			if got.inPlace != wantIn || got.copied != wantCopied {
				t.Fatalf("%d of %d cut chunks' batches in the lent space (%d lent), %d bytes copied for %d; want %d, %d",
					got.inPlace, got.cut, d.lends, got.copied, len(got.body), wantIn, wantCopied)
			}
		})
	}
}

// TestPooledScratchKeepsNoLender: a query's scratch goes back to the
// store's pool when the answer ends, and must not keep the space lender
// (in api, a binary encoder and its 512 KiB body buffer) alive past it,
// whatever ring positions the query's matching readied. One collection
// moves the pool's scratch to its victim cache, still reachable, so a
// lender the scratch kept would survive it.
func TestPooledScratchKeepsNoLender(t *testing.T) {
	ctx := context.Background()
	const n = 60_000
	st, err := synth.Points(ctx, n, 1, writer.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	s := zvftest.OpenSub(t, st, "points", cache.New(1<<30))
	l, err := s.Level(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []int{12_000, 200, 12_000} { // many chunks, then few: fewer ring positions than before
		min, max := synth.BoxFor(n, want, 301)
		// Twice: cold (chunks matched by readers), then warm (matched
		// into the lent space).
		for _, pass := range []string{"cold", "warm"} {
			w := lendOnce(t, l, zvf.BBoxQuery{Min: min, Max: max, Wire: true}, pass == "warm")
			runtime.GC()
			if w.Value() != nil {
				t.Fatalf("box of about %d vertices, %s: the lender outlived its answer (kept by the pooled scratch)", want, pass)
			}
		}
	}
	runtime.KeepAlive(s)
}

// lendOnce answers q with a lender of its own (which must lend, when
// mustLend: a warm answer's cut chunks) and returns only a weak pointer
// to it: nothing of this frame keeps the lender alive.
func lendOnce(t *testing.T, l *zvf.Level, q zvf.BBoxQuery, mustLend bool) weak.Pointer[lender] {
	t.Helper()
	d := &lender{}
	q.VertexDst = d
	if _, err := l.BBox(context.Background(), q, func(*zvf.Batch) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if mustLend && d.lends == 0 {
		t.Fatal("nothing was lent: the test tests nothing")
	}
	return weak.Make(d)
}

// BenchmarkVertexBytesCopied reports what the api benchmarks' warm
// binary boxes (and BBoxBinaryCluster's) cost in copies of their vertex
// bytes before the body holds them (see copies), without space lent and
// with: deterministic counts, not times.
func BenchmarkVertexBytesCopied(b *testing.B) {
	ctx := context.Background()
	const n = 2_000_000
	pts, err := synth.Points(ctx, n, 1, writer.CodecNone)
	if err != nil {
		b.Fatal(err)
	}
	cl, err := synth.Clustered(ctx, n, 1)
	if err != nil {
		b.Fatal(err)
	}
	box := func(want int, off float64) [2][]float64 {
		min, max := synth.BoxFor(n, want, off)
		return [2][]float64{min, max}
	}
	ps := zvftest.OpenSub(b, pts, "points", cache.New(2<<30))
	pl, err := ps.Level(0)
	if err != nil {
		b.Fatal(err)
	}
	autoBox := box(500_000, 50) // BBoxAuto's: the level that fits 100,000 rows
	an, err := ps.ChooseLevel(ctx, autoBox[0], autoBox[1], 100_000, nil, zvf.Selection{})
	if err != nil {
		b.Fatal(err)
	}
	al, err := ps.Level(an)
	if err != nil {
		b.Fatal(err)
	}
	cll, err := zvftest.OpenSub(b, cl, "points", cache.New(1<<30)).Level(0)
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		l    *zvf.Level
		box  [2][]float64
	}{
		{"50k", pl, box(50_000, 301)},
		{"500k", pl, box(500_000, 50)},
		{"1k", pl, box(1_000, 101)},
		{"auto", al, autoBox},
		{"cluster", cll, [2][]float64{synth.ClusterBox[0], synth.ClusterBox[1]}},
	} {
		for _, lend := range []bool{false, true} {
			name := bc.name + "/own"
			if lend {
				name = bc.name + "/lent"
			}
			b.Run(name, func(b *testing.B) {
				q := zvf.BBoxQuery{Min: bc.box[0], Max: bc.box[1], Wire: true, Limit: 2_000_000}
				var c copies
				for b.Loop() { // the first answer reads the chunks
					var d *lender
					if lend {
						d = &lender{size: 512 << 10} // api's uncompressed body buffer
					}
					c = answerCopies(b, bc.l, q, d)
				}
				b.ReportMetric(float64(len(c.body)), "answer-B/op")
				b.ReportMetric(float64(c.copied), "copied-B/op")
				b.ReportMetric(float64(c.cut), "cut-chunks/op")
				b.ReportMetric(float64(c.inPlace), "in-place/op")
			})
		}
	}
}
