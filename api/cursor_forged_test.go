package api_test

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
)

// TestBinaryIndicesPastUint32AreUnrepresentable: a page whose edge
// indices pass the binary format's uint32 (an answer of over 4 billion
// rows; here a client's own cursor says its page starts at row 2^40) is a
// 422 unrepresentable problem that names the formats that can carry it,
// like every other answer a format cannot hold. It was an untyped error:
// a 500 internal error, logged as the server's fault.
func TestBinaryIndicesPastUint32AreUnrepresentable(t *testing.T) {
	t.Parallel()
	_, ts := newServer(t, api.Options{Stores: openStores(t, "graph")})
	const box = "/api/v1/stores/graph/bbox?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9&limit=200"
	resp, body := apitest.Get(t, ts, box)
	cur := resp.Header.Get("X-Next-Cursor")
	b, err := base64.RawURLEncoding.DecodeString(cur)
	if resp.StatusCode != http.StatusOK || err != nil || len(b) < 27 || b[0] != 2 || b[10] != 16 {
		t.Fatalf("first page: %d %q %.200s", resp.StatusCode, cur, body)
	}
	// Format 1 Resume: offset 2^40, chunk 0, rank 0, no counts.
	b = binary.AppendUvarint(b[:27:27], 1)
	b = binary.AppendUvarint(b, 1<<40)
	b = append(b, 0, 0, 0)
	forged := base64.RawURLEncoding.EncodeToString(b)
	for _, f := range []string{"f=bin", "f=arrow&table=edges"} {
		resp, body = apitest.Get(t, ts, box+"&"+f+"&cursor="+forged)
		var p api.Problem
		if resp.StatusCode != http.StatusUnprocessableEntity || json.Unmarshal(body, &p) != nil || p.Status != 422 ||
			!strings.HasSuffix(p.Type, "/unrepresentable") || !strings.Contains(p.Detail, "uint32") {
			t.Errorf("%s: %d %.300s, want a 422 unrepresentable problem", f, resp.StatusCode, body)
		}
	}
	// JSON carries int64 indices: the same page is answered.
	if resp, body = apitest.Get(t, ts, box+"&cursor="+forged); resp.StatusCode != http.StatusOK {
		t.Fatalf("f=json: %d %.300s", resp.StatusCode, body)
	}
}
