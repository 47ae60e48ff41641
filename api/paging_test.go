package api_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/demo"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// page is one bbox page in any format, reduced to what the formats share:
// each column's rows (a text format's JSON values, the binary format's
// row bytes), the connections as index tuples, count and next.
type page struct {
	cols          map[string][]string
	edges, faces  [][]int64
	width         int
	count         int64
	next          string
	numberMatched int64 // -1: absent
}

func (p *page) addRows(col string, rows ...string) {
	if p.cols == nil {
		p.cols = map[string][]string{}
	}
	p.cols[col] = append(p.cols[col], rows...)
}

func raws(rs []json.RawMessage) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r)
	}
	return out
}

// pageTrailer is what the JSON document and the NDJSON closing line hold
// besides rows.
type pageTrailer struct {
	Edges         [][]int64 `json:"edges"`
	Faces         [][]int64 `json:"faces"`
	Count         int64     `json:"count"`
	Next          *string   `json:"next"`
	NumberMatched *int64    `json:"number_matched"`
}

func (p *page) setTrailer(t pageTrailer) {
	p.edges, p.faces, p.count, p.numberMatched = t.Edges, t.Faces, t.Count, -1
	if len(t.Faces) > 0 {
		p.width = len(t.Faces[0])
	}
	if t.Next != nil {
		p.next = *t.Next
	}
	if t.NumberMatched != nil {
		p.numberMatched = *t.NumberMatched
	}
}

func parsePage(t *testing.T, format string, b []byte) page {
	t.Helper()
	var p page
	switch format {
	case "json":
		var d struct {
			pageTrailer
			Vertices   []json.RawMessage            `json:"vertices"`
			ObjectIDs  []json.RawMessage            `json:"object_ids"`
			Attributes map[string][]json.RawMessage `json:"attributes"`
		}
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("JSON page: %v", err)
		}
		p.setTrailer(d.pageTrailer)
		p.addRows("vertices", raws(d.Vertices)...)
		p.addRows("ids", raws(d.ObjectIDs)...)
		for name, rs := range d.Attributes {
			p.addRows("a:"+name, raws(rs)...)
		}
	case "ndjson":
		lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		for _, ln := range lines[1:] {
			var row struct {
				V  json.RawMessage            `json:"v"`
				ID json.RawMessage            `json:"id"`
				A  map[string]json.RawMessage `json:"a"`
			}
			if err := json.Unmarshal([]byte(ln), &row); err != nil {
				t.Fatalf("NDJSON line %q: %v", ln, err)
			}
			if row.V == nil {
				var tr pageTrailer
				if err := json.Unmarshal([]byte(ln), &tr); err != nil {
					t.Fatal(err)
				}
				p.setTrailer(tr)
				continue
			}
			p.addRows("vertices", string(row.V))
			if row.ID != nil {
				p.addRows("ids", string(row.ID))
			}
			for name, v := range row.A {
				p.addRows("a:"+name, string(v))
			}
		}
	case "bin":
		hl := int(binary.LittleEndian.Uint64(b[8:]))
		var meta struct {
			Attributes []zvf.AttrInfo `json:"attribute_info"`
		}
		if err := json.Unmarshal(b[16:16+hl], &meta); err != nil {
			t.Fatal(err)
		}
		rows := 0
		for o := 16 + (hl+7)/8*8; o < len(b); {
			kind := binary.LittleEndian.Uint32(b[o:])
			aux := int(binary.LittleEndian.Uint32(b[o+4:]))
			n := int(binary.LittleEndian.Uint64(b[o+8:]))
			data := b[o+16 : o+16+n]
			split := func(col string, k int) {
				if k == 0 {
					return
				}
				w := len(data) / k
				for i := 0; i < k; i++ {
					p.addRows(col, string(data[i*w:(i+1)*w]))
				}
			}
			switch kind {
			case 1:
				rows = aux
				split("vertices", rows)
			case 2:
				split("ids", rows)
			case 3:
				split("a:"+meta.Attributes[aux].Name, rows)
			case 4, 5:
				var tt [][]int64
				for i := 0; i+4*aux <= len(data); i += 4 * aux {
					c := make([]int64, aux)
					for k := range c {
						c[k] = int64(binary.LittleEndian.Uint32(data[i+4*k:]))
					}
					tt = append(tt, c)
				}
				if kind == 4 {
					p.edges = tt
				} else {
					p.faces, p.width = tt, aux
				}
			case 15:
				var tr pageTrailer
				if err := json.Unmarshal(data, &tr); err != nil {
					t.Fatal(err)
				}
				e, f, w := p.edges, p.faces, p.width
				p.setTrailer(tr)
				p.edges, p.faces, p.width = e, f, w
			}
			o += 16 + (n+7)/8*8
		}
	}
	return p
}

