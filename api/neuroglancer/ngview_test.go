package neuroglancer_test

import (
	"context"
	"encoding/json"
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
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// viewInfo is what Neuroglancer's choice of spatial levels reads of an
// annotation info, and the annotations of each level (zvfserve's notes).
type viewInfo struct {
	Lower   []float64 `json:"lower_bound"`
	Upper   []float64 `json:"upper_bound"`
	Spatial []struct {
		GridShape []float64 `json:"grid_shape"`
		ChunkSize []float64 `json:"chunk_size"`
		Limit     float64   `json:"limit"`
	} `json:"spatial"`
	ZVF struct {
		Levels []struct {
			Annotations float64 `json:"annotations"`
		} `json:"spatial_levels"`
	} `json:"zvfserve"`
}

// replayWholeView replays Neuroglancer 2.41's choice of spatial levels
// (forEachVisibleAnnotationChunk, annotation/base.ts) for a 3-D view of
// the source's whole box in a panel of w × h pixels at its default
// annotation resolution target of 8 px: it wants w·h/64 annotations in
// the box; from the coarsest level down, while the levels taken fall
// short of that density (each level's counted as limit per cell), it
// fetches every cell of the next level and draws the fraction of each
// cell's list it still needs. It returns the annotations fetched and
// drawn, and the levels fetched.
func replayWholeView(inf viewInfo, w, h float64) (fetched, drawn float64, levels int) {
	box := 1.0
	for i := range inf.Lower {
		box *= inf.Upper[i] - inf.Lower[i]
	}
	target := w * h / 64 / box
	total := 0.0
	for s, l := range inf.Spatial {
		if total >= target {
			break
		}
		cell := 1.0
		for _, c := range l.ChunkSize {
			cell *= c
		}
		frac := min(1, (target-total)*cell/l.Limit)
		n := inf.ZVF.Levels[s].Annotations
		fetched += n
		drawn += frac * n
		levels++
		total += l.Limit / cell
	}
	return fetched, drawn, levels
}

// TestWholeViewFetchesWhatItDraws: Neuroglancer fetches whole cells but
// draws only the part of the last level's lists it needs; a pyramid whose
// coarse levels hold fewer annotations than a view wants makes it fetch
// the whole of a fine level to draw a sliver of it. The demo's cells at
// ten times its size (461,501 points, coarse ZVF levels of 75 and 4,695
// metavertices) had Neuroglancer fetch every point (8.6 MB, 61 requests,
// in TestNeuroglancerAtScale), 19 times what it drew in a 1920 × 1080
// panel; a million points whose level 1 held 8,000, every point, 34
// times what it drew. The
// coarse levels now hold at least what a view of their cells wants, so a
// view of the whole box fetches at most 5 times what it draws, in panels
// of 1000 × 510 (the browser test's) and 1920 × 1080 pixels.
func TestWholeViewFetchesWhatItDraws(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem := zvftest.Store(t, "mem://")
	infos, err := demo.Build(ctx, mem, demo.Options{Seed: 1, Scale: 10})
	if err != nil {
		t.Fatal(err)
	}
	ch := cache.New(256 << 20)
	var stores []*zvf.Store
	for _, in := range infos {
		if in.Name == "cells" {
			stores = append(stores, zvftest.OpenSub(t, mem, in.Prefix, ch))
		}
	}
	if !testing.Short() {
		st, err := zvf.Open(ctx, pointStore(t, 1_000_000, 125, true), zvf.Options{Name: "points", Cache: ch})
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, st)
	}
	_, ts := apitest.Serve(t, api.Options{Stores: stores, Cache: ch})
	for _, st := range stores {
		var inf viewInfo
		if err := json.Unmarshal(apitest.MustGet(t, ts, "/ng/"+st.Name()+"/annotations/info"), &inf); err != nil {
			t.Fatal(err)
		}
		for _, panel := range [][2]float64{{1000, 510}, {1920, 1080}} {
			fetched, drawn, levels := replayWholeView(inf, panel[0], panel[1])
			t.Logf("%s, %v px: %d of %d levels, %.0f annotations fetched, %.0f drawn", st.Name(), panel, levels, len(inf.Spatial), fetched, drawn)
			if fetched > 5*drawn {
				t.Errorf("%s in a %v panel: Neuroglancer fetches %.0f annotations (%d levels) to draw %.0f", st.Name(), panel, fetched, levels, drawn)
			}
		}
	}
}

// TestInfoValidatorCoversTheCellBound: how full a coarse level is aimed
// depends on --max-vertices (an eighth of it a cell at most), so a server
// restarted with another bound may file annotations in other levels.
// Its annotation info then differs, and a browser revalidating the info
// it kept from before the restart is sent the new one, not a 304 that
// keeps levels whose cells no longer match.
func TestInfoValidatorCoversTheCellBound(t *testing.T) {
	t.Parallel()
	st := storeNamed(t, fixtureStores(t), "points_pyramid")
	const path = "/ng/points_pyramid/annotations/info"
	_, wide := newServer(t, api.Options{Stores: []*zvf.Store{st}})
	_, narrow := newServer(t, api.Options{Stores: []*zvf.Store{st}, MaxVertices: 800})
	resp, before := apitest.Get(t, wide, path)
	etag := resp.Header.Get("ETag")
	resp, after := apitest.Get(t, narrow, path, "If-None-Match", etag)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("ETag") == etag || string(after) == string(before) {
		t.Fatalf("revalidating the info of a server of another --max-vertices: %d, ETag %s then %s, the infos equal: %v",
			resp.StatusCode, etag, resp.Header.Get("ETag"), string(after) == string(before))
	}
}

