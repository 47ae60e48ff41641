package zvf_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/faultstore"
	"github.com/zvfserve/zvfserve/zvf/synth"
	"github.com/zvfserve/zvfserve/zvf/writer"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
	"go.uber.org/goleak"
)

// tableAnswer runs q on l and writes everything a caller sees of the
// answer — every batch's fields and bytes, the result's counts, cursor
// and edges — into one byte string.
func tableAnswer(t *testing.T, l *zvf.Level, q zvf.BBoxQuery) ([]byte, zvf.BBoxResult) {
	t.Helper()
	b, res, err := answerOf(l, q)
	if err != nil {
		t.Fatalf("bbox %v–%v: %v", q.Min, q.Max, err)
	}
	return b, res
}

// answerOf is tableAnswer's answer, or its error.
func answerOf(l *zvf.Level, q zvf.BBoxQuery) ([]byte, zvf.BBoxResult, error) {
	var b bytes.Buffer
	res, err := l.BBox(context.Background(), q, func(bt *zvf.Batch) error {
		fmt.Fprintf(&b, "batch %v rows %d first %d ids %v attrs %d\n", bt.Chunk, bt.Rows, bt.First, bt.ObjectIDs, len(bt.Attributes))
		b.Write(bt.Vertices.Data)
		b.Write(bt.WireIDs)
		for _, a := range bt.Attributes {
			fmt.Fprintf(&b, "attr %s\n", a.Name)
			b.Write(a.Data)
		}
		if s := bt.Source; s != nil {
			lo, hi, ok := s.Span()
			fmt.Fprintf(&b, "source %d %d %v %v\n", lo, hi, ok, s.Rows())
		}
		return nil
	})
	if err != nil {
		return nil, res, err
	}
	fmt.Fprintf(&b, "count %d matched %d %v more %v chunks %d edges %v faces %v/%d wire %v\n",
		res.Count, res.Matched, res.MatchedKnown, res.More, res.Chunks, res.Edges, res.Faces, res.FaceWidth, res.WireEdges == nil)
	b.Write(res.WireEdges)
	if res.Next != nil {
		b.Write(res.Next.Append(nil, 1<<20))
	}
	return b.Bytes(), res, nil
}

// tableStores are the stores the level-table tests compare on: synthetic
// streamlines in 0.7 and 0.9, the reference polylines in both, and
// points (which never take a table).
func tableStores(t *testing.T) map[string]func() storage.Store {
	ctx := context.Background()
	lines := func() storage.Store {
		st, err := synth.Streamlines(ctx, 30_000, 7)
		if err != nil {
			t.Fatal(err)
		}
		return storage.Sub(st, "streamlines")
	}
	return map[string]func() storage.Store{
		"streamlines07": lines,
		"streamlines09": func() storage.Store {
			dst := zvftest.Store(t, "mem://")
			if err := zvftest.To09(ctx, lines(), dst, zvftest.To09Options{}); err != nil {
				t.Fatal(err)
			}
			return dst
		},
		"polylines07": func() storage.Store { return zvftest.Store(t, filepath.Join(fixtures, "polylines.zarrvectors")) },
		"polylines09": func() storage.Store { return to09(t, "polylines", zvftest.To09Options{}) },
		"points": func() storage.Store {
			st, err := synth.Points(ctx, 20_000, 3, writer.CodecNone)
			if err != nil {
				t.Fatal(err)
			}
			return storage.Sub(st, "points")
		},
	}
}

