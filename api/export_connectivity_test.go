package api_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/api"
)

// TestConnectivityFormatsRefuseConnectivityFalse: connectivity=false
// leaves edges and faces out of a bbox answer, and the formats whose
// structure is that connectivity answered 200 with a file that looked
// whole but was not the data: an SWC of roots only, a TRK or TCK of
// one-point streamlines, meshes without a face (a GLB of POINTS), a
// GeoArrow of one-point linestrings, an empty edges or faces table. Such
// a request is a 400 saying why; the payload formats (and CSV, PLY of
// points, the Arrow vertex table) still take connectivity=false.
func TestConnectivityFormatsRefuseConnectivityFalse(t *testing.T) {
	t.Parallel()
	h := exportServer(t, api.Options{}).Handler()
	const (
		tree   = "/api/v1/stores/tree/bbox?min=-10,-10,-10&max=100,100,100"
		tracts = "/api/v1/stores/tracts/bbox?min=0,0,0&max=200,200,200"
		quads  = "/api/v1/stores/quads/bbox?min=0,0,0&max=50,50,50"
	)
	for _, path := range []string{
		tree + "&f=swc", tree + "&f=geoarrow", tree + "&f=arrow&table=edges",
		tracts + "&f=trk", tracts + "&f=tck", tracts + "&f=geoarrow", tracts + "&f=arrow&table=edges",
		quads + "&f=ply", quads + "&f=obj", quads + "&f=stl", quads + "&f=glb", quads + "&f=arrow&table=faces",
	} {
		// With the connectivity, the file has it (so its absence shows).
		code, _, whole := serveFull(t, h, path)
		if code != 200 {
			t.Fatalf("%s: %d %s", path, code, whole)
		}
		code, hdr, body := serveFull(t, h, path+"&connectivity=false")
		if code == 200 {
			t.Errorf("%s&connectivity=false: 200 with a file of %d bytes (%d with the connectivity; same: %v), want a 400",
				path, len(body), len(whole), bytes.Equal(body, whole))
			continue
		}
		if p := problemOf(t, 400, body); !strings.Contains(p.Detail, "connectivity") || hdr.Get("Content-Disposition") != "" {
			t.Errorf("%s&connectivity=false: %d %q, Content-Disposition %q", path, code, p.Detail, hdr.Get("Content-Disposition"))
		}
	}
	// Formats that hold no connectivity still take it.
	for _, path := range []string{
		"/api/v1/stores/pts/bbox?min=0,0,0&max=100,100,100&f=csv",
		"/api/v1/stores/pts/bbox?min=0,0,0&max=100,100,100&f=ply",
		tree + "&f=arrow", tree + "&f=json", quads + "&f=bin",
	} {
		if code, _, body := serveFull(t, h, path+"&connectivity=false"); code != 200 {
			t.Errorf("%s&connectivity=false: %d %s", path, code, body)
		}
	}
}