// TestCoarsePolylineCellsFitMaxVertices: a polyline source's cell is
// refused (413) when its polylines hold more vertices than
// --max-vertices. Filling the coarse levels for views aimed a cell at an
// eighth of --max-vertices in annotations, but a polyline annotation is
// all its vertices: streamlines of 200 vertices at --max-vertices 5000
// put 41 of them, 8,200 vertices, in the one cell of the coarsest level,
// so a view of the whole store got a 413 where it had got the few
// polylines the store's pyramid holds. The aim now counts a polyline's
// mean vertices, and every cell of the source answers.
func TestCoarsePolylineCellsFitMaxVertices(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	raw, err := synth.Streamlines(ctx, 30_000, 7)
	if err != nil {
		t.Fatal(err)
	}
	st, err := zvf.Open(ctx, storage.Sub(raw, "streamlines"), zvf.Options{Name: "s", Cache: cache.New(64 << 20)})
	if err != nil {
		t.Fatal(err)
	}
	for _, maxVertices := range []int64{5000, 2000} {
		_, ts := apitest.Serve(t, api.Options{Stores: []*zvf.Store{st}, Cache: cache.New(64 << 20), MaxVertices: maxVertices})
		var inf struct {
			Spatial []struct {
				GridShape []int64 `json:"grid_shape"`
				Key       string  `json:"key"`
			} `json:"spatial"`
		}
		if err := json.Unmarshal(apitest.MustGet(t, ts, "/ng/s/annotations/info"), &inf); err != nil {
			t.Fatal(err)
		}
		for s, sp := range inf.Spatial {
			g := sp.GridShape
			for c := range g[0] * g[1] * g[2] {
				cell := fmt.Sprintf("%d_%d_%d", c%g[0], c/g[0]%g[1], c/(g[0]*g[1]))
				resp, body := apitest.Get(t, ts, "/ng/s/annotations/"+sp.Key+"/"+cell)
				if resp.StatusCode == http.StatusRequestEntityTooLarge {
					t.Fatalf("--max-vertices %d: cell %s of spatial%d: %d %s", maxVertices, cell, s, resp.StatusCode, body)
				}
			}
		}
	}
}

// TestCellValidatorCoversTheCellBound: --max-vertices aims the coarse
// levels, so the same cell path holds other annotations under another
// bound; the info's ETag covered it, but a cell's did not. A browser that
// kept a cell from before a restart with another bound revalidated it and
// got a 304 for a body the server no longer sends (spatial0/0_0_0 of
// points_pyramid: 36,152 bytes under the default, 3,284 under 800), so it
// drew annotations twice or not at all. Now such a revalidation is
// answered with the cell as it is.
func TestCellValidatorCoversTheCellBound(t *testing.T) {
	t.Parallel()
	st := storeNamed(t, fixtureStores(t), "points_pyramid")
	_, wide := newServer(t, api.Options{Stores: []*zvf.Store{st}})
	_, narrow := newServer(t, api.Options{Stores: []*zvf.Store{st}, MaxVertices: 800})
	var inf struct {
		Spatial []struct {
			Key       string  `json:"key"`
			GridShape []int64 `json:"grid_shape"`
		} `json:"spatial"`
	}
	if err := json.Unmarshal(apitest.MustGet(t, wide, "/ng/points_pyramid/annotations/info"), &inf); err != nil {
		t.Fatal(err)
	}
	differ := 0
	g := inf.Spatial[0].GridShape
	for c := range g[0] * g[1] * g[2] {
		path := fmt.Sprintf("/ng/points_pyramid/annotations/%s/%d_%d_%d", inf.Spatial[0].Key, c%g[0], c/g[0]%g[1], c/(g[0]*g[1]))
		kept, before := apitest.Get(t, wide, path)
		_, now := apitest.Get(t, narrow, path)
		if string(before) == string(now) {
			continue
		}
		differ++
		resp, body := apitest.Get(t, narrow, path, "If-None-Match", kept.Header.Get("ETag"))
		if resp.StatusCode != http.StatusOK || string(body) != string(now) || resp.Header.Get("ETag") == kept.Header.Get("ETag") {
			t.Errorf("%s kept from a server of another --max-vertices (%d bytes), revalidated: %d, %d bytes, ETag %s then %s; want 200 with the %d bytes it holds now",
				path, len(before), resp.StatusCode, len(body), kept.Header.Get("ETag"), resp.Header.Get("ETag"), len(now))
		}
		if again, _ := apitest.Get(t, narrow, path, "If-None-Match", resp.Header.Get("ETag")); again.StatusCode != http.StatusNotModified {
			t.Errorf("%s revalidated with the ETag its server gave: %d, want 304", path, again.StatusCode)
		}
	}
	if differ == 0 {
		t.Fatal("no cell differs between the two bounds: the test cannot tell")
	}
}
