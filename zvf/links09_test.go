package zvf_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/ragged"
	"github.com/zvfserve/zvfserve/zvf/storage"
)

// editLinkCell rewrites the ragged cross-chunk link cell at key (rows of
// width endpoints, each after a perm_idx when hasPerm) through f, which
// gets the rows in stored order.
func editLinkCell(t *testing.T, st storage.Writer, key string, width int, hasPerm bool, f func(rows []int64)) {
	t.Helper()
	ctx := context.Background()
	b, err := storage.ReadAll(ctx, st, key, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	rows, sigma, err := ragged.DecodeLinkCell(oneCell(t, b), false, width, hasPerm)
	if err != nil || len(rows) == 0 {
		t.Fatalf("%s: %d rows, %v", key, len(rows), err)
	}
	var perms []int64
	if hasPerm {
		perms = make([]int64, len(rows)/width)
		for r := range perms {
			p := make([]int, width)
			for i := range p {
				p[i] = int(sigma[r*width+i])
			}
			perms[r] = ragged.LehmerCode(p)
		}
	}
	f(rows)
	p, err := ragged.EncodeLinkCell(rows, width, perms, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, key, withCell(p)); err != nil {
		t.Fatal(err)
	}
}

// TestCrossLinkRowsPastTheChunk: a cross-chunk link record naming a row
// its chunk does not hold is corrupt data, as an intra-chunk one is — a
// box with connectivity over it and the object holding its other end fail
// with a typed error naming the link family and the chunk, never answer
// with the edge or face silently left out — and validate reports it.
func TestCrossLinkRowsPastTheChunk(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	everywhere := zvf.BBoxQuery{Min: []float64{-1e9, -1e9, -1e9}, Max: []float64{1e9, 1e9, 1e9}, Connectivity: true}
	for _, tc := range []struct {
		name, store, cell string
		width             int
		hasPerm           bool
		endpoint          int    // stored endpoint made to point past its chunk
		chunk             string // that endpoint's chunk
	}{
		{"graph edge, first stored endpoint", "graph_v09", "0/links/0/0.0.+1/c/3/4/5", 2, true, 0, "3.4.5"},
		{"graph edge, second stored endpoint", "graph_v09", "0/links/0/0.0.+1/c/3/4/5", 2, true, 1, "3.4.6"},
		{"mesh face, third stored endpoint", "mesh_v09", "0/links/0/+1.-1.0_+1.0.0/c/3/5/3", 3, true, 2, "4.5.3"},
		{"skeleton parent", "skeleton_v09", "0/links/0/+1.0.0/c/1/4/3", 2, false, 1, "2.4.3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := memFixture09(t, tc.store)
			editLinkCell(t, st, tc.cell, tc.width, tc.hasPerm, func(rows []int64) { rows[tc.endpoint] = 1 << 20 })
			s, err := zvf.Open(ctx, st, zvf.Options{Name: tc.store, Cache: cache.New(64 << 20)})
			if err != nil {
				t.Fatal(err)
			}
			l, _ := s.Level(0)
			family := tc.cell[:strings.Index(tc.cell, "/c/")]
			family = family[len("0/"):]
			family = family[:strings.LastIndexByte(family, '/')] // links/0
			corrupt := func(what string, err error) {
				t.Helper()
				var ze *zvf.Error
				if !errors.As(err, &ze) || !errors.Is(err, zvf.ErrCorrupt) || ze.Store != tc.store || !strings.HasPrefix(ze.Array, family) ||
					(tc.chunk != "" && ze.Chunk != tc.chunk) || !strings.Contains(err.Error(), "1048576") {
					t.Fatalf("%s: %v, want a corrupt-data error naming %s, chunk %s and row 1048576", what, err, family, tc.chunk)
				}
			}
			_, err = l.BBox(ctx, everywhere, func(*zvf.Batch) error { return nil })
			corrupt("bbox", err)
			paged := everywhere
			paged.Limit = 97
			for err = nil; err == nil; {
				var res zvf.BBoxResult
				res, err = l.BBox(ctx, paged, func(*zvf.Batch) error { return nil })
				if err == nil && !res.More {
					t.Fatal("paged bbox: every page answered")
				}
				paged.Resume = res.Next
			}
			corrupt("paged bbox", err)
			failed := 0
			for id := int64(0); id < l.Info().ObjectCount; id++ {
				if _, err := l.Object(ctx, id, nil); err != nil {
					corrupt("object", err)
					failed++
				}
			}
			if failed == 0 {
				t.Fatal("every object answered")
			}
			rep := validateWithin(t, st, tc.store, 20*time.Second)
			found := false
			for _, p := range rep.Problems {
				found = found || (p.Severity == "error" && strings.Contains(p.Path, family) && strings.Contains(p.Path, "(row 1048576)") && strings.Contains(p.Message, "rows past chunk"))
			}
			if !found {
				t.Fatalf("validate did not report the record: %+v", rep.Problems)
			}
		})
	}
}