// TestLevelTableAnswersAsPerChunk: on random boxes, levels and page
// sizes, a store answering from its level tables gives, byte for byte,
// the per-chunk path's answers (batches, ids, counts, cursors, edges),
// pages after the first included; and the viewer's default request
// (connectivity, wire form, one page) does come from a table on every
// line store (given tables on levels of any chunk size).
func TestLevelTableAnswersAsPerChunk(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for name, open := range tableStores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st := open()
			withT, err := zvf.Open(ctx, st, zvf.Options{Name: name, Cache: cache.New(256 << 20)})
			if err != nil {
				t.Fatal(err)
			}
			without, err := zvf.Open(ctx, st, zvf.Options{Name: name, Cache: cache.New(256 << 20)})
			if err != nil {
				t.Fatal(err)
			}
			zvf.WithoutLevelTables(without)
			zvf.WithLevelTablesOfAnyChunk(withT) // every level compared, large chunks too
			bounds := withT.Info().Bounds
			r := rand.New(rand.NewPCG(uint64(len(name)), 5))
			tables := int64(0)
			for _, n := range withT.Levels() {
				a, _ := withT.Level(n)
				b, _ := without.Level(n)
				for k := range 40 {
					min, max := make([]float64, len(bounds[0])), make([]float64, len(bounds[0]))
					for d := range min {
						lo, hi := bounds[0][d], bounds[1][d]
						ext := hi - lo
						x, y := lo-0.1*ext+1.2*ext*r.Float64(), lo-0.1*ext+1.2*ext*r.Float64()
						if k%5 == 0 { // the whole level, faces on the data's
							x, y = lo, hi
						}
						min[d], max[d] = x, y
						if x > y {
							min[d], max[d] = y, x
						}
					}
					if k%6 == 4 {
						// An infinite face: no cover runs, so the table's
						// answer matches its chunks as the per-chunk path does.
						min[0] = math.Inf(-1)
					}
					q := zvf.BBoxQuery{Min: min, Max: max, Connectivity: true, Wire: k%7 != 3}
					switch k % 4 {
					case 1:
						q.Limit = 1 + r.Int64N(200)
					case 2:
						q.Limit = 100_000
					}
					// Twice: the first answer of a level reads only its box,
					// the second starts the table's build (in the
					// background), whose end the second round waits for.
					for round := range 2 {
						if round == 1 {
							zvf.WaitTableBuilds(withT)
						}
						for page := 0; page < 4; page++ {
							got, res := tableAnswer(t, a, q)
							want, _ := tableAnswer(t, b, q)
							if !bytes.Equal(got, want) {
								t.Fatalf("level %d box %v–%v limit %d page %d: answers differ\n got %.400q\nwant %.400q", n, min, max, q.Limit, page, got, want)
							}
							if res.Next == nil {
								break
							}
							q.Resume = res.Next
						}
						q.Resume = nil
					}
				}
				if zvf.TableAnswers(b) != 0 {
					t.Fatalf("level %d: the per-chunk store answered from a table", n)
				}
				tables += zvf.TableAnswers(a)
			}
			if line := name != "points"; line != (tables > 0) {
				t.Fatalf("%d answers from level tables", tables)
			}
		})
	}
}

