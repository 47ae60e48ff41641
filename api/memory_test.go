package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/writer"
)

// A store of points with one wide attribute, as spatial omics writes
// (embeddings, gene panels): 128 float32 channels, 512 bytes a row, about
// 1.3 KB of JSON text a row.
const (
	wideRows     = 3_000
	wideChannels = 128
	wideBox      = "/api/v1/stores/wide/bbox?min=0,0,0&max=100,100,100&attributes=*"
)

// widePoints is the wide store, written once per test binary.
var widePoints = sync.OnceValues(func() (storage.Writer, error) {
	ctx := context.Background()
	r := rand.New(rand.NewPCG(5, 11))
	pos := make([]float32, 3*wideRows)
	for i := range pos {
		pos[i] = float32(r.Float64() * 100)
	}
	emb := make([]float32, wideChannels*wideRows)
	for i := range emb {
		emb[i] = float32(r.NormFloat64())
	}
	ids := make([]int64, wideRows)
	for i := range ids {
		ids[i] = int64(i / 10)
	}
	st, err := blobstore.Open(ctx, "mem://")
	if err == nil {
		_, err = writer.WritePoints(ctx, st, "wide", &writer.PointCloud{Positions: pos, ObjectIDs: ids,
			Attributes: []writer.Attribute{writer.Float32Attribute("embedding", wideChannels, emb)}},
			writer.Options{ChunkShape: []float64{25, 25, 25}})
	}
	return st, err
})

func wideStore(t *testing.T) storage.Store {
	t.Helper()
	st, err := widePoints()
	if err != nil {
		t.Fatal(err)
	}
	return storage.Sub(st, "wide")
}

func wideServer(t *testing.T, o api.Options) (*api.Server, *cache.Cache) {
	t.Helper()
	if o.Cache == nil {
		o.Cache = cache.New(64 << 20)
	}
	s, err := zvf.Open(context.Background(), wideStore(t), zvf.Options{Name: "wide", Cache: o.Cache})
	if err != nil {
		t.Fatal(err)
	}
	o.Stores = []*zvf.Store{s}
	srv := apitest.New(t, o)
	return srv, o.Cache
}

// jsonPage is what the tests read of a JSON bbox page.
type jsonPage struct {
	Vertices   [][]float64            `json:"vertices"`
	ObjectIDs  []int64                `json:"object_ids"`
	Attributes map[string][][]float64 `json:"attributes"`
	Count      int64                  `json:"count"`
	Next       *string                `json:"next"`
}

// TestJSONPagesBoundedInBytes: a JSON answer holds its object ids and
// attribute values until its vertices are out, so its pages are bounded
// by what those take in bytes, not only in rows: with a 128-channel
// attribute and ids (520 bytes a row) and JSONPageBytes 256 KiB (8 MiB by
// default: 16,131 such rows) a page holds 504 rows, though the request
// allows a million. The pages, followed by their cursors, hold exactly the
// rows of the one-page NDJSON answer, and everything the answers held is
// given back to the budget.
func TestJSONPagesBoundedInBytes(t *testing.T) {
	t.Parallel()
	const pageBytes = 256 << 10
	srv, ch := wideServer(t, api.Options{JSONPageBytes: pageBytes})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	// The reference: NDJSON streams every row as it comes, one page.
	_, nd := apitest.Get(t, ts, wideBox+"&f=ndjson")
	lines := bytes.Split(bytes.TrimSpace(nd), []byte("\n"))
	type row struct {
		V  []float64            `json:"v"`
		ID int64                `json:"id"`
		A  map[string][]float64 `json:"a"`
	}
	var want []row
	for _, l := range lines[1 : len(lines)-1] {
		var r row
		if err := json.Unmarshal(l, &r); err != nil {
			t.Fatal(err)
		}
		want = append(want, r)
	}
	if len(want) != wideRows {
		t.Fatalf("NDJSON: %d rows, want %d", len(want), wideRows)
	}
	const perPage = pageBytes / (8 + 4*wideChannels)
	var got []row
	path := wideBox
	for pages := 0; ; pages++ {
		resp, b := apitest.Get(t, ts, path)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("page %d: %d %.200s", pages, resp.StatusCode, b)
		}
		var p jsonPage
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatalf("page %d: %v", pages, err)
		}
		if p.Count > perPage || int(p.Count) != len(p.Vertices) || len(p.ObjectIDs) != len(p.Vertices) || len(p.Attributes["embedding"]) != len(p.Vertices) {
			t.Fatalf("page %d: count %d, %d vertices, %d ids, %d attribute rows; at most %d rows a page", pages, p.Count, len(p.Vertices), len(p.ObjectIDs), len(p.Attributes["embedding"]), perPage)
		}
		for i := range p.Vertices {
			got = append(got, row{V: p.Vertices[i], ID: p.ObjectIDs[i], A: map[string][]float64{"embedding": p.Attributes["embedding"][i]}})
		}
		if p.Next == nil {
			if pages == 0 {
				t.Fatalf("a %d-row answer of 520-byte rows came as one JSON page", wideRows)
			}
			break
		}
		if p.Count != perPage {
			t.Fatalf("page %d holds %d rows, not a full page of %d", pages, p.Count, perPage)
		}
		path = wideBox + "&cursor=" + url.QueryEscape(*p.Next)
	}
	if len(got) != len(want) {
		t.Fatalf("%d rows over the pages, %d in the NDJSON answer", len(got), len(want))
	}
	for i := range want {
		if fmt.Sprint(got[i]) != fmt.Sprint(want[i]) {
			t.Fatalf("row %d: pages %v, NDJSON %v", i, got[i], want[i])
		}
	}
	if st := ch.Stats(); st.Reserved != 0 {
		t.Fatalf("%d bytes still reserved after every answer ended", st.Reserved)
	}
}

