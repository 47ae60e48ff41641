package neuroglancer_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"path"
	"regexp"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/zvf"
)

// TestSegmentsNameVersionedMeshes: a multilod source's files are at
// {source}/{id}.index and {source}/{id}, paths no info moves, so a viewer
// holding an older multilod info was answered the new version's manifests
// without a word. The segments source is a segmentation info whose "mesh"
// names the multilod files under the store version (relative, with ".."):
// there they answer what the unversioned paths answer, the info there
// names its segment properties beside it, and a path naming a version the
// server does not serve is a 410 saying to reload. Its volume is
// background that Neuroglancer can read at any zoom.
func TestSegmentsNameVersionedMeshes(t *testing.T) {
	t.Parallel()
	st := meshStores(t)[1] // mesh_v09
	_, ts := newServer(t, api.Options{Stores: []*zvf.Store{st}})
	dir := "/ng/" + st.Name() + "/segments"
	var inf struct {
		Type     string `json:"@type"`
		VolType  string `json:"type"`
		DataType string `json:"data_type"`
		Mesh     string `json:"mesh"`
		Skel     string `json:"skeletons"`
		Props    string `json:"segment_properties"`
		Scales   []struct {
			Key        string     `json:"key"`
			Size       [3]int64   `json:"size"`
			Off        [3]int64   `json:"voxel_offset"`
			Resolution [3]float64 `json:"resolution"`
			Chunks     [][3]int64 `json:"chunk_sizes"`
			Encoding   string     `json:"encoding"`
		} `json:"scales"`
	}
	if err := json.Unmarshal(apitest.MustGet(t, ts, dir+"/info"), &inf); err != nil {
		t.Fatal(err)
	}
	version := regexp.MustCompile(`^\.\./multilod/v[0-9a-f]{16}\.[0-9]+$`)
	if inf.Type != "neuroglancer_multiscale_volume" || inf.VolType != "segmentation" || inf.DataType != "uint64" || inf.Skel != "" ||
		!version.MatchString(inf.Mesh) || inf.Props != inf.Mesh+"/seg_props" || len(inf.Scales) == 0 {
		t.Fatalf("the segments info: %+v", inf)
	}
	// Scales of a store unit and twice as coarse each, down to one chunk
	// (of 32 voxels) a side; every chunk of zeros.
	for i, sc := range inf.Scales {
		if len(sc.Chunks) != 1 || sc.Chunks[0] != [3]int64{32, 32, 32} || sc.Encoding != "raw" || !strings.HasSuffix(sc.Key, fmt.Sprintf("/labels/%d", i)) {
			t.Fatalf("scale %d: %+v", i, sc)
		}
		for a := 0; a < 3; a++ {
			if i > 0 && sc.Resolution[a] != 2*inf.Scales[i-1].Resolution[a] || sc.Size[a] < 1 {
				t.Errorf("scale %d axis %d: %d voxels of %g nm", i, a, sc.Size[a], sc.Resolution[a])
			}
		}
		end := func(a int) int64 { return sc.Off[a] + min(sc.Size[a], 32) }
		chunk := fmt.Sprintf("%d-%d_%d-%d_%d-%d", sc.Off[0], end(0), sc.Off[1], end(1), sc.Off[2], end(2))
		labels := apitest.MustGet(t, ts, path.Join(dir, sc.Key, chunk))
		if int64(len(labels)) != 8*(end(0)-sc.Off[0])*(end(1)-sc.Off[1])*(end(2)-sc.Off[2]) || bytes.Count(labels, []byte{0}) != len(labels) {
			t.Fatalf("scale %d's first chunk: %d bytes, not its voxels' uint64 zeros", i, len(labels))
		}
		wantProblems(t, ts, []problemCase{{path.Join(dir, sc.Key, "1-2_0-1_0-1"), http.StatusNotFound, "no chunk of the segments volume"}})
	}
	last := inf.Scales[len(inf.Scales)-1]
	if last.Size[0] > 32 || last.Size[1] > 32 || last.Size[2] > 32 {
		t.Errorf("the coarsest scale is %v voxels, more than a chunk", last.Size)
	}
	mesh := path.Join(dir, inf.Mesh)
	var mi struct {
		Type  string `json:"@type"`
		Props string `json:"segment_properties"`
	}
	if err := json.Unmarshal(apitest.MustGet(t, ts, mesh+"/info"), &mi); err != nil || mi.Type != "neuroglancer_multilod_draco" || mi.Props != "seg_props" {
		t.Fatalf("the versioned multilod info: %+v %v", mi, err)
	}
	if !bytes.Equal(apitest.MustGet(t, ts, mesh+"/seg_props/info"), apitest.MustGet(t, ts, path.Join(dir, inf.Props, "info"))) {
		t.Fatal("the versioned multilod info's segment properties are not the segments source's")
	}
	plain := "/ng/" + st.Name() + "/multilod"
	for _, f := range []string{"2.index", "2"} {
		if !bytes.Equal(apitest.MustGet(t, ts, mesh+"/"+f), apitest.MustGet(t, ts, plain+"/"+f)) {
			t.Errorf("%s/%s differs from %s/%s", mesh, f, plain, f)
		}
	}
	gone := path.Join(dir, "../multilod/v0000000000000000.2")
	for _, p := range []string{gone + "/2.index", gone + "/2", gone + "/info"} {
		resp, body := apitest.Get(t, ts, p, "Range", "bytes=0-15")
		var pr api.Problem
		if resp.StatusCode != http.StatusGone || json.Unmarshal(body, &pr) != nil || !strings.HasSuffix(pr.Type, "/store-changed") ||
			!strings.Contains(pr.Detail, "reload") {
			t.Errorf("%s: %d %.300s, want 410 store-changed", p, resp.StatusCode, body)
		}
	}
}
