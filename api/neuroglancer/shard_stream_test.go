package neuroglancer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/api/neuroglancer"
	"github.com/zvfserve/zvfserve/api/neuroglancer/sharding"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/faultstore"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// shardEntries are the chunks of a whole shard file, by the spec in raw.
func shardEntries(t *testing.T, raw json.RawMessage, shard []byte) []sharding.Entry {
	t.Helper()
	var spec sharding.Spec
	if err := json.Unmarshal(raw, &spec); err != nil {
		t.Fatal(err)
	}
	r, err := sharding.NewReader(spec, 0, bytes.NewReader(shard), int64(len(shard)))
	if err != nil {
		t.Fatal(err)
	}
	es, err := r.Entries()
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// TestShardChunkOverTheBound: a shard over the build bound is read from
// its layout, but a chunk of it larger than the bound (one cell) cannot
// be: it is one cell's shuffled list or one skeleton, encoded whole. Its
// read was a 413 saying the *shard* held more than the bound, naming
// neither the chunk's size nor how to raise the bound; a GET of the
// whole file started (200, the shard index) and was cut when it reached
// such a chunk. Now the layout, which knows every chunk's stored size,
// decides before the answer starts: a read that reaches a chunk over the
// bound is a 413 problem naming the chunk, its size, the bound and
// --ng-max-shard-bytes, and builds nothing; every other read is answered.
func TestShardChunkOverTheBound(t *testing.T) {
	t.Parallel()
	st := storeNamed(t, fixtureStores(t), "points_pyramid")
	_, plain := newServer(t, api.Options{Stores: []*zvf.Store{st}, NGSharded: neuroglancer.ShardAlways})
	var inf shardedInfo
	if err := json.Unmarshal(apitest.MustGet(t, plain, "/ng/points_pyramid/annotations/info"), &inf); err != nil {
		t.Fatal(err)
	}
	level := inf.Spatial[len(inf.Spatial)-1]
	path := "/ng/points_pyramid/annotations/" + level.Key + "/0.shard"
	whole := apitest.MustGet(t, plain, path)
	es := shardEntries(t, level.Sharding, whole)
	bySize := slices.Clone(es)
	slices.SortFunc(bySize, func(a, b sharding.Entry) int { return int(a.Size - b.Size) })
	if len(es) < 4 || bySize[0].Size == bySize[len(es)-1].Size {
		t.Fatalf("%d cells of sizes %d to %d: want several, of several sizes", len(es), bySize[0].Size, bySize[len(es)-1].Size)
	}
	limit := bySize[len(es)/2].Size // half the cells fit, the shard does not
	small, big := bySize[0], bySize[len(es)-1]

	_, ts := newServer(t, api.Options{Stores: []*zvf.Store{st}, NGSharded: neuroglancer.ShardAlways, NGMaxShardBytes: limit})
	for _, tc := range []struct {
		name, method, rng string
		status            int
		want              []byte          // the bytes answered, or
		over              *sharding.Entry // the chunk a 413 names
	}{
		{"the shard index", http.MethodGet, "bytes=0-15", http.StatusPartialContent, whole[:16], nil},
		{"a chunk within the bound", http.MethodGet, fmt.Sprintf("bytes=%d-%d", small.Offset, small.Offset+small.Size-1), http.StatusPartialContent,
			whole[small.Offset : small.Offset+small.Size], nil},
		{"a chunk over the bound", http.MethodGet, fmt.Sprintf("bytes=%d-%d", big.Offset, big.Offset+big.Size-1), http.StatusRequestEntityTooLarge, nil, &big},
		{"the minishard indexes", http.MethodGet, fmt.Sprintf("bytes=%d-", es[len(es)-1].Offset+es[len(es)-1].Size), http.StatusPartialContent,
			whole[es[len(es)-1].Offset+es[len(es)-1].Size:], nil},
		{"a range from the index into the chunks", http.MethodGet, fmt.Sprintf("bytes=0-%d", big.Offset), http.StatusRequestEntityTooLarge, nil, &big},
		{"the whole file", http.MethodGet, "", http.StatusRequestEntityTooLarge, nil, &big},
		{"the whole file, HEAD", http.MethodHead, "", http.StatusRequestEntityTooLarge, nil, nil},
	} {
		var hdr []string
		if tc.rng != "" {
			hdr = []string{"Range", tc.rng}
		}
		resp, body := apitest.Do(t, ts, tc.method, path, hdr...)
		if resp.StatusCode != tc.status {
			t.Errorf("%s: %d %.300s", tc.name, resp.StatusCode, body)
			continue
		}
		if tc.want != nil && !bytes.Equal(body, tc.want) {
			t.Errorf("%s: %d bytes, not the shard's %d", tc.name, len(body), len(tc.want))
		}
		if tc.over == nil {
			continue
		}
		var p struct{ Detail string }
		if resp.Header.Get("Content-Type") != "application/problem+json" || json.Unmarshal(body, &p) != nil {
			t.Errorf("%s: %s %.300s", tc.name, resp.Header.Get("Content-Type"), body)
			continue
		}
		for _, want := range []string{"--ng-max-shard-bytes", strconv.FormatInt(tc.over.Size, 10) + " bytes", strconv.FormatInt(limit, 10),
			"chunk " + strconv.FormatUint(tc.over.Key, 10)} {
			if !strings.Contains(p.Detail, want) {
				t.Errorf("%s: the problem %q does not say %q", tc.name, p.Detail, want)
			}
		}
	}
}

// syncBuffer is a bytes.Buffer a logger may write from any goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) records(t *testing.T) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for line := range bytes.Lines(s.b.Bytes()) {
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	s.b.Reset()
	return out
}

