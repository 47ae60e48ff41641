package neuroglancer_test

import (
	"net/http"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/zvf"
)

// TestEmptyVersionIsNotUnversioned: a key's path under "v/" (the version
// left out, as a client that builds paths from a template with an empty
// revision sends) was answered as the unversioned path, with the current
// version's bytes, so the 410 that versioned keys exist for never came.
// It is a 404 that names the version the source's info gives now.
func TestEmptyVersionIsNotUnversioned(t *testing.T) {
	t.Parallel()
	points := storeNamed(t, fixtureStores(t), "points_pyramid")
	mesh := meshStores(t)[1] // mesh_v09: multilod and segments sources
	_, ts := newServer(t, api.Options{Stores: []*zvf.Store{points, mesh}})
	var cases []problemCase
	for _, p := range []string{"annotations/v/by_id/1", "annotations/v/spatial0/0_0_0", "annotations/v/objects/1"} {
		cases = append(cases, problemCase{"/ng/" + points.Name() + "/" + p, http.StatusNotFound, "the path's version is empty"})
	}
	for _, p := range []string{"multilod/v/info", "multilod/v/2.index", "multilod/v/seg_props/info", "segments/v/labels/0/0-1_0-1_0-1"} {
		cases = append(cases, problemCase{"/ng/" + mesh.Name() + "/" + p, http.StatusNotFound, "the path's version is empty"})
	}
	wantProblems(t, ts, cases)
	// The detail names the version to use, as the info names it.
	wantProblems(t, ts, []problemCase{{"/ng/" + points.Name() + "/annotations/v/by_id/1", http.StatusNotFound, "v" + points.Revision() + "."}})
}

// TestMalformedVersionIsNotAnotherRelease: a path's version that no info
// ever named — a layout that is not a number, a revision that is not
// hexadecimal — was answered 410 saying it came from "the Neuroglancer
// info of an earlier zvfserve" (v<revision>.x) or that the store "is not
// at version ." (v.), neither of which was so. It is a 404 saying what a
// version looks like. A revision alone (an info from before layouts) is
// still an earlier release's 410.
func TestMalformedVersionIsNotAnotherRelease(t *testing.T) {
	t.Parallel()
	points := storeNamed(t, fixtureStores(t), "points_pyramid")
	_, ts := newServer(t, api.Options{Stores: []*zvf.Store{points}})
	base := "/ng/" + points.Name() + "/annotations/"
	var cases []problemCase
	for _, v := range []string{"v" + points.Revision() + ".x", "v" + points.Revision() + ".2.0", "v.", "v.2", "vZZ.2", "v%2F"} {
		cases = append(cases, problemCase{base + v + "/by_id/1", http.StatusNotFound, "is not a version a Neuroglancer info names"})
	}
	cases = append(cases, problemCase{base + "v" + points.Revision() + "/by_id/1", http.StatusGone, "earlier zvfserve"},
		problemCase{base + "v0123456789abcdef.2/by_id/1", http.StatusGone, "is not at version 0123456789abcdef.2"})
	wantProblems(t, ts, cases)
}
