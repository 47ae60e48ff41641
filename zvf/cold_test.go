package zvf_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// boxRows is every row of the level inside the closed box, chunk by chunk
// in key order and in row order within a chunk: the answer, by brute
// force over the chunks' rows (read through Chunk, with their fragment
// index), as float32 triples.
func boxRows(t *testing.T, l *zvf.Level, lo, hi [3]float64) []byte {
	t.Helper()
	var out []byte
	for _, k := range l.Keys() {
		tile, err := l.Chunk(context.Background(), k, nil)
		if err != nil {
			t.Fatal(err)
		}
		b := tile.Vertices.Data
		for r := 0; r < tile.Rows; r++ {
			in := true
			for a := 0; a < 3; a++ {
				v := float64(math.Float32frombits(binary.LittleEndian.Uint32(b[12*r+4*a:])))
				in = in && v >= lo[a] && v <= hi[a]
			}
			if in {
				out = append(out, b[12*r:12*r+12]...)
			}
		}
	}
	return out
}

// TestColdBBoxReadsNoFragmentIndex: on a bin-prefiltered level (fragment =
// bin), box matching learns each chunk's bins from its rows, so a cold
// box reads each chunk's vertices array (zarr.json and c/0) and nothing
// else — not its fragment index, two more files a chunk — and answers
// what a test of every row answers, in the same order, cold and warm. A
// chunk whose rows are out of bin order is read with its fragment index,
// and still answers the same cold and warm.
func TestColdBBoxReadsNoFragmentIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	boxes := [][2][3]float64{
		{{-1e9, -1e9, -1e9}, {1e9, 1e9, 1e9}}, // every chunk, covered
		{{0, 0, 0}, {250, 250, 250}},          // one chunk's cell
		{{120, 333, 40}, {610, 575, 990}},     // partly covered chunks and bins
		{{260, 260, 260}, {290, 310, 262.5}},  // inside one chunk, across bins
		{{10, 20, 30}, {10, 20, 30}},          // a point
	}
	for _, fixture := range []string{"points_bins", "points_bins_zstd", "points_bins_blosc"} {
		t.Run(fixture, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(fixtures, fixture+".zarrvectors")
			bs := zvftest.Store(t, dir)
			rl := zvftest.OpenLevel(t, bs, zvf.Options{Name: fixture}, 0)
			log := &readLog{Store: bs, reads: map[string][]int{}}
			l := zvftest.OpenLevel(t, log, zvf.Options{Name: fixture, Cache: cache.New(64 << 20)}, 0)
			log.take()
			for bi, bx := range boxes {
				want := boxRows(t, rl, bx[0], bx[1])
				for pass := 0; pass < 2; pass++ { // cold, then from the cache
					var got []byte
					res, err := l.BBox(ctx, zvf.BBoxQuery{Min: bx[0][:], Max: bx[1][:]}, func(b *zvf.Batch) error {
						got = append(got, b.Vertices.Data...)
						return nil
					})
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(got, want) || res.Count != int64(len(want)/12) {
						t.Errorf("box %d pass %d: %d rows, a test of every row finds %d (or in another order)", bi, pass, len(got)/12, len(want)/12)
					}
					keys := log.take()
					for k := range keys {
						if strings.Contains(k, "vertex_fragments") || !strings.Contains(k, "/vertices/") {
							t.Errorf("box %d pass %d read %s", bi, pass, k)
						}
					}
					if pass == 1 && len(keys) > 0 {
						t.Errorf("box %d read %d files from the cache's chunks", bi, len(keys))
					}
				}
			}
		})
	}
	t.Run("rows out of bin order", func(t *testing.T) {
		t.Parallel()
		dir := copyFixture(t, "points_bins")
		// Chunk 1.1.1's first and last rows (in its first and last bins)
		// trade places: its rows no longer tell its bins.
		mutate(t, filepath.Join(dir, "0/vertices/1.1.1/c/0"), func(b []byte) []byte {
			n := len(b)
			var first [12]byte
			copy(first[:], b[:12])
			copy(b[:12], b[n-12:])
			copy(b[n-12:], first[:])
			return b
		})
		bs := zvftest.Store(t, dir)
		log := &readLog{Store: bs, reads: map[string][]int{}}
		l := zvftest.OpenLevel(t, log, zvf.Options{Name: "points_bins", Cache: cache.New(64 << 20)}, 0)
		log.take()
		bx := [2][3]float64{{240, 240, 240}, {510, 510, 510}}
		var answers [2][]byte
		for pass := range answers {
			if _, err := l.BBox(ctx, zvf.BBoxQuery{Min: bx[0][:], Max: bx[1][:]}, func(b *zvf.Batch) error {
				answers[pass] = append(answers[pass], b.Vertices.Data...)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			frags := 0
			for k := range log.take() {
				if strings.Contains(k, "vertex_fragments") {
					if !strings.Contains(k, "/1.1.1/") {
						t.Errorf("pass %d read %s", pass, k)
					}
					frags++
				}
			}
			if want := []int{2, 0}[pass]; frags != want {
				t.Errorf("pass %d read %d fragment index files, want %d", pass, frags, want)
			}
		}
		if len(answers[0]) == 0 || !bytes.Equal(answers[0], answers[1]) {
			t.Errorf("cold and warm answers differ: %d and %d bytes", len(answers[0]), len(answers[1]))
		}
	})
}

// gateReads is a store that tells when a read of a key containing one of
// the strings in want has begun.
type gateReads struct {
	storage.Store
	want  []string
	begun chan struct{}
	once  sync.Once
}

func (g *gateReads) Get(ctx context.Context, key string, o storage.ReadOptions) (storage.Object, error) {
	for _, w := range g.want {
		if strings.Contains(key, w) {
			g.once.Do(func() { close(g.begun) })
		}
	}
	return g.Store.Get(ctx, key, o)
}

// TestColdReadsOverlapAnswer: a cold box reads later chunks while the
// answer takes the rows of those read before them — reads do
// not wait for the answer's writes, nor the writes for the reads — and
// still answers what a test of every row answers, in the same order; a
// page that stops in the first chunks answers their rows.
func TestColdReadsOverlapAnswer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(fixtures, "points_bins.zarrvectors")
	bs := zvftest.Store(t, dir)
	ref, err := zvf.Open(ctx, bs, zvf.Options{Name: "points_bins"})
	if err != nil {
		t.Fatal(err)
	}
	rl, _ := ref.Level(0)
	keys := rl.Keys()
	// One read at a time, up to four chunks ahead of the answer, and the
	// box below covers every chunk: keys[2:] are read while the answer
	// takes the first rows.
	var later []string
	for _, k := range keys[2:] {
		later = append(later, "/vertices/"+k.String()+"/")
	}
	all := [2][3]float64{{-1e9, -1e9, -1e9}, {1e9, 1e9, 1e9}}
	want := boxRows(t, rl, all[0], all[1])
	gate := &gateReads{Store: bs, want: later, begun: make(chan struct{})}
	s, err := zvf.Open(ctx, gate, zvf.Options{Name: "points_bins", Cache: cache.New(64 << 20), Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := s.Level(0)
	var got []byte
	overlapped := false
	res, err := l.BBox(ctx, zvf.BBoxQuery{Min: all[0][:], Max: all[1][:]}, func(b *zvf.Batch) error {
		if got == nil {
			// The answer's first rows: later chunks' reads are under
			// way (or never start: the test fails, it does not hang).
			select {
			case <-gate.begun:
				overlapped = true
			case <-time.After(5 * time.Second):
			}
		}
		got = append(got, b.Vertices.Data...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !overlapped {
		t.Error("no later chunk was read while the answer took the first rows")
	}
	if !bytes.Equal(got, want) || res.Count != int64(len(want)/12) {
		t.Errorf("%d rows, a test of every row finds %d (or in another order)", len(got)/12, len(want)/12)
	}

	// A page that ends in the first chunk, while later ones are read.
	s2, err := zvf.Open(ctx, bs, zvf.Options{Name: "points_bins", Cache: cache.New(64 << 20), Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	l2, _ := s2.Level(0)
	var page []byte
	res2, err := l2.BBox(ctx, zvf.BBoxQuery{Min: all[0][:], Max: all[1][:], Limit: 3}, func(b *zvf.Batch) error {
		page = append(page, b.Vertices.Data...)
		return nil
	})
	if err != nil || !res2.More || !bytes.Equal(page, want[:36]) {
		t.Fatalf("page of 3: %d rows, more %v, %v", len(page)/12, res2.More, err)
	}
}
