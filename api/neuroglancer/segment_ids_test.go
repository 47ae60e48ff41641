package neuroglancer_test

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// TestSegmentIDsAtOrPast2p63: segment ids are uint64 to Neuroglancer, and
// an object whose int64 id is negative is the segment of the same bits
// (2^63 or more), as the routes, by_id and the relationship lists take
// and write it. The segment property list and the descriptor's state
// wrote such an id as a negative decimal, which Neuroglancer cannot parse
// as a segment id (the list, and with it the layer's segment properties,
// fail) and no route answers.
func TestSegmentIDsAtOrPast2p63(t *testing.T) {
	t.Parallel()
	src := filepath.Join("../../testdata/zvf-0.9", "graph_v09.zarrvectors")
	n, err := objectCount(src)
	if err != nil {
		t.Fatal(err)
	}
	dir := zvftest.CopyTree(t, src)
	ids := make([]int64, n)
	for row := range ids {
		u := uint64(1)<<63 + 5 + 1000*uint64(row) // 2^63 + …: a negative int64
		ids[row] = int64(u)
	}
	zvftest.WriteObjectIDs(t, dir, ids)
	st := apitest.Open(t, dir, "g", cache.New(32<<20))
	_, ts := apitest.Serve(t, api.Options{Stores: []*zvf.Store{st}, Cache: cache.New(32 << 20)})
	var props struct {
		Inline struct {
			IDs []string `json:"ids"`
		} `json:"inline"`
	}
	resp, body := apitest.Get(t, ts, "/ng/g/skeletons/seg_props/info")
	if resp.StatusCode != 200 || json.Unmarshal(body, &props) != nil || len(props.Inline.IDs) == 0 {
		t.Fatalf("seg_props: %d %.300s", resp.StatusCode, body)
	}
	var desc struct {
		Neuroglancer struct {
			State struct {
				Layers []struct {
					Segments []string `json:"segments"`
				} `json:"layers"`
			} `json:"state"`
		} `json:"neuroglancer"`
	}
	resp, body = apitest.Get(t, ts, "/api/v1/stores/g")
	if resp.StatusCode != 200 || json.Unmarshal(body, &desc) != nil {
		t.Fatalf("descriptor: %d %.300s", resp.StatusCode, body)
	}
	all := map[string][]string{"seg_props ids": props.Inline.IDs}
	for _, l := range desc.Neuroglancer.State.Layers {
		all["state segments"] = append(all["state segments"], l.Segments...)
	}
	if len(all["state segments"]) == 0 {
		t.Fatalf("the descriptor's state shows no segments: %.500s", body)
	}
	for what, list := range all {
		for _, s := range list {
			u, err := strconv.ParseUint(s, 10, 64)
			if err != nil || u < 1<<63 {
				t.Errorf("%s: %q is not the uint64 segment id (2^63 + …) of an object", what, s)
				continue
			}
			if resp, b := apitest.Get(t, ts, "/ng/g/skeletons/"+s); resp.StatusCode != 200 {
				t.Errorf("%s: skeleton %s: %d %.200s", what, s, resp.StatusCode, b)
			}
		}
	}
}
