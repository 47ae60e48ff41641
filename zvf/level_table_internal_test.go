package zvf

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/synth"
)

// TestLevelTableBoundByRowsRead: a level whose metadata understates its
// vertex count passes the table's size test on that count, but the rows
// its chunks hold decide: past the bound, no table is built (the cache's
// share is not exceeded on the metadata's word) and answers take the
// per-chunk path.
func TestLevelTableBoundByRowsRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := synth.Streamlines(ctx, 400_000, 1)
	if err != nil {
		t.Fatal(err)
	}
	sub := storage.Sub(st, "streamlines")
	probe, err := Open(ctx, sub, Options{Name: "lines"})
	if err != nil {
		t.Fatal(err)
	}
	real := probe.levels[1].meta.VertexCount
	claimed := real / 100
	// A budget whose sixteenth holds the claimed rows' table, not the
	// real rows'.
	small, large := probe.levels[1].tableBytes(claimed), probe.levels[1].tableBytes(real)
	if 2*small >= large {
		t.Fatalf("tables of %d and %d bytes: no budget tells them apart", small, large)
	}
	s, err := Open(ctx, sub, Options{Name: "lines", Cache: cache.New(tableShare * (small + large) / 2)})
	if err != nil {
		t.Fatal(err)
	}
	l := s.levels[1]
	l.meta.VertexCount = claimed
	whole := BBoxQuery{Min: []float64{-1e9, -1e9, -1e9}, Max: []float64{1e9, 1e9, 1e9}, Connectivity: true, Wire: true}
	for range 3 {
		res, err := l.BBox(ctx, whole, func(*Batch) error { return nil })
		if err != nil || res.Count != real {
			t.Fatalf("%d rows, %v; want %d", res.Count, err, real)
		}
	}
	if !l.table.fit {
		t.Fatal("the claimed rows did not pass the size test")
	}
	if a := l.table.answers.Load(); a != 0 || !l.table.off.Load() {
		t.Fatalf("%d answers from a table past its bound (off %v)", a, l.table.off.Load())
	}
}

// TestLevelTableCellsNotInCell: a chunk whose rows are not known to lie
// in their cell has them tested even where the box covers the cell, and
// when every row passes the chunk is taken whole, as the per-chunk path
// takes it (its rowsWithin): the same batches, Source spans and edges.
func TestLevelTableCellsNotInCell(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := synth.Streamlines(ctx, 30_000, 7)
	if err != nil {
		t.Fatal(err)
	}
	sub := storage.Sub(st, "streamlines")
	open := func(tables bool) *Level {
		s, err := Open(ctx, sub, Options{Name: "lines", Cache: cache.New(256 << 20)})
		if err != nil {
			t.Fatal(err)
		}
		s.noTables = !tables
		return s.levels[1]
	}
	a, b := open(true), open(false)
	inv, err := a.inverseMap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	whole := BBoxQuery{Min: []float64{-1e9, -1e9, -1e9}, Max: []float64{1e9, 1e9, 1e9}, Connectivity: true, Wire: true}
	dump(t, a, whole) // the level read: the next answer builds its table
	tab := a.levelTable(ctx, inv)
	if tab == nil {
		t.Fatal("no table")
	}
	for i := range tab.inCell {
		tab.inCell[i] = false
	}
	boxes := []BBoxQuery{whole, {Min: []float64{100, 200, 0}, Max: []float64{700, 1000, 600}, Connectivity: true, Wire: true}}
	for _, q := range boxes {
		if got, want := dump(t, a, q), dump(t, b, q); got != want {
			t.Fatalf("box %v–%v: answers differ\n got %.300q\nwant %.300q", q.Min, q.Max, got, want)
		}
	}
	if a.table.answers.Load() < int64(len(boxes)) {
		t.Fatalf("%d answers from the table", a.table.answers.Load())
	}
}

// dump is everything l's answer to q shows, as a string.
func dump(t *testing.T, l *Level, q BBoxQuery) string {
	t.Helper()
	var out []byte
	res, err := l.BBox(context.Background(), q, func(bt *Batch) error {
		lo, hi, all := bt.Source.Span()
		out = fmt.Appendf(out, "%v %d %d %d %d %v %v|", bt.Chunk, bt.Rows, bt.First, lo, hi, all, bt.Source.Rows())
		out = append(out, bt.Vertices.Data...)
		out = append(out, bt.WireIDs...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	out = fmt.Appendf(out, "%d %d %v %d|", res.Count, res.Matched, res.More, res.Chunks)
	return string(append(out, res.WireEdges...))
}

// TestLevelTableBuildStopsAtItsBound: a level whose metadata understates
// its rows passed the table's size test, and the build then read every
// chunk of the level and held them all at once before it found the rows
// past the bound — a hundred times the cache's share for a table, for a
// store claiming a hundredth of its rows. The build stops reading once
// the rows read pass the bound. (Level 0: its 400,000 rows outweigh
// the table's part for each chunk, which level 1's 7,570 do not.)
func TestLevelTableBuildStopsAtItsBound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := synth.Streamlines(ctx, 400_000, 1)
	if err != nil {
		t.Fatal(err)
	}
	reads := &chunkGets{Store: storage.Sub(st, "streamlines")}
	probe, err := Open(ctx, reads, Options{Name: "lines"})
	if err != nil {
		t.Fatal(err)
	}
	real := probe.levels[0].meta.VertexCount
	claimed := real / 100
	s, err := Open(ctx, reads, Options{Name: "lines", Cache: cache.New(tableShare * 2 * probe.levels[0].tableBytes(claimed))})
	if err != nil {
		t.Fatal(err)
	}
	l := s.levels[0]
	l.meta.VertexCount = claimed
	if !l.tableFits() {
		t.Fatal("the claimed rows did not pass the size test")
	}
	inv, err := l.inverseMap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	reads.n.Store(0)
	if _, _, err := l.buildTable(ctx, inv); !errors.Is(err, errNoTable) {
		t.Fatalf("build: %v, want errNoTable", err)
	}
	if n, all := reads.n.Load(), int64(len(l.keys)); n > all/4 {
		t.Fatalf("the build made %d reads of vertex chunks, for a level of %d, before it gave up; its rows passed the bound within a fiftieth of them", n, all)
	}
}

// chunkGets counts the reads of vertex chunks.
type chunkGets struct {
	storage.Store
	n atomic.Int64
}

func (c *chunkGets) Get(ctx context.Context, key string, o storage.ReadOptions) (storage.Object, error) {
	if strings.Contains(key, "/vertices/") {
		c.n.Add(1)
	}
	return c.Store.Get(ctx, key, o)
}
