package neuroglancer_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
)

// TestZeroSuffixRangeIsUnsatisfiable: "bytes=-0" asks for the last zero
// bytes, which no representation has (RFC 9110 14.1.1: a suffix range is
// satisfiable only with a non-zero length), so it is a 416 problem with
// Content-Range bytes */N; beside a satisfiable range it is ignored.
// net/http's ServeContent answered it with 206, no body and the invalid
// Content-Range "bytes N-(N-1)/N".
func TestZeroSuffixRangeIsUnsatisfiable(t *testing.T) {
	t.Parallel()
	_, ts := newServer(t, api.Options{Stores: fixtureStores(t)})
	whole := apitest.MustGet(t, ts, cellPath)
	resp, body := apitest.Get(t, ts, cellPath, "Range", "bytes=-0")
	var p api.Problem
	if resp.StatusCode != http.StatusRequestedRangeNotSatisfiable || json.Unmarshal(body, &p) != nil || p.Status != 416 ||
		!strings.HasSuffix(p.Type, "/range-not-satisfiable") || resp.Header.Get("Content-Range") != fmt.Sprintf("bytes */%d", len(whole)) {
		t.Errorf("bytes=-0: %d, Content-Range %q: %.200s; want a 416 problem", resp.StatusCode, resp.Header.Get("Content-Range"), body)
	}
	resp, body = apitest.Get(t, ts, cellPath, "Range", "bytes=-0, 2-5")
	if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(body, whole[2:6]) ||
		resp.Header.Get("Content-Range") != fmt.Sprintf("bytes 2-5/%d", len(whole)) {
		t.Errorf("bytes=-0, 2-5: %d, Content-Range %q, %d bytes; want bytes 2-5", resp.StatusCode, resp.Header.Get("Content-Range"), len(body))
	}
}
