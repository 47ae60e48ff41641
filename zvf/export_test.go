package zvf

import (
	"context"

	"github.com/zvfserve/zvfserve/zvf/ragged"
	"github.com/zvfserve/zvfserve/zvf/storage"
)

// LinkRecord is one record of a link family as the reference tests see
// it: endpoints in input order, the offsets segment and cell it came from.
type LinkRecord struct {
	Endpoints []ragged.Endpoint
	Segment   string
	Cell      string
}

// JSON renders the record as the fixtures list it: [[chunk…], row] per
// endpoint.
func (r LinkRecord) JSON() []any {
	out := make([]any, len(r.Endpoints))
	for i, ep := range r.Endpoints {
		c := make([]any, len(ep.Chunk))
		for k, v := range ep.Chunk {
			c[k] = v
		}
		out[i] = []any{c, ep.Row}
	}
	return out
}

// ReadLinks lists every record of the level's links/<delta> family in
// read_links order (ZVF 0.9 stores only).
func ReadLinks(ctx context.Context, l *Level, delta int) ([]LinkRecord, error) {
	recs, err := l.readLinks(ctx, delta)
	if err != nil {
		return nil, err
	}
	out := make([]LinkRecord, len(recs))
	for i, r := range recs {
		out[i] = LinkRecord{Endpoints: r.eps, Segment: r.seg, Cell: r.cell}
	}
	return out, nil
}

// WalkWithoutPreparation makes every chunk of l answer as if it had no
// chunkPrep (the full walk of each chunk's rows), to compare against.
func WalkWithoutPreparation(ctx context.Context, l *Level) error {
	for i := range l.keys {
		cv, err := l.verticesAt(ctx, int32(i))
		if err != nil {
			return err
		}
		cv.prep.Store(&prepSlot{})
	}
	return nil
}

// WithoutLevelTables makes every answer of s take the per-chunk path
// (levelTable), to compare against; before any query.
func WithoutLevelTables(s *Store) { s.noTables = true }

// StoreOf is l's store.
func StoreOf(l *Level) *Store { return l.s }

// WithLevelTablesOfAnyChunk lets every line level of s have a table,
// whatever its rows a chunk (tableRowsPerChunk); before any query.
func WithLevelTablesOfAnyChunk(s *Store) { s.tablesAnyChunk = true }

// TableAnswers counts the answers l's level table gave.
func TableAnswers(l *Level) int64 { return l.table.answers.Load() }

// WaitTableBuilds waits for the level-table builds of s that requests
// started before the call (they run in the background).
func WaitTableBuilds(s *Store) { s.builds.wg.Wait() }

// TableBuilds counts the builds of l's level table.
func TableBuilds(l *Level) int64 { return l.table.builds.Load() }

// TableCached reports whether l's level table is in the store's cache.
func TableCached(l *Level) bool {
	_, ok := l.s.cache.Peek(l.cacheKey("leveltable"))
	return ok
}

// OpenGen opens st as generation gen of its name (what a Handle's reopen
// does), to test what versions share through one cache.
func OpenGen(ctx context.Context, st storage.Store, o Options, gen uint64) (*Store, error) {
	o.gen = gen
	return Open(ctx, st, o)
}

// CheckHoles is the listing check a box answer runs (checkHoles), for
// its benchmark.
func (l *Level) CheckHoles(ctx context.Context, min, max []float64) error {
	return l.checkHoles(ctx, min, max)
}
