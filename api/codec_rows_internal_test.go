package api

import (
	"bufio"
	"bytes"
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/synth"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// streamlinesLevel is level 0 of a synthetic store of n streamline
// vertices (seed picks them), read through a cache of cacheBytes.
func streamlinesLevel(t *testing.T, n int, seed uint64, cacheBytes int64) *zvf.Level {
	t.Helper()
	ctx := context.Background()
	st, err := synth.Streamlines(ctx, n, seed)
	if err != nil {
		t.Fatal(err)
	}
	l, err := zvftest.OpenSub(t, st, "streamlines", cache.New(cacheBytes)).Level(0)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestParallelFormattingSameBytes: text answers formatted on several
// cores are byte for byte the ones one core writes — for answers smaller
// than a segment, a few segments and many rounds, from batches (chunks) of
// under 1,000 rows gathered into runs, with object ids and every
// attribute.
func TestParallelFormattingSameBytes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const n = 200_000
	l := streamlinesLevel(t, n, 3, 256<<20)
	for _, want := range []int{500, 20_000, n} {
		lo, hi := synth.BoxFor(n, want, 0)
		meta := &payloadMeta{Kind: "bbox", Store: "streamlines", Dims: 3, VertexDType: l.VertexDType(), Attributes: l.Info().VertexAttributes, ObjectIDs: true}
		var text batchers
		for _, c := range []codec{jsonCodec{&text}, ndjsonCodec{&text}} {
			var outs [3]bytes.Buffer
			for k, workers := range []int{1, 2, 5} {
				enc := c.newEncoder()
				switch e := enc.(type) {
				case *jsonEncoder:
					e.par.rows.workers = workers
				case *ndjsonEncoder:
					e.par.rows.workers = workers
				}
				w := bufio.NewWriter(&outs[k])
				if err := enc.begin(w, meta, nil); err != nil {
					t.Fatal(err)
				}
				res, err := l.BBox(ctx, zvf.BBoxQuery{Min: lo, Max: hi, Attributes: []string{"*"}}, enc.batch)
				if err != nil {
					t.Fatal(err)
				}
				if err := enc.end(&trailer{Count: res.Count}); err != nil {
					t.Fatal(err)
				}
				if err := w.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			for k := 1; k < len(outs); k++ {
				if !bytes.Equal(outs[0].Bytes(), outs[k].Bytes()) {
					t.Errorf("%s, ~%d vertices: %d bytes on one core, %d on %d", c.format(), want, outs[0].Len(), outs[k].Len(), []int{1, 2, 5}[k])
				}
			}
			if outs[0].Len() < want*10 {
				t.Fatalf("%s: only %d bytes for ~%d vertices", c.format(), outs[0].Len(), want)
			}
		}
	}
}

// TestRowsWaitAtMostHoldMax: from slow storage (here a clock that moves
// 4 ms a chunk) rows are passed on once they have waited holdMax, not
// when a round is full, so the answer keeps streaming; from fast storage
// they wait for the round.
func TestRowsWaitAtMostHoldMax(t *testing.T) {
	ctx := context.Background()
	l := streamlinesLevel(t, 50_000, 5, 64<<20)
	lo, hi := synth.BoxFor(50_000, 50_000, 0)
	for _, tc := range []struct {
		name      string
		perChunk  time.Duration
		maxHeld   int // most rows a write may see before the last
		minWrites int
	}{
		{"slow storage", 4 * time.Millisecond, 4 * 1000, 5},
		{"fast storage", 0, 1 << 30, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var clock time.Time
			b := &batcher{rows: rowFormatter{workers: 2}, now: func() time.Time { return clock }}
			var writes, rows []int
			write := func(x *zvf.Batch) error {
				writes = append(writes, x.Rows)
				return nil
			}
			res, err := l.BBox(ctx, zvf.BBoxQuery{Min: lo, Max: hi}, func(x *zvf.Batch) error {
				clock = clock.Add(tc.perChunk)
				rows = append(rows, x.Rows)
				return b.batch(x, write)
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := b.flush(write); err != nil {
				t.Fatal(err)
			}
			total := 0
			for i, n := range writes {
				total += n
				if i < len(writes)-1 && n > tc.maxHeld {
					t.Errorf("write %d passed %d rows", i, n)
				}
			}
			if total != int(res.Count) || len(writes) < tc.minWrites {
				t.Fatalf("%d writes of %d rows in all, for %d rows in %d chunks", len(writes), total, res.Count, len(rows))
			}
			if tc.perChunk == 0 && len(writes) >= len(rows) {
				t.Fatalf("fast storage: %d writes for %d chunks, rows were not gathered", len(writes), len(rows))
			}
		})
	}
}

// TestTextBoundsInBytes: the bounds text answers work in are bytes as
// well as rows. A JSON page holds at most jsonPageHold of ids and
// attribute values: with ids alone that is more than the default
// --max-vertices (pages as before), with a 128-channel float32 attribute
// 16,131 rows; vertices alone hold nothing. A round of formatting is
// 16,384 rows of three float32 coordinates, as tuned, and no more than
// segBytes of text however wide the rows.
func TestTextBoundsInBytes(t *testing.T) {
	var text batchers
	c := jsonCodec{&text}
	wide := zvf.AttrInfo{Name: "embedding", DType: "float32", Channels: 128}
	for _, tc := range []struct {
		name string
		m    payloadMeta
		want int64
	}{
		{"vertices", payloadMeta{Dims: 3, VertexDType: "float32"}, 0},
		{"ids", payloadMeta{Dims: 3, VertexDType: "float32", ObjectIDs: true}, 1 << 20},
		{"ids and 128 channels", payloadMeta{Dims: 3, VertexDType: "float32", ObjectIDs: true, Attributes: []zvf.AttrInfo{wide}}, (8 << 20) / 520},
	} {
		if got := c.pageRows(&tc.m); got != tc.want {
			t.Errorf("%s: a JSON page holds %d rows, want %d", tc.name, got, tc.want)
		}
		if got := (ndjsonCodec{&text}).pageRows(&tc.m); got != 0 {
			t.Errorf("%s: an NDJSON page is bounded at %d rows", tc.name, got)
		}
	}
	if got := segRows(vertexWidth(&payloadMeta{Dims: 3, VertexDType: "float32"})); got != maxSegRows {
		t.Errorf("a segment of 3-D float32 vertices holds %d rows, want %d", got, maxSegRows)
	}
	for _, a := range []zvf.AttrInfo{wide, {DType: "float64", Channels: 1000}, {DType: "int8"}, {DType: "uint16", Categories: []string{"a", "very long category name"}}} {
		w := textWidth(a)
		if n := segRows(w); n*w > segBytes && n > 1 {
			t.Errorf("%+v: a segment holds %d rows of up to %d bytes, over %d", a, n, w, segBytes)
		}
	}
	// The widths bound real text: the widest values of each type.
	for _, tc := range []struct {
		a zvf.AttrInfo
		v string
	}{
		{zvf.AttrInfo{DType: "float32"}, "-1.17549435e-38"},
		{zvf.AttrInfo{DType: "float64"}, "-2.2250738585072014e-308"},
		{zvf.AttrInfo{DType: "int64"}, "-9223372036854775808"},
		{zvf.AttrInfo{DType: "bool"}, "false"},
	} {
		if w := textWidth(tc.a); w < len(tc.v)+1 {
			t.Errorf("%s: width %d, but %q takes %d with its comma", tc.a.DType, w, tc.v, len(tc.v)+1)
		}
	}
}

// TestFormattingYieldsToBusyCores: with as many other answers formatting
// as there are cores, an answer formats each round on its own goroutine
// (one segment a round) and passes batches through without gathering
// them, with the same bytes; with idle cores it splits rounds as before.
// Its own count in busy is taken back when it is done.
func TestFormattingYieldsToBusyCores(t *testing.T) {
	const width = 51
	rows := segRows(width) // one round: two segments of half, or one
	letters := func(dst []byte, lo, hi int) []byte {
		for i := lo; i < hi; i++ {
			dst = append(dst, byte('a'+i%26))
		}
		return dst
	}
	var outs [2]bytes.Buffer
	for k, others := range []int32{2, 0} {
		var busy atomic.Int32
		busy.Store(others)
		f := rowFormatter{workers: 2, busy: &busy}
		segs := 0
		w := bufio.NewWriter(&outs[k])
		var mu sync.Mutex
		err := f.format(w, rows, width, func(dst []byte, lo, hi int) []byte {
			mu.Lock()
			segs++
			mu.Unlock()
			return letters(dst, lo, hi)
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		want := 2 // the round split between the two cores
		if others > 0 {
			want = 1
		}
		if segs != want {
			t.Errorf("%d other answers formatting: %d segments, want %d", others, segs, want)
		}
		if got := busy.Load(); got != others {
			t.Errorf("busy is %d after formatting, was %d", got, others)
		}
	}
	if !bytes.Equal(outs[0].Bytes(), outs[1].Bytes()) || outs[0].Len() != rows {
		t.Fatalf("%d bytes with busy cores, %d with idle ones, want %d the same", outs[0].Len(), outs[1].Len(), rows)
	}

	// A batcher gathers small batches into rounds only with an idle core.
	for _, others := range []int32{2, 0} {
		var busy atomic.Int32
		busy.Store(others)
		b := &batcher{rows: rowFormatter{workers: 2, busy: &busy}, now: time.Now}
		in := &zvf.Batch{Rows: 100, Vertices: zvf.Column{DType: "float32", Channels: 3, Data: make([]byte, 100*12)}}
		var got []*zvf.Batch
		if err := b.batch(in, func(x *zvf.Batch) error { got = append(got, x); return nil }); err != nil {
			t.Fatal(err)
		}
		switch {
		case others == 2 && (len(got) != 1 || got[0] != in):
			t.Errorf("busy cores: a 100-row batch was not passed through (%d writes)", len(got))
		case others == 0 && (len(got) != 0 || b.run.b.Rows != 100):
			t.Errorf("idle core: a 100-row batch was not held for a round (%d writes, %d rows held)", len(got), b.run.b.Rows)
		}
	}
}
