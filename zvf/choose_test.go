package zvf_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/synth"
	"github.com/zvfserve/zvfserve/zvf/writer"
)

// readCounter counts reads of object data.
type readCounter struct {
	storage.Store
	n atomic.Int64
}

func (c *readCounter) Get(ctx context.Context, key string, o storage.ReadOptions) (storage.Object, error) {
	c.n.Add(1)
	return c.Store.Get(ctx, key, o)
}

// TestChooseLevelReadsNothing: level=auto chooses from metadata (and the
// cache), so on a cold store it reads no chunk — it used to read every
// level-0 chunk in the box to count them (0.6–1.2 s for a whole 2M-point
// store) — and on uniform data the level it picks holds at most the budget
// while the next finer one does not.
func TestChooseLevelReadsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var rc *readCounter
	mem, s := synthPoints(t, 200_000, 3, func(st storage.Store) storage.Store {
		rc = &readCounter{Store: st}
		return rc
	}, cache.New(256<<20))
	boxes := [][2][]float64{
		{{0, 0, 0}, {1000, 1000, 1000}},
		{{100, 100, 100}, {600, 450, 900}},
		{{0, 0, 0}, {130, 130, 130}},
	}
	for _, b := range boxes {
		// Exact counts of every level, read through a separate store so the
		// cache under test stays cold.
		var counts []int64
		for _, n := range s.Levels() {
			counts = append(counts, exactCount(t, mem, n, b[0], b[1]))
		}
		for _, budget := range []int64{counts[0] * 2, counts[0] * 2 / 3, counts[len(counts)-1] * 3, 1} {
			before := rc.n.Load()
			got, err := s.ChooseLevel(ctx, b[0], b[1], budget, nil, zvf.Selection{})
			if err != nil {
				t.Fatal(err)
			}
			if reads := rc.n.Load() - before; reads != 0 {
				t.Fatalf("ChooseLevel read %d objects", reads)
			}
			want := finestWithin(counts, budget)
			if s.Levels()[want] != got {
				t.Errorf("box %v budget %d: level %d, want %d (counts %v)", b, budget, got, s.Levels()[want], counts)
			}
		}
	}
	// Chunks in the cache are counted exactly.
	whole := boxes[0]
	n0 := boxCount(t, s, 0, whole[0], whole[1])
	if got, _ := s.ChooseLevel(ctx, whole[0], whole[1], n0, nil, zvf.Selection{}); got != 0 {
		t.Errorf("a budget equal to the cached level-0 count chose level %d", got)
	}
}

// synthPoints writes n synthetic points (seed seed) into memory
// and opens them as "points" through wrap (nil: the store itself) with
// cache ch (nil: none); it returns the store's bucket too.
func synthPoints(t *testing.T, n int, seed uint64, wrap func(storage.Store) storage.Store, ch zvf.Cache) (storage.Store, *zvf.Store) {
	t.Helper()
	mem, err := synth.Points(context.Background(), n, seed, writer.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mem.Close() })
	var st storage.Store = storage.Sub(mem, "points")
	if wrap != nil {
		st = wrap(st)
	}
	s, err := zvf.Open(context.Background(), st, zvf.Options{Name: "points", Cache: ch})
	if err != nil {
		t.Fatal(err)
	}
	return mem, s
}

// boxCount is the number of level n's vertices in the box, as s answers.
func boxCount(t *testing.T, s *zvf.Store, n int, min, max []float64) int64 {
	t.Helper()
	l, _ := s.Level(n)
	res, err := l.BBox(context.Background(), zvf.BBoxQuery{Min: min, Max: max}, func(*zvf.Batch) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	return res.Count
}

// exactCount counts level n's vertices in the box through a store of its
// own, so the cache under test stays cold.
func exactCount(t *testing.T, mem storage.Store, n int, min, max []float64) int64 {
	t.Helper()
	s, err := zvf.Open(context.Background(), storage.Sub(mem, "points"), zvf.Options{Name: "exact"})
	if err != nil {
		t.Fatal(err)
	}
	return boxCount(t, s, n, min, max)
}

// TestChooseLevelWarm: once a level's chunks have been read, level=auto
// counts them from what it learnt then — rows per chunk, and whether
// they all lie in their cell — not by looking each candidate up in the
// cache and matching its rows again on every request (issue 25: half a
// warm request's CPU). The choice stays exact: with every chunk read, it
// is the finest level whose exact count fits, also at a budget of exactly
// that count and one less, which only matching the edge chunks decides.
func TestChooseLevelWarm(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pc := &keyCounter{Cache: cache.New(256 << 20)}
	_, s := synthPoints(t, 200_000, 3, nil, pc)
	everything := [2][]float64{{-1e6, -1e6, -1e6}, {1e6, 1e6, 1e6}}
	for _, n := range s.Levels() {
		boxCount(t, s, n, everything[0], everything[1])
	}

	// Every chunk lies inside this box: known counts decide alone.
	n0 := boxCount(t, s, 0, everything[0], everything[1])
	for _, budget := range []int64{1, n0 / 3, n0 - 1, n0} {
		before := pc.keyed.Load()
		if _, err := s.ChooseLevel(ctx, everything[0], everything[1], budget, nil, zvf.Selection{}); err != nil {
			t.Fatal(err)
		}
		if peeks := pc.keyed.Load() - before; peeks != 0 {
			t.Errorf("budget %d: %d cache lookups to choose a level among chunks already counted", budget, peeks)
		}
	}

	boxes := [][2][]float64{
		{{0, 0, 0}, {1000, 1000, 1000}},
		{{100, 100, 100}, {600, 450, 900}},
		{{0, 0, 0}, {130, 130, 130}},
		{{333, 17, 512}, {334.5, 999, 700}},
	}
	for _, b := range boxes {
		var counts []int64
		for _, n := range s.Levels() {
			counts = append(counts, boxCount(t, s, n, b[0], b[1]))
		}
		for i, c := range counts[:len(counts)-1] {
			for _, budget := range []int64{c, c - 1} {
				if budget < 0 {
					continue
				}
				want := finestWithin(counts, budget)
				got, err := s.ChooseLevel(ctx, b[0], b[1], budget, nil, zvf.Selection{})
				if err != nil {
					t.Fatal(err)
				}
				if s.Levels()[want] != got {
					t.Errorf("box %v budget %d (level %d's count): level %d, want %d (counts %v)", b, budget, i, got, s.Levels()[want], counts)
				}
			}
		}
	}
}

// finestWithin is the index of the first (finest) level whose count is at
// most budget, or the last (coarsest) level when none is: the level
// level=auto must choose.
func finestWithin(counts []int64, budget int64) int {
	for i, c := range counts {
		if c <= budget {
			return i
		}
	}
	return len(counts) - 1
}