// TestLevelTableCorruptChunk: a level with a corrupt chunk outside the
// box answers the box as before (from its chunks, no table is kept), a
// box that reaches the chunk fails with ErrCorrupt as it did, and the
// failed build is remembered for the store's version (see
// checkBadChunkLevel).
func TestLevelTableCorruptChunk(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := synth.Streamlines(ctx, 30_000, 7)
	if err != nil {
		t.Fatal(err)
	}
	sub := storage.Sub(st, "streamlines")
	s, err := zvf.Open(ctx, sub, zvf.Options{Name: "lines", Cache: cache.New(256 << 20)})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := s.Level(1)
	keys := l.Keys()
	bad := keys[len(keys)-1]
	// The last chunk's vertices cut short: a decode of it fails.
	path := fmt.Sprintf("streamlines/1/vertices/%d.%d.%d/c/0", bad[0], bad[1], bad[2])
	if _, err := st.Get(ctx, path, storage.ReadOptions{Max: 1 << 20}); err != nil {
		t.Fatal(err) // not where a 0.7 store keeps it
	}
	if err := st.Put(ctx, path, []byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	checkBadChunkLevel(t, s, l, zvf.ErrCorrupt)
}

// TestLevelTableUnsupportedChunk: the same for a chunk the server cannot
// decode (an unknown codec: ErrUnsupported, as a Draco level's): its
// level's build fails once for the store's version, not on every request.
func TestLevelTableUnsupportedChunk(t *testing.T) {
	t.Parallel()
	dir := copyFixture(t, "polylines")
	s, err := zvf.Open(context.Background(), zvftest.Store(t, dir), zvf.Options{Name: "polylines", Cache: cache.New(256 << 20)})
	if err != nil {
		t.Fatal(err)
	}
	zvf.WithLevelTablesOfAnyChunk(s) // the fixture's chunks are larger than a table's default
	l, _ := s.Level(0)
	keys := l.Keys()
	bad := keys[len(keys)-1]
	mutate(t, filepath.Join(dir, fmt.Sprintf("0/vertices/%d.%d.%d/zarr.json", bad[0], bad[1], bad[2])), func(b []byte) []byte {
		m := bytes.Replace(b, []byte(`"name":"bytes"`), []byte(`"name":"lzma9"`), 1)
		if bytes.Equal(m, b) {
			t.Fatal("no bytes codec to replace")
		}
		return m
	})
	checkBadChunkLevel(t, s, l, zvf.ErrUnsupported)
}

// checkBadChunkLevel: level l of s, whose last chunk fails to load with
// kind, answers its first chunk's cell the same every time and from its
// chunks (no table kept or answering); its table's build, started by the
// level's second answer, ran once for all the answers after (each would
// read the whole level again); and a box over the whole level fails with
// kind.
func checkBadChunkLevel(t *testing.T, s *zvf.Store, l *zvf.Level, kind error) {
	t.Helper()
	min, max := firstCell(l)
	q := zvf.BBoxQuery{Min: min, Max: max, Connectivity: true, Wire: true}
	var answers [6][]byte
	for i := range answers {
		zvf.WaitTableBuilds(s) // the build the answer before started has ended
		answers[i], _ = tableAnswer(t, l, q)
		if !bytes.Equal(answers[i], answers[0]) {
			t.Fatalf("answer %d of one box differs", i)
		}
	}
	zvf.WaitTableBuilds(s)
	if zvf.TableCached(l) || zvf.TableAnswers(l) != 0 || zvf.TableBuilds(l) != 1 {
		t.Fatalf("a table was kept (%v) or answered (%d), or built %d times (want once) with a bad chunk",
			zvf.TableCached(l), zvf.TableAnswers(l), zvf.TableBuilds(l))
	}
	whole := zvf.BBoxQuery{Min: []float64{-1e9, -1e9, -1e9}, Max: []float64{1e9, 1e9, 1e9}, Connectivity: true, Wire: true}
	_, err := l.BBox(context.Background(), whole, func(*zvf.Batch) error { return nil })
	if !errors.Is(err, kind) {
		t.Fatalf("the whole level: %v, want %v", err, kind)
	}
}

// TestLevelTableNotAcrossVersions: a store reopened as a new version
// over a changed level answers from its own data, not the old version's
// table in the shared cache.
func TestLevelTableNotAcrossVersions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	open := func(seed uint64) storage.Store {
		st, err := synth.Streamlines(ctx, 30_000, seed)
		if err != nil {
			t.Fatal(err)
		}
		return storage.Sub(st, "streamlines")
	}
	c := cache.New(256 << 20)
	old, err := zvf.OpenGen(ctx, open(7), zvf.Options{Name: "lines", Cache: c}, 1)
	if err != nil {
		t.Fatal(err)
	}
	whole := zvf.BBoxQuery{Min: []float64{-1e9, -1e9, -1e9}, Max: []float64{1e9, 1e9, 1e9}, Connectivity: true, Wire: true}
	lo, _ := old.Level(1)
	for range 2 { // the second starts the build
		tableAnswer(t, lo, whole)
	}
	zvf.WaitTableBuilds(old)
	tableAnswer(t, lo, whole)
	if zvf.TableAnswers(lo) == 0 || !zvf.TableCached(lo) {
		t.Fatal("the old version answered without its table")
	}
	// The same name on the same cache, other data: a reopen after the
	// store's files changed (the next generation).
	next := open(8)
	s, err := zvf.OpenGen(ctx, next, zvf.Options{Name: "lines", Cache: c}, 2)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := zvf.Open(ctx, next, zvf.Options{Name: "fresh", Cache: cache.New(256 << 20)})
	if err != nil {
		t.Fatal(err)
	}
	zvf.WithoutLevelTables(ref)
	ln, _ := s.Level(1)
	lr, _ := ref.Level(1)
	want, _ := tableAnswer(t, lr, whole)
	for i := range 3 {
		zvf.WaitTableBuilds(s)
		if got, _ := tableAnswer(t, ln, whole); !bytes.Equal(got, want) {
			t.Fatalf("answer %d of the new version is not its data's", i)
		}
	}
	if zvf.TableAnswers(ln) == 0 {
		t.Fatal("the new version answered without a table of its own")
	}
}