// join puts pages together as one answer, checking that each page's
// connections name only rows delivered by its end and at least one of
// its own.
func join(t *testing.T, pages []page) page {
	t.Helper()
	var all page
	from := int64(0)
	for i, p := range pages {
		to := from + p.count
		for _, c := range append(slices.Clone(p.edges), p.faces...) {
			if slices.Max(c) >= to || slices.Max(c) < from {
				t.Fatalf("page %d [%d, %d) carries %v", i, from, to, c)
			}
		}
		for col, rs := range p.cols {
			all.addRows(col, rs...)
		}
		all.edges = append(all.edges, p.edges...)
		all.faces = append(all.faces, p.faces...)
		all.width = max(all.width, p.width)
		from = to
		if last := i == len(pages)-1; last != (p.next == "") || last && p.numberMatched != to {
			t.Fatalf("page %d of %d: next %q, number_matched %d after %d rows", i, len(pages), p.next, p.numberMatched, to)
		}
	}
	all.count = from
	slices.SortFunc(all.edges, slices.Compare)
	slices.SortFunc(all.faces, slices.Compare)
	return all
}

func fetchPages(t *testing.T, h http.Handler, path, format string) []page {
	t.Helper()
	var out []page
	for cur := ""; ; {
		u := path + "&f=" + format
		if cur != "" {
			u += "&cursor=" + url.QueryEscape(cur)
		}
		code, hdr, body := serveFull(t, h, u)
		if code != http.StatusOK {
			t.Fatalf("%s: %d %.300s", u, code, body)
		}
		p := parsePage(t, format, body)
		if hdr.Get("X-Next-Cursor") != p.next {
			t.Fatalf("X-Next-Cursor %q, next %q", hdr.Get("X-Next-Cursor"), p.next)
		}
		out = append(out, p)
		if p.next == "" {
			return out
		}
		if cur = p.next; len(out) > 10000 {
			t.Fatal("paging does not end")
		}
	}
}

// pagingServer serves the paging stores with the given per-response cap
// (1 << 40: every answer whole).
func pagingServer(t *testing.T, maxVertices int64) ([]*zvf.Store, *api.Server) {
	t.Helper()
	stores, err := pagingStores()
	if err != nil {
		t.Fatal(err)
	}
	srv := apitest.New(t, api.Options{Stores: stores, MaxVertices: maxVertices})
	return stores, srv
}

// eachPagingStore runs check in a parallel subtest for each paging store,
// served whole (every answer in one page) and capped at 1,300 vertices an
// answer.
func eachPagingStore(t *testing.T, check func(t *testing.T, s *zvf.Store, whole, capped http.Handler)) {
	t.Helper()
	stores, whole := pagingServer(t, 1<<40)
	_, capped := pagingServer(t, 1300)
	for _, s := range stores {
		t.Run(s.Name(), func(t *testing.T) {
			t.Parallel()
			check(t, s, whole.Handler(), capped.Handler())
		})
	}
}

// checkGolden compares got, one "hash path" line an answer, with the
// golden file, line by line; with update it rewrites the file instead.
func checkGolden(t *testing.T, golden, got string, update bool) {
	t.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	g, w := strings.Split(got, "\n"), strings.Split(string(want), "\n")
	if len(g) != len(w) {
		t.Fatalf("%d answers, %s has %d", len(g), golden, len(w))
	}
	for i := range g {
		if g[i] != w[i] {
			t.Errorf("changed: %s\n   was: %s", g[i], w[i])
		}
	}
}

// pagingBoxes are the boxes the paging tests ask of every paging store:
// the whole demo scene, and a box that cuts through it.
var pagingBoxes = []string{"min=-1,-1,-1&max=1001,1001,601", "min=190,260,110&max=770,880,480"}

// pagingStores are the demo scene (every geometry, small) as written, and
// its meshes rewritten as ZVF 0.9.
var pagingStores = sync.OnceValues(func() ([]*zvf.Store, error) {
	ctx := context.Background()
	mem, out, ch, err := buildDemo(demo.Options{Seed: 5, Scale: 0.1})
	if err != nil {
		return nil, err
	}
	m09, err := blobstore.Open(ctx, "mem://")
	if err != nil {
		return nil, err
	}
	if err := zvftest.To09(ctx, storage.Sub(mem, "meshes"), m09, zvftest.To09Options{}); err != nil {
		return nil, err
	}
	s, err := zvf.Open(ctx, m09, zvf.Options{Name: "meshes09", Cache: ch})
	return append(out, s), err
})

