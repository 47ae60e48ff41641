package api_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/demo"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/synth"
	"github.com/zvfserve/zvfserve/zvf/writer"
)

// textScene is the demo scene and a bin-prefiltered point cloud in one
// memory store, with the stores' names and prefixes.
type textScene struct {
	mem   storage.Store
	infos []demo.StoreInfo
}

func newTextScene(t *testing.T) textScene {
	t.Helper()
	ctx := context.Background()
	mem, err := synth.Points(ctx, 30_000, 7, writer.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	infos, err := demo.Build(ctx, mem, demo.Options{Seed: 5, Scale: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	return textScene{mem, append(infos, demo.StoreInfo{Name: "points", Prefix: "points"})}
}

// textStores opens a new text scene's stores with the cache ch (nil:
// none), as one server.
func textStores(t *testing.T, ch *cache.Cache) (*api.Server, []*zvf.Store) {
	t.Helper()
	return newTextScene(t).open(t, ch)
}

// open opens the scene's stores with the cache ch (nil: none), as one
// server; servers opened on one scene share only its storage.
func (sc textScene) open(t *testing.T, ch *cache.Cache) (*api.Server, []*zvf.Store) {
	t.Helper()
	ctx := context.Background()
	mem, infos := sc.mem, sc.infos
	var stores []*zvf.Store
	for _, in := range infos {
		o := zvf.Options{Name: in.Name}
		if ch != nil {
			o.Cache = ch
		}
		s, err := zvf.Open(ctx, storage.Sub(mem, in.Prefix), o)
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, s)
	}
	srv := apitest.New(t, api.Options{Stores: stores, Cache: ch})
	return srv, stores
}

// TestPreparedTextAnswersAsFormatted: JSON and NDJSON answers whose vertex
// rows are copied from each cached chunk's prepared text are the bytes of
// a server without a cache, which formats every row: for every demo
// geometry and the point cloud, every level, boxes that cover and cut
// chunks, with and without attributes, paged, sampled; on the first
// request (which formats), the second (which prepares the text) and the
// third (which only copies it); and with a cache too small to keep it.
func TestPreparedTextAnswersAsFormatted(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("serves the demo scene from three servers")
	}
	// One scene (building it was a fifth of the test), three servers
	// with their own stores and caches.
	scene := newTextScene(t)
	direct, stores := scene.open(t, nil)
	ch := cache.New(1 << 30)
	prepared, _ := scene.open(t, ch)
	tiny, _ := scene.open(t, cache.New(64<<10))
	pmin, pmax := synth.BoxFor(30_000, 3_000, 301)
	boxes := []string{
		"min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9",
		"min=190,260,110&max=770,880,480",
		fmt.Sprintf("min=%g,%g,%g&max=%g,%g,%g", pmin[0], pmin[1], pmin[2], pmax[0], pmax[1], pmax[2]),
	}
	copied := 0
	for _, s := range stores {
		for _, n := range s.Levels() {
			for _, box := range boxes {
				for _, format := range []string{"json", "ndjson"} {
					for _, extra := range []string{"", "&attributes=*", "&limit=997", "&sample=0.3", "&connectivity=false"} {
						path := fmt.Sprintf("/api/v1/stores/%s/bbox?%s&level=%d&f=%s%s", s.Name(), box, n, format, extra)
						want := body(t, direct.Handler(), path)
						before := ch.Stats().Bytes
						for i, h := range []http.Handler{prepared.Handler(), prepared.Handler(), prepared.Handler(), tiny.Handler(), tiny.Handler()} {
							if got := body(t, h, path); !bytes.Equal(got, want) {
								t.Fatalf("%s (server %d): answers %d bytes, formatted %d:\n%.300s\nwant\n%.300s", path, i, len(got), len(want), got, want)
							}
						}
						if ch.Stats().Bytes > before {
							copied++
						}
					}
				}
			}
		}
	}
	if copied == 0 {
		t.Fatal("no answer prepared text in the cache: the test compares nothing")
	}
}

// body is the 200 answer of path.
func body(t *testing.T, h http.Handler, path string) []byte {
	t.Helper()
	code, _, b := serveFull(t, h, path)
	if code != http.StatusOK {
		t.Fatalf("%s: %d %.300s", path, code, b)
	}
	return b
}

// TestPreparedTextCharged: a chunk's text is prepared for the second JSON
// answer that asks for it, not the first (a one-off answer formats its
// rows), and charged to the cache's budget once: after a binary answer of
// the same box, the first JSON answer grows the cache by nothing, the
// second by the text of its chunks, a third by nothing; the same for the
// attributes' text. It
// logs the text's bytes per vertex (random float32 coordinates in
// [0, 1000): the bench store's).
func TestPreparedTextCharged(t *testing.T) {
	t.Parallel()
	ch := cache.New(1 << 30)
	srv, _ := textStores(t, ch)
	h := srv.Handler()
	path := "/api/v1/stores/points/bbox?min=-1,-1,-1&max=1001,1001,1001&level=0&connectivity=false&f="
	body(t, h, path+"bin")
	bin := ch.Stats().Bytes
	body(t, h, path+"json")
	if grew := ch.Stats().Bytes - bin; grew != 0 {
		t.Fatalf("the first JSON answer prepared %d bytes", grew)
	}
	body(t, h, path+"json")
	text := ch.Stats().Bytes - bin
	body(t, h, path+"json")
	if again := ch.Stats().Bytes - bin; again != text {
		t.Fatalf("a repeated JSON answer grew the cache by %d bytes more", again-text)
	}
	// At least "[x,y,z]," (8 bytes) and a 4-byte offset a vertex.
	if text < 12*30_000 {
		t.Fatalf("prepared text charged %d bytes for 30,000 vertices", text)
	}
	t.Logf("prepared text: %.1f bytes a vertex (12 of float32 vertices)", float64(text)/30_000)
	// Attributes are prepared beside vertices that are, on their first
	// ask, and charged once too.
	body(t, h, path+"json&attributes=*")
	cells := ch.Stats().Bytes - bin - text
	body(t, h, path+"json&attributes=*")
	if again := ch.Stats().Bytes - bin - text; again != cells || cells < 3*5*30_000 {
		t.Fatalf("attribute text charged %d bytes, then %d more (3 attributes, 30,000 rows)", cells, again-cells)
	}
	t.Logf("attribute text: %.1f bytes a row (3 attributes of 4 bytes)", float64(cells)/30_000)
}
