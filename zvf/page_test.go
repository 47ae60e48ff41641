package zvf_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/cql2"
	"github.com/zvfserve/zvfserve/zvf/demo"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// flat is a bbox answer put together from its pages: rows in order and
// the connections as index tuples, sorted (pages carry them in another
// order than the whole answer).
type flat struct {
	verts []byte
	ids   []int64
	attrs [][]byte
	edges [][]int64
	faces [][]int64
	width int
	pages int
	// matched: what pages said the whole answer's row count is
	matched []int64
}

func tuples(v []int64, w int) [][]int64 {
	var out [][]int64
	for i := 0; i+w <= len(v); i += w {
		out = append(out, slices.Clone(v[i:i+w]))
	}
	return out
}

func (f *flat) add(t *testing.T, b *zvf.Batch) {
	f.verts = append(f.verts, b.Vertices.Data...)
	f.ids = append(f.ids, b.ObjectIDs...)
	for len(f.attrs) < len(b.Attributes) {
		f.attrs = append(f.attrs, nil)
	}
	for k, a := range b.Attributes {
		f.attrs[k] = append(f.attrs[k], a.Data...)
	}
}

// addConn checks a page's connections — each names only rows the answer
// has delivered by the page's end, and at least one of the page's own —
// and keeps them.
func (f *flat) addConn(t *testing.T, res zvf.BBoxResult, from int64) {
	t.Helper()
	to := from + res.Count
	check := func(tt [][]int64) {
		for _, c := range tt {
			if slices.Max(c) >= to || slices.Max(c) < from || slices.Min(c) < 0 {
				t.Fatalf("page [%d, %d) carries %v", from, to, c)
			}
		}
	}
	e, fc := tuples(res.Edges, 2), tuples(res.Faces, max(res.FaceWidth, 1))
	check(e)
	check(fc)
	f.edges = append(f.edges, e...)
	if res.Faces != nil {
		f.faces = append(f.faces, fc...)
		f.width = res.FaceWidth
	}
}

func (f *flat) sort() {
	for _, s := range [][][]int64{f.edges, f.faces} {
		slices.SortFunc(s, slices.Compare)
	}
}

// pager chooses how the next page is asked for: its limit, and whether
// the position goes through a cursor-sized encoding of maxBytes (0: the
// Resume as returned) or only as an offset.
type pager struct {
	name   string
	limit  func(r *rand.Rand) int64
	budget int  // Resume.Append's byte budget; -1: pass Next itself
	offset bool // resume by offset alone (rows before matched again)
}

func whole(t *testing.T, l *zvf.Level, min, max []float64) *flat {
	t.Helper()
	return wholeSel(t, l, min, max, zvf.Selection{})
}

