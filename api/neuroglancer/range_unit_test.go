package neuroglancer_test

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/api/neuroglancer"
)

// TestRangeOfAnotherUnitIsIgnored: RFC 9110 14.2, an origin server MUST
// ignore a Range header field in a range unit it does not understand, so
// "items=0-3" gets the whole answer (200), not a 416 (what
// http.ServeContent answers), on a cell and on a shard file.
func TestRangeOfAnotherUnitIsIgnored(t *testing.T) {
	t.Parallel()
	_, ts := newServer(t, api.Options{Stores: fixtureStores(t), NGSharded: neuroglancer.ShardAlways})
	for _, path := range []string{cellPath, "/ng/points_pyramid/annotations/spatial0/0.shard"} {
		whole := apitest.MustGet(t, ts, path)
		for _, unit := range []string{"items=0-3", "none", "bytes0-3"} {
			resp, body := apitest.Get(t, ts, path, "Range", unit)
			if resp.StatusCode != http.StatusOK || !bytes.Equal(body, whole) || resp.Header.Get("Content-Range") != "" {
				t.Errorf("%s Range %q: %d, Content-Range %q, %d bytes; want 200 and the whole %d bytes",
					path, unit, resp.StatusCode, resp.Header.Get("Content-Range"), len(body), len(whole))
			}
		}
	}
}
