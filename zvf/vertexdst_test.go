package zvf_test

import (
	"bytes"
	"context"
	"testing"

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
type lender struct {
	none  bool // lend nothing
	last  []byte
	lends int
}

func (d *lender) VertexSpace(n int) []byte {
	if d.none {
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

// TestVertexDstLent: a binary point answer whose query lends space
// (BBoxQuery.VertexDst) has each chunk the box cuts matched into that
// space — its batch's vertices start there, no second buffer between the
// cached chunk and the encoder — and answers the same bytes as without,
// warm or cold, whole, paged or from an offset.
func TestVertexDstLent(t *testing.T) {
	ctx := context.Background()
	const n = 60_000
	st, err := synth.Points(ctx, n, 1, writer.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	min, max := synth.BoxFor(n, 12_000, 301)
	answer := func(l *zvf.Level, q zvf.BBoxQuery, d *lender) (body []byte, inPlace, cut int) {
		t.Helper()
		if d != nil {
			q.VertexDst = d
		}
		_, err := l.BBox(ctx, q, func(b *zvf.Batch) error {
			data := b.Vertices.Data
			lo, _, all := b.Source.Span()
			if !all && lo == 0 && len(data) > 0 {
				cut++
				if d != nil && d.last != nil && cap(d.last) > 0 && &data[0] == &d.last[:1][0] {
					inPlace++
				}
			}
			body = append(body, data...)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return body, inPlace, cut
	}
	for _, tc := range []struct {
		name          string
		offset, limit int64
		none          bool
	}{
		{name: "whole"},
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
			cold, _, _ := answer(l, q, &lender{none: tc.none})
			want, _, _ := answer(l, q, nil)
			if !bytes.Equal(cold, want) {
				t.Fatalf("cold answer with a lender: %d bytes, want the %d without", len(cold), len(want))
			}
			d := &lender{none: tc.none}
			got, inPlace, cut := answer(l, q, d)
			if !bytes.Equal(got, want) {
				t.Fatalf("warm answer with a lender: %d bytes, want the %d without", len(got), len(want))
			}
			if cut == 0 {
				t.Fatal("the box cuts no chunk: the test tests nothing")
			}
			wantIn := cut
			if tc.none {
				wantIn = 0
			}
			if inPlace != wantIn {
				t.Fatalf("%d of %d cut chunks' batches in the lent space (%d lent), want %d", inPlace, cut, d.lends, wantIn)
			}
		})
	}
}