// TestAnswersShareTheBudget: what an answer in flight holds counts
// against the cache's budget (the cache evicts to make room), and while
// answers hold more than AnswerBytes a new request waits, then gets 503
// with Retry-After; once they are done, requests are served again.
func TestAnswersShareTheBudget(t *testing.T) {
	t.Parallel()
	ch := cache.New(4 << 20)
	srv, _ := wideServer(t, api.Options{Cache: ch, AnswerBytes: 1, QueueWait: 200 * time.Millisecond, StallTimeout: time.Minute})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := startHTTPOn(t, srv, smallBuffers{ln}, false)
	// Fill the cache: a box of a few chunks, read once.
	if resp, b := apitest.Get(t, ts, "/api/v1/stores/wide/bbox?min=0,0,0&max=20,20,20&attributes=*&f=bin"); resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %.200s", resp.StatusCode, b)
	}
	filled := ch.Stats()
	if filled.Bytes == 0 {
		t.Fatal("nothing cached")
	}
	// An answer whose client reads nothing: it has started (its status
	// line came) and is blocked in a write, holding its buffers and the
	// ids and values of the rows it has read.
	c := dialSmall(t, ts.Listener.Addr().String(), wideBox)
	readStatusLine(t, c)
	st := ch.Stats()
	if st.Reserved < 512<<10 || st.Bytes+st.Reserved > st.Budget && st.Bytes > 0 {
		t.Fatalf("with an answer in flight: %d reserved, %d cached, budget %d", st.Reserved, st.Bytes, st.Budget)
	}
	if v := metric(t, srv, `zvfserve_answer_bytes`); v < 512<<10 {
		t.Fatalf("zvfserve_answer_bytes %v with an answer in flight", v)
	}
	resp, b := apitest.Get(t, ts, "/api/v1/stores/wide")
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a request while answers hold the budget: %d %.200s", resp.StatusCode, b)
	}
	// The client goes: its answer ends and gives its memory back.
	_ = c.Close()
	timeout := time.After(10 * time.Second)
	for room := ch.Room(1); room != nil; room = ch.Room(1) {
		select {
		case <-room:
		case <-timeout:
			t.Fatalf("%d bytes still reserved 10 s after the client left", ch.Stats().Reserved)
		}
	}
	if resp, b := apitest.Get(t, ts, "/api/v1/stores/wide"); resp.StatusCode != http.StatusOK {
		t.Fatalf("once the answer is gone: %d %.200s", resp.StatusCode, b)
	}
}