// TestLinkNamesParseStrictly09: a links/<delta> folder and an offsets
// segment are named as the format writes deltas ("0", "+N", "-N", no
// leading zeros: zvf-0.9-format §3.4, "Parse strictly"). "+01" beside
// "+1" was a second family of delta 1 — replacing the first, and listed
// twice in the level's link deltas — and is now an entry that is not a
// delta (ignored, as any); a segment "0.0.+01" is refused, naming it.
func TestLinkNamesParseStrictly09(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const name = "graph_v09"
	copyArray := func(t *testing.T, st storage.Writer, from, to string) {
		t.Helper()
		b, err := storage.ReadAll(ctx, st, from, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Put(ctx, to, b); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("family", func(t *testing.T) {
		t.Parallel()
		st := memFixture09(t, name)
		copyArray(t, st, "0/links/+1/zarr.json", "0/links/+01/zarr.json")
		copyArray(t, st, "0/links/+1/0.0.0/zarr.json", "0/links/+01/0.0.0/zarr.json")
		s, err := zvf.Open(ctx, st, zvf.Options{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		l, _ := s.Level(0)
		if got := fmt.Sprint(l.Info().LinkDeltas); got != "[0 1]" {
			t.Fatalf("link deltas %s, want [0 1]", got)
		}
	})
	t.Run("segment", func(t *testing.T) {
		t.Parallel()
		st := memFixture09(t, name)
		copyArray(t, st, "0/links/0/0.0.+1/zarr.json", "0/links/0/0.0.+01/zarr.json")
		_, err := zvf.Open(ctx, st, zvf.Options{Name: name})
		var ze *zvf.Error
		if !errors.As(err, &ze) || !errors.Is(err, zvf.ErrCorrupt) || ze.Array != "links/0/0.0.+01" {
			t.Fatalf("open: %v, want a corrupt-data error naming links/0/0.0.+01", err)
		}
	})
}

// TestValidateGroupsABrokenLinkFamily: a link cell whose every record
// names rows past its chunks is one problem a chunk, counted, with the
// records among its paths; validate listed one problem a record (over 800
// for one broken family), the record's index in each message.
func TestValidateGroupsABrokenLinkFamily(t *testing.T) {
	t.Parallel()
	st := memFixture09(t, "graph_v09")
	endpoints := 0
	editLinkCell(t, st, "0/links/0/0.0.+1/c/3/4/5", 2, true, func(rows []int64) {
		for i := range rows {
			rows[i] = 1 << 20
		}
		endpoints = len(rows)
	})
	rep := validateWithin(t, st, "graph_v09", 20*time.Second)
	problems, found := 0, 0
	for _, p := range rep.Problems {
		if strings.Contains(p.Message, "rows past chunk") {
			problems++
			found += p.Count
			if len(p.Paths) < 2 {
				t.Errorf("%+v: want the records among its paths", p)
			}
		}
	}
	if problems == 0 || problems > 2 || found != endpoints {
		t.Fatalf("%d problems counting %d places for %d endpoints past their chunks (want at most one a chunk, each counted): %+v", problems, found, endpoints, rep.Problems)
	}
}

// dropChunk09 removes chunk ks from a 0.9 level's vertices: its cell and
// its nonempty_chunks entry, so that the level lacks the chunk.
func dropChunk09(t *testing.T, st storage.Writer, level, ks string) {
	t.Helper()
	editMemJSON(t, st, level+"/vertices/zarr.json", func(doc map[string]any) {
		attrs := doc["attributes"].(map[string]any)
		var kept []any
		for _, k := range attrs["nonempty_chunks"].([]any) {
			if k != ks {
				kept = append(kept, k)
			}
		}
		attrs["nonempty_chunks"] = kept
	})
	if err := st.Delete(context.Background(), level+"/vertices/c/"+strings.ReplaceAll(ks, ".", "/")); err != nil {
		t.Fatal(err)
	}
}

// TestCrossLinkToAMissingChunk: a delta-0 cross-chunk link record whose
// endpoint lies in a chunk the level does not have names a vertex that is
// not there (an unwritten cell reads as no rows, zvf-0.9-format §3.2), as
// a record naming a row past its chunk does: a box with connectivity that
// reads the record, whole or paged, fails with a corrupt-data error naming
// links/0 and the missing chunk. Before, the edge was left out without a
// word (validate alone reported it).
func TestCrossLinkToAMissingChunk(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const name = "graph_v09"
	st := memFixture09(t, name)
	// The record in cell 3.4.5 of links/0/0.0.+1 joins 3.4.5 and 3.4.6.
	dropChunk09(t, st, "0", "3.4.6")
	s, err := zvf.Open(ctx, st, zvf.Options{Name: name, Cache: cache.New(64 << 20)})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := s.Level(0)
	corrupt := func(what string, err error) {
		t.Helper()
		var ze *zvf.Error
		if !errors.As(err, &ze) || !errors.Is(err, zvf.ErrCorrupt) || ze.Store != name || !strings.HasPrefix(ze.Array, "links/0") ||
			ze.Chunk != "3.4.6" || !strings.Contains(err.Error(), "does not have") {
			t.Fatalf("%s: %v, want a corrupt-data error naming links/0 and chunk 3.4.6, which the level does not have", what, err)
		}
	}
	for _, q := range []zvf.BBoxQuery{
		{Min: []float64{-1e9, -1e9, -1e9}, Max: []float64{1e9, 1e9, 1e9}, Connectivity: true},
		{Min: []float64{300, 400, 500}, Max: []float64{399, 499, 699}, Connectivity: true}, // 3.4.5 and where 3.4.6 was
	} {
		_, err = l.BBox(ctx, q, func(*zvf.Batch) error { return nil })
		corrupt(fmt.Sprintf("bbox %v–%v", q.Min, q.Max), err)
		paged := q
		paged.Limit = 5
		for err = nil; err == nil; {
			var res zvf.BBoxResult
			res, err = l.BBox(ctx, paged, func(*zvf.Batch) error { return nil })
			if err == nil && !res.More {
				t.Fatalf("paged bbox %v–%v: every page answered", q.Min, q.Max)
			}
			paged.Resume = res.Next
		}
		corrupt(fmt.Sprintf("paged bbox %v–%v", q.Min, q.Max), err)
	}
	// Without connectivity the record is not read: the vertices answer.
	if _, err := l.BBox(ctx, zvf.BBoxQuery{Min: []float64{-1e9, -1e9, -1e9}, Max: []float64{1e9, 1e9, 1e9}}, func(*zvf.Batch) error { return nil }); err != nil {
		t.Fatalf("bbox without connectivity: %v", err)
	}
}