// TestLevelTableOneBuild: requests that all find a level's table missing
// at once, over slow storage, start one build between them and answer
// from the level's chunks meanwhile; once it is built, requests answer
// from it, the same answer.
func TestLevelTableOneBuild(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := synth.Streamlines(ctx, 30_000, 7)
	if err != nil {
		t.Fatal(err)
	}
	slow := faultstore.New(storage.Sub(st, "streamlines"), nil)
	s, err := zvf.Open(ctx, slow, zvf.Options{Name: "lines", Cache: cache.New(256 << 20), Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := s.Level(1)
	// A level's first answer, of one chunk's cell, reads only that chunk.
	min, max := firstCell(l)
	tableAnswer(t, l, zvf.BBoxQuery{Min: min, Max: max, Connectivity: true, Wire: true})
	slow.Add(&faultstore.Rule{Fault: faultstore.Fault{Delay: 2 * time.Millisecond}})
	whole := zvf.BBoxQuery{Min: []float64{-1e9, -1e9, -1e9}, Max: []float64{1e9, 1e9, 1e9}, Connectivity: true, Wire: true}
	const n = 6
	got, errs := make([][]byte, 2*n), make([]error, 2*n)
	for round := range 2 {
		var wg sync.WaitGroup
		for i := round * n; i < (round+1)*n; i++ {
			wg.Go(func() { got[i], _, errs[i] = answerOf(l, whole) })
		}
		wg.Wait()
		if round == 0 {
			if a := zvf.TableAnswers(l); a != 0 {
				t.Fatalf("%d answers waited for the table's build", a)
			}
			zvf.WaitTableBuilds(s)
		}
	}
	for i := range got {
		if errs[i] != nil || !bytes.Equal(got[i], got[0]) {
			t.Fatalf("answer %d differs (%v)", i, errs[i])
		}
	}
	if b, a := zvf.TableBuilds(l), zvf.TableAnswers(l); b != 1 || a != n {
		t.Fatalf("%d builds, %d answers from the table; want 1 and %d", b, a, n)
	}
}

// TestLevelTableBuildOffRequestPath: the request that finds a level's
// table missing answers at once while the build it started waits on
// storage; closing the store ends the build, no goroutine of it is left,
// and the level still answers, from its chunks, building nothing more.
func TestLevelTableBuildOffRequestPath(t *testing.T) {
	// Not parallel: goleak looks at every goroutine.
	ignore := goleak.IgnoreCurrent()
	ctx := context.Background()
	st, err := synth.Streamlines(ctx, 30_000, 7)
	if err != nil {
		t.Fatal(err)
	}
	hang := &hangingStore{Store: storage.Sub(st, "streamlines"), entered: make(chan struct{})}
	s, err := zvf.Open(ctx, hang, zvf.Options{Name: "lines", Cache: cache.New(256 << 20), Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := s.Level(1)
	min, max := firstCell(l)
	q := zvf.BBoxQuery{Min: min, Max: max, Connectivity: true, Wire: true}
	want, _ := tableAnswer(t, l, q) // reads its chunk; the level is now read
	hang.armed.Store(true)          // every other chunk's read now blocks until its reader's context ends
	done, entered := make(chan []byte, 1), hang.entered
	go func() {
		b, _, _ := answerOf(l, q)
		done <- b
	}()
	for range 2 {
		select {
		case got := <-done:
			if !bytes.Equal(got, want) {
				t.Fatal("the answer that started the build differs")
			}
			done = nil
		case <-entered:
			entered = nil // the build is reading
		case <-time.After(20 * time.Second):
			t.Fatal("the request waits for the table's build, or no build started")
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, ignore)
	if got, _ := tableAnswer(t, l, q); !bytes.Equal(got, want) {
		t.Fatal("the closed store's answer differs")
	}
	zvf.WaitTableBuilds(s)
	if b, a := zvf.TableBuilds(l), zvf.TableAnswers(l); b != 1 || a != 0 {
		t.Fatalf("after Close: %d builds, %d answers from a table; want the 1 Close ended, and none", b, a)
	}
}

// hangingStore, once armed, blocks every read of a vertex chunk until
// the reader's context ends, telling entered (closed) when the first
// begins.
type hangingStore struct {
	storage.Store
	armed   atomic.Bool
	once    sync.Once
	entered chan struct{}
}

func (h *hangingStore) Get(ctx context.Context, key string, o storage.ReadOptions) (storage.Object, error) {
	if h.armed.Load() && strings.Contains(key, "/vertices/") && strings.HasSuffix(key, "/c/0") {
		h.once.Do(func() { close(h.entered) })
		<-ctx.Done()
		return storage.Object{}, ctx.Err()
	}
	return h.Store.Get(ctx, key, o)
}

// TestLevelTableRetiredNotRebuilt: requests still running on a store
// version whose cache entries were retired (a newer version opened) do
// not rebuild its level table, reading the whole level, one each.
func TestLevelTableRetiredNotRebuilt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := synth.Streamlines(ctx, 30_000, 7)
	if err != nil {
		t.Fatal(err)
	}
	c := cache.New(256 << 20)
	s, err := zvf.OpenGen(ctx, storage.Sub(st, "streamlines"), zvf.Options{Name: "lines", Cache: c}, 1)
	if err != nil {
		t.Fatal(err)
	}
	l, _ := s.Level(1)
	min, max := firstCell(l)
	want, _ := tableAnswer(t, l, zvf.BBoxQuery{Min: min, Max: max, Connectivity: true, Wire: true}) // reads one chunk
	c.Retire("lines\x001\x00")
	for i := range 4 {
		zvf.WaitTableBuilds(s) // each build a request started (the first) has ended
		if got, _ := tableAnswer(t, l, zvf.BBoxQuery{Min: min, Max: max, Connectivity: true, Wire: true}); !bytes.Equal(got, want) {
			t.Fatalf("answer %d after the retirement differs", i)
		}
	}
	if b := zvf.TableBuilds(l); b > 1 {
		t.Fatalf("%d builds of a retired version's table", b)
	}
}

// TestLevelTableOnlyForSmallChunks: by default only a level of small
// chunks (at most tableRowsPerChunk rows a chunk on average) answers
// from a table: on larger chunks the per-chunk path, which copies a
// covered chunk's prepared edges whole, was faster (a 50k streamline box
// at the bench's level 0: 775–793 µs from the table, 553–576 without).
func TestLevelTableOnlyForSmallChunks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := zvf.Open(ctx, tableStores(t)["streamlines07"](), zvf.Options{Name: "s", Cache: cache.New(256 << 20)})
	if err != nil {
		t.Fatal(err)
	}
	small, large := 0, 0
	for _, n := range s.Levels() {
		l, _ := s.Level(n)
		info := l.Info()
		b := s.Info().Bounds
		q := zvf.BBoxQuery{Min: b[0], Max: b[1], Connectivity: true, Wire: true}
		// The first answer of a level reads only its box, the second
		// starts the table's build, the third finds the table.
		for i := range 3 {
			if i == 2 {
				zvf.WaitTableBuilds(s)
			}
			tableAnswer(t, l, q)
		}
		perChunk := float64(info.VertexCount) / float64(info.ChunkCount)
		switch answered := zvf.TableAnswers(l) > 0; {
		case perChunk <= 64 && !answered:
			t.Errorf("level %d (%.1f rows a chunk) did not answer from a table", n, perChunk)
		case perChunk > 64 && answered:
			t.Errorf("level %d (%.1f rows a chunk) answered from a table", n, perChunk)
		case perChunk <= 64:
			small++
		default:
			large++
		}
	}
	if small == 0 || large == 0 {
		t.Fatalf("levels of small chunks %d, of large %d: the store no longer has both", small, large)
	}
}

// firstCell is the grid cell of l's first chunk (3 axes).
func firstCell(l *zvf.Level) (min, max []float64) {
	first, cs := l.Keys()[0], l.Info().ChunkShape
	min, max = make([]float64, 3), make([]float64, 3)
	for d := range 3 {
		min[d], max[d] = float64(first[d])*cs[d], float64(first[d]+1)*cs[d]
	}
	return min, max
}
