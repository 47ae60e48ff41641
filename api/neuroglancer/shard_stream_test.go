package neuroglancer_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/api/neuroglancer"
	"github.com/zvfserve/zvfserve/api/neuroglancer/sharding"
	"github.com/zvfserve/zvfserve/zvf"
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
