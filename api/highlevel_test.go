package api_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// TestLevelNumbersPast1000AreServed: a store whose levels are numbered 0
// and 5000 is served at both: level=5000, the chunk routes of level 5000,
// and the pages of a level=auto answer that chose it. The store opened
// and listed level 5000 (descriptor, catalog, objects/{id}/levels) and
// level=auto answered from it, but the API refused level numbers past
// 1000 as "not a level number", and the next-page cursor it issued for
// that level as "not valid for this query".
func TestLevelNumbersPast1000AreServed(t *testing.T) {
	t.Parallel()
	dir := zvftest.CopyTree(t, filepath.Join(fixtures, "points_pyramid.zarrvectors"))
	if err := os.Rename(filepath.Join(dir, "1"), filepath.Join(dir, "5000")); err != nil {
		t.Fatal(err)
	}
	edit := func(file string, f func(map[string]any)) {
		p := filepath.Join(dir, file)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		f(doc["attributes"].(map[string]any))
		if b, err = json.Marshal(doc); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	edit("5000/zarr.json", func(a map[string]any) { a["zarr_vectors_level"].(map[string]any)["level"] = 5000 })
	edit("zarr.json", func(a map[string]any) {
		ds := a["multiscales"].([]any)[0].(map[string]any)["datasets"].([]any)
		ds[1].(map[string]any)["path"] = "5000"
	})
	st := apitest.Open(t, dir, "p", nil)
	if got := st.Levels(); len(got) != 2 || got[1] != 5000 {
		t.Fatalf("levels %v", got)
	}
	_, ts := newServer(t, api.Options{Stores: []*zvf.Store{st}})
	const box = "/api/v1/stores/p/bbox?min=0,0,0&max=1000,1000,1000"
	for _, path := range []string{
		box + "&level=5000&limit=5",
		"/api/v1/stores/p/count?min=0,0,0&max=1000,1000,1000&level=5000",
		"/api/v1/stores/p/levels/5000/chunks",
	} {
		if resp, body := apitest.Get(t, ts, path); resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %d %.300s", path, resp.StatusCode, body)
		}
	}
	// level=auto on the whole box picks the coarse level; its pages follow.
	resp, body := apitest.Get(t, ts, box+"&level=auto&limit=5")
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"level":5000`) {
		t.Fatalf("level=auto: %d %.300s", resp.StatusCode, body)
	}
	cur := resp.Header.Get("X-Next-Cursor")
	if cur == "" {
		t.Fatal("level=auto: no next page")
	}
	if resp, body = apitest.Get(t, ts, box+"&level=auto&limit=5&cursor="+cur); resp.StatusCode != http.StatusOK {
		t.Errorf("level=auto, page 2: %d %.300s", resp.StatusCode, body)
	}
}