// TestPagedAnswersJoinInEveryFormat: in JSON, NDJSON and binary, for every
// demo geometry and level and several boxes, the pages of an answer paged
// by limit (1, 997, 5000) or by the server's maximum put together are the
// unpaged answer: the same rows in the same order, every edge and face
// once, with indices into the whole answer.
func TestPagedAnswersJoinInEveryFormat(t *testing.T) {
	t.Parallel()
	eachPagingStore(t, func(t *testing.T, s *zvf.Store, whole, capped http.Handler) {
		for _, n := range s.Levels() {
			for bi, box := range pagingBoxes {
				path := fmt.Sprintf("/api/v1/stores/%s/bbox?%s&level=%d&attributes=*", s.Name(), box, n)
				for _, format := range []string{"json", "ndjson", "bin"} {
					want := join(t, fetchPages(t, whole, path, format))
					if format == "json" && bi == 0 && n == 0 && s.Info().GeometryTypes[0] != "point_cloud" && len(want.edges)+len(want.faces) < 100 {
						t.Fatalf("%d edges, %d faces: too few to test", len(want.edges), len(want.faces))
					}
					for _, c := range []struct {
						name  string
						h     http.Handler
						limit string
					}{
						{"limit 1", whole, "1"},
						{"limit 997", whole, "997"},
						{"limit 5000", whole, "5000"},
						{"--max-vertices", capped, ""},
					} {
						if c.limit == "1" && want.count > 300 {
							continue // a page a row: the coarse levels suffice
						}
						p := path
						if c.limit != "" {
							p += "&limit=" + c.limit
						}
						pages := fetchPages(t, c.h, p, format)
						got := join(t, pages)
						what := fmt.Sprintf("level %d box %d %s %s (%d pages)", n, bi, format, c.name, len(pages))
						sameJoined(t, what, got, want)
					}
				}
			}
		}
	})
}

func sameJoined(t *testing.T, what string, got, want page) {
	t.Helper()
	if got.count != want.count || len(got.cols) != len(want.cols) {
		t.Fatalf("%s: %d rows in %d columns, want %d in %d", what, got.count, len(got.cols), want.count, len(want.cols))
	}
	for col, rs := range want.cols {
		if !slices.Equal(got.cols[col], rs) {
			t.Fatalf("%s: column %s differs", what, col)
		}
	}
	if !slices.EqualFunc(got.edges, want.edges, slices.Equal) || !slices.EqualFunc(got.faces, want.faces, slices.Equal) || got.width != want.width {
		t.Fatalf("%s: %d edges and %d faces of width %d, want %d and %d of width %d", what, len(got.edges), len(got.faces), got.width, len(want.edges), len(want.faces), want.width)
	}
}

var updateUnpaged = flag.Bool("update-unpaged", false, "rewrite testdata/unpaged-bbox.sha256 from this code's answers")

// TestUnpagedAnswersUnchanged: answers that fit one page are byte for
// byte what they were before pages indexed the whole answer: the SHA-256
// of every demo store's body at every level, over two boxes, in every
// format, with and without connectivity, against testdata written by the
// code before that change.
func TestUnpagedAnswersUnchanged(t *testing.T) {
	t.Parallel()
	stores, srv := pagingServer(t, 1<<40)
	var got bytes.Buffer
	for _, s := range stores {
		for _, n := range s.Levels() {
			for _, box := range pagingBoxes {
				for _, format := range []string{"json", "ndjson", "bin"} {
					for _, conn := range []string{"true", "false"} {
						path := fmt.Sprintf("/api/v1/stores/%s/bbox?%s&level=%d&attributes=*&f=%s&connectivity=%s", s.Name(), box, n, format, conn)
						code, _, body := serveFull(t, srv.Handler(), path)
						if code != http.StatusOK {
							t.Fatalf("%s: %d %.300s", path, code, body)
						}
						fmt.Fprintf(&got, "%x %s\n", sha256.Sum256(body), path)
					}
				}
			}
		}
	}
	checkGolden(t, "testdata/unpaged-bbox.sha256", got.String(), *updateUnpaged)
}