// wholeSel is the unpaged answer for the box narrowed by sel.
func wholeSel(t *testing.T, l *zvf.Level, min, max []float64, sel zvf.Selection) *flat {
	t.Helper()
	var f flat
	res, err := l.BBox(context.Background(), zvf.BBoxQuery{Min: min, Max: max, Attributes: []string{"*"}, Connectivity: true, Selection: sel}, func(b *zvf.Batch) error {
		f.add(t, b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.More || res.Next != nil {
		t.Fatal("an unlimited answer says more follows")
	}
	f.addConn(t, res, 0)
	f.sort()
	f.pages = 1
	return &f
}

func paged(t *testing.T, l *zvf.Level, min, max []float64, p pager, seed uint64) *flat {
	t.Helper()
	return pagedSel(t, l, min, max, p, seed, zvf.Selection{})
}

// pagedSel is the answer for the box narrowed by sel, paged by p.
func pagedSel(t *testing.T, l *zvf.Level, min, max []float64, p pager, seed uint64, sel zvf.Selection) *flat {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 7))
	var f flat
	q := zvf.BBoxQuery{Min: min, Max: max, Attributes: []string{"*"}, Connectivity: true, Selection: sel}
	for from := int64(0); ; {
		q.Limit = p.limit(r)
		res, err := l.BBox(context.Background(), q, func(b *zvf.Batch) error {
			f.add(t, b)
			return nil
		})
		if err != nil {
			t.Fatalf("page at %d: %v", from, err)
		}
		f.addConn(t, res, from)
		f.pages++
		from += res.Count
		if res.MatchedKnown {
			// Whichever page says how many rows the answer has (the
			// last; the first when few chunks follow it) says it right.
			f.matched = append(f.matched, res.Matched)
		}
		if !res.More {
			if res.Next != nil {
				t.Fatal("the last page has a next")
			}
			if !res.MatchedKnown {
				t.Fatal("the last page does not know how many rows the answer has")
			}
			for _, m := range f.matched {
				if m != from {
					t.Fatalf("a page said the answer has %d rows; it has %d", m, from)
				}
			}
			break
		}
		if res.Count == 0 || f.pages > 20000 {
			t.Fatalf("paging does not advance (%d rows, page %d)", res.Count, f.pages)
		}
		switch {
		case p.offset:
			q.Resume, q.Offset = nil, from
		case p.budget < 0:
			q.Resume = res.Next
		default:
			n, err := zvf.ParseResume(res.Next.Append(nil, p.budget))
			if err != nil {
				t.Fatal(err)
			}
			q.Resume = n
		}
		if q.Resume != nil && q.Resume.Offset != from {
			t.Fatalf("next page at %d, after %d rows", q.Resume.Offset, from)
		}
	}
	f.sort()
	return &f
}

func sameAnswer(t *testing.T, what string, got, want *flat) {
	t.Helper()
	switch {
	case !bytes.Equal(got.verts, want.verts):
		t.Fatalf("%s: vertices differ (%d and %d bytes)", what, len(got.verts), len(want.verts))
	case !slices.Equal(got.ids, want.ids):
		t.Fatalf("%s: object ids differ", what)
	case len(got.verts) > 0 && !slices.EqualFunc(got.attrs, want.attrs, bytes.Equal): // no rows: no batch, no columns
		t.Fatalf("%s: attributes differ", what)
	case got.width != want.width:
		t.Fatalf("%s: face width %d, want %d", what, got.width, want.width)
	}
	for _, c := range []struct {
		name      string
		got, want [][]int64
	}{{"edges", got.edges, want.edges}, {"faces", got.faces, want.faces}} {
		if !slices.EqualFunc(c.got, c.want, slices.Equal) {
			i := 0
			for i < min(len(c.got), len(c.want)) && slices.Equal(c.got[i], c.want[i]) {
				i++
			}
			at := func(s [][]int64) any {
				if i < len(s) {
					return s[i]
				}
				return "none"
			}
			t.Fatalf("%s in %d pages: %d %s, want %d; first difference at %d: %v, want %v", what, got.pages, len(c.got), c.name, len(c.want), i, at(c.got), at(c.want))
		}
	}
}

// mustPageStores is pageStores, stopping the test if they could not be
// built.
func mustPageStores(t *testing.T) map[string]*zvf.Store {
	t.Helper()
	stores, err := pageStores()
	if err != nil {
		t.Fatal(err)
	}
	return stores
}

// pageStores are the stores the paging property runs over: the demo
// scene (all four geometries, every level) in both layouts, and the
// reference graph, which the demo does not have.
var pageStores = sync.OnceValues(func() (map[string]*zvf.Store, error) {
	ctx := context.Background()
	mem, err := blobstore.Open(ctx, "mem://")
	if err != nil {
		return nil, err
	}
	infos, err := demo.Build(ctx, mem, demo.Options{Seed: 3, Scale: 0.1})
	if err != nil {
		return nil, err
	}
	ch := cache.New(256 << 20)
	out := map[string]*zvf.Store{}
	open := func(name string, st storage.Store) error {
		// Distinct names: cache keys start with the store's name.
		s, err := zvf.Open(ctx, st, zvf.Options{Name: fmt.Sprintf("s%d", len(out)), Cache: ch})
		out[name] = s
		return err
	}
	for _, in := range infos {
		sub := storage.Sub(mem, in.Prefix)
		if err := open(in.Name, sub); err != nil {
			return nil, err
		}
		for _, v := range []struct {
			name string
			o    zvftest.To09Options
		}{{"v09", zvftest.To09Options{}}, {"v09dup", zvftest.To09Options{Duplicate: true}}} {
			dst, err := blobstore.Open(ctx, "mem://")
			if err != nil {
				return nil, err
			}
			if err := zvftest.To09(ctx, sub, dst, v.o); err != nil {
				return nil, err
			}
			if err := open(in.Name+"-"+v.name, dst); err != nil {
				return nil, err
			}
		}
	}
	for _, name := range []string{"graph", "skeleton"} {
		st, err := blobstore.Open(ctx, filepath.Join(fixtures, name+".zarrvectors"))
		if err != nil {
			return nil, err
		}
		if err := open("ref-"+name, st); err != nil {
			return nil, err
		}
	}
	for _, name := range []string{"graph_v09", "skeleton_v09", "mesh_v09"} {
		st, err := blobstore.Open(ctx, filepath.Join(fixtures09, name+".zarrvectors"))
		if err != nil {
			return nil, err
		}
		if err := open("ref-"+name, st); err != nil {
			return nil, err
		}
	}
	return out, nil
})

// boxes are the property's boxes for a store: all of it, a middle part
// whose faces cut chunks, a thin slab across it and a corner.
func boxes(s *zvf.Store) [][2][]float64 {
	b := s.Info().Bounds
	lo, hi := b[0], b[1]
	at := func(f float64) []float64 {
		out := make([]float64, len(lo))
		for i := range lo {
			out[i] = lo[i] + f*(hi[i]-lo[i])
		}
		return out
	}
	slab := [2][]float64{slices.Clone(lo), slices.Clone(hi)}
	slab[0][0], slab[1][0] = at(0.45)[0], at(0.55)[0]
	return [][2][]float64{
		{at(-0.01), at(1.01)},
		{at(0.23), at(0.81)},
		slab,
		{at(-0.01), at(0.4)},
	}
}

// TestPagesJoinToTheWholeAnswer: for every demo geometry and level, in
// both layouts, and the reference graphs and skeletons, over several
// boxes, the pages of a paged answer put together are the unpaged answer
// — vertices, object ids, attributes, and every edge and face, once, with
// its direction and winding, as indices into the whole answer — whatever
// the pages' sizes: fixed limits (1, 997, 5000), sizes changing from page
// to page (a server bounding pages by bytes), cursors too small to carry
// the counts before the page (the counts are found again), and pages
// resumed by offset alone.
func TestPagesJoinToTheWholeAnswer(t *testing.T) {
	t.Parallel()
	stores := mustPageStores(t)
	fixed := func(n int64) func(*rand.Rand) int64 { return func(*rand.Rand) int64 { return n } }
	pagers := []pager{
		{name: "limit 1", limit: fixed(1), budget: -1},
		{name: "limit 997", limit: fixed(997), budget: 1024},
		{name: "limit 5000", limit: fixed(5000), budget: -1},
		{name: "any size", limit: func(r *rand.Rand) int64 { return 1 + r.Int64N(1500) }, budget: 1024},
		{name: "no counts in the cursor", limit: func(r *rand.Rand) int64 { return 1 + r.Int64N(400) }, budget: 6},
		{name: "a few counts in the cursor", limit: func(r *rand.Rand) int64 { return 1 + r.Int64N(400) }, budget: 12},
		{name: "offsets", limit: fixed(700), offset: true},
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range stores {
			if !yield(n) {
				return
			}
		}
	})
	for _, name := range names {
		s := stores[name]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, n := range s.Levels() {
				l, err := s.Level(n)
				if err != nil {
					t.Fatal(err)
				}
				for bi, box := range boxes(s) {
					want := whole(t, l, box[0], box[1])
					rows := int64(len(want.verts) / (4 * s.Info().Dims))
					if s.Info().VertexDType != "float32" {
						t.Fatalf("vertex dtype %s", s.Info().VertexDType)
					}
					for pi, p := range pagers {
						if p.name == "limit 1" && rows > 1000 {
							continue // a page a row: the small boxes and levels suffice
						}
						what := fmt.Sprintf("level %d box %d %s", n, bi, p.name)
						got := paged(t, l, box[0], box[1], p, uint64(bi*10+pi))
						sameAnswer(t, what, got, want)
					}
					// Filtered and sampled answers page the same way: their
					// pages join to the unfiltered answer's kept rows, with
					// the connections whose every vertex is kept.
					tb := tableOf(t, l, emptyCols(want))
					var sels []selectionCase
					for _, c := range selections(t, tb, uint64(n*10+bi), 3) {
						if !strings.HasPrefix(c.what, cql2.LangJSON) {
							sels = append(sels, c)
						}
					}
					sels = append(sels, selections(t, &table{n: tb.n, dims: tb.dims, verts: tb.verts, ids: tb.ids}, 9, 1)...) // a sample alone
					for _, c := range sels {
						sw := restrict(want, tb, c.keep)
						for pi, p := range pagers {
							if p.name != "any size" && p.name != "a few counts in the cursor" && p.name != "offsets" {
								continue
							}
							what := fmt.Sprintf("level %d box %d %s, %s", n, bi, c.what, p.name)
							sameAnswer(t, what, emptyCols(pagedSel(t, l, box[0], box[1], p, uint64(bi*10+pi), c.sel)), sw)
						}
					}
				}
			}
		})
	}
}