// TestShardStreamFailure: a GET of a whole shard over the build bound is
// streamed from its layout a chunk at a time. A chunk whose build failed
// cut the answer even when it was the first, after a 200 and the shard
// index. Now the first chunk the answer reaches is built before the
// answer starts, so that its failure is a problem document; a later
// chunk's failure, which can be known only once bytes are out, cuts the
// answer cleanly: short of its Content-Length, nothing appended (no
// problem document read as shard bytes, no trailer), the connection
// closed, and the failure logged once with its error (and the access
// line's outcome "error").
func TestShardStreamFailure(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem := zvftest.Store(t, "mem://")
	writeBinnedPoints(t, mem, 20_000, 7, 8)
	faults := faultstore.New(storage.Sub(mem, "p"), nil)
	// No chunk cache: every record build reads the store.
	st, err := zvf.Open(ctx, faults, zvf.Options{Name: "p"})
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	_, ts := newServer(t, api.Options{Stores: []*zvf.Store{st}, NGSharded: neuroglancer.ShardAlways, NGMaxShardBytes: 1000,
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	const path = "/ng/p/annotations/by_id/0.shard"
	whole := apitest.MustGet(t, ts, path)
	if len(whole) < 100_000 {
		t.Fatalf("the shard is %d bytes", len(whole))
	}
	logs.records(t)
	fail := errors.New("the disk is on fire")

	// The first chunk's build fails: a problem, before any byte.
	faults.Add(&faultstore.Rule{Nth: 1, Fault: faultstore.Fault{Err: fail}})
	resp, body := apitest.Get(t, ts, path)
	faults.Reset()
	if resp.StatusCode < 500 || resp.Header.Get("Content-Type") != "application/problem+json" || bytes.HasPrefix(body, whole[:16]) {
		t.Fatalf("the first chunk failing: %d %s %.200q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	logs.records(t)

	// A later chunk's build fails, once part of the shard is out.
	faults.Add(&faultstore.Rule{Nth: 200, Fault: faultstore.Fault{Err: fail}})
	defer faults.Reset()
	resp, err = ts.Client().Get(ts.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("a later chunk failing: %d, %d of %d bytes, %v", resp.StatusCode, len(got), len(whole), err)
	}
	if len(got) >= len(whole) || !bytes.Equal(got, whole[:len(got)]) {
		t.Errorf("the cut answer's %d bytes are not a prefix of the shard's %d", len(got), len(whole))
	}
	if len(resp.Trailer) != 0 || resp.Header.Get("Trailer") != "" {
		t.Errorf("the cut answer has trailers %v %q", resp.Trailer, resp.Header.Get("Trailer"))
	}
	var failed, access []map[string]any
	for _, r := range logs.records(t) {
		switch r["msg"] {
		case "request failed":
			failed = append(failed, r)
		case "request":
			access = append(access, r)
		}
	}
	if len(failed) != 1 || !strings.Contains(fmt.Sprint(failed[0]["err"]), fail.Error()) || failed[0]["level"] == "DEBUG" {
		t.Errorf("the cut is logged as %v, want one failure naming %q above DEBUG", failed, fail)
	}
	if len(access) != 1 || access[0]["outcome"] != "error" {
		t.Errorf("the access lines: %v", access)
	}
}