// TestPagesHaveConnectionsToJoin: the property above is not vacuous —
// answers that span pages have edges and faces to lose (the finding:
// indices local to a page dropped every connection across a boundary).
func TestPagesHaveConnectionsToJoin(t *testing.T) {
	t.Parallel()
	stores := mustPageStores(t)
	for _, name := range []string{"axons", "skeletons", "meshes", "ref-graph"} {
		l, _ := stores[name].Level(0)
		box := boxes(stores[name])[0]
		w := whole(t, l, box[0], box[1])
		if len(w.edges)+len(w.faces) < 20 || len(w.verts)/12 < 500 {
			t.Fatalf("%s: %d edges, %d faces, %d rows: too few to test paging", name, len(w.edges), len(w.faces), len(w.verts)/12)
		}
	}
}

// TestResumeRejectsForgeries: a page position comes from a client inside
// a cursor; anything but what Append wrote is refused (ErrBadQuery), and
// a decodable position that does not fit the answer is refused by BBox.
func TestResumeRejectsForgeries(t *testing.T) {
	t.Parallel()
	stores := mustPageStores(t)
	l, _ := stores["axons"].Level(0)
	box := boxes(stores["axons"])[0]
	q := zvf.BBoxQuery{Min: box[0], Max: box[1], Limit: 1000, Connectivity: true}
	res, err := l.BBox(context.Background(), q, func(*zvf.Batch) error { return nil })
	if err != nil || res.Next == nil {
		t.Fatalf("first page: %v, next %v", err, res.Next)
	}
	good := res.Next.Append(nil, 1024)
	if _, err := zvf.ParseResume(good); err != nil {
		t.Fatal(err)
	}
	for _, b := range [][]byte{nil, {}, {2}, good[:len(good)-1], append(slices.Clone(good), 0), {1, 5, 0, 9, 0}, {1, 5, 0, 0, 3, 4, 4}, {1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1}} {
		if _, err := zvf.ParseResume(b); !errors.Is(err, zvf.ErrBadQuery) {
			t.Errorf("%v: %v", b, err)
		}
	}
	enc := func(v ...uint64) []byte {
		var b []byte
		for _, x := range v {
			b = binary.AppendUvarint(b, x)
		}
		return b
	}
	for _, b := range [][]byte{
		enc(1, 10, 200, 0, 0),           // past the candidate chunks
		enc(1, 1<<31, 0, 1<<30, 0),      // a rank past its chunk's rows
		enc(1, 1000, 20, 0, 2, 990, 10), // counts before the page that are not the answer's (a reach-back finds them too large)
	} {
		r, err := zvf.ParseResume(b)
		if err != nil {
			t.Fatalf("%v: %v", b, err)
		}
		q.Resume = r
		if _, err := l.BBox(context.Background(), q, func(*zvf.Batch) error { return nil }); !errors.Is(err, zvf.ErrBadQuery) {
			t.Errorf("%v: %v", b, err)
		}
	}
}

// FuzzParseResume: any bytes decode to a position that encodes back to
// the same bytes, or are refused with ErrBadQuery — never a panic, never
// an allocation beyond the input's size.
func FuzzParseResume(f *testing.F) {
	f.Add([]byte{1, 10, 3, 2, 2, 4, 4})
	f.Add([]byte{1, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := zvf.ParseResume(b)
		if err != nil {
			if !errors.Is(err, zvf.ErrBadQuery) {
				t.Fatalf("%v", err)
			}
			return
		}
		if again := r.Append(nil, 1<<20); !bytes.Equal(again, b) {
			t.Fatalf("%v decodes, then encodes as %v", b, again)
		}
	})
}
