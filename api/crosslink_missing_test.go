package api_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
)

// TestCrossLinkToAMissingChunkIsAProblem: a ZVF 0.9 cross-chunk record
// joining chunk 3.4.5 to 3.4.6, which the level lacks, is a 422 naming
// links/0 and the missing chunk for a box whose answer reads it — the box
// of 3.4.5 alone too, since the edge would leave the answer without a word
// — and the box's vertices without connectivity still answer. Before,
// every box answered 200 with the edge left out.
func TestCrossLinkToAMissingChunkIsAProblem(t *testing.T) {
	t.Parallel()
	dir := graph09Edited(t, func(meta []byte) []byte {
		return []byte(strings.Replace(string(meta), "\"3.4.6\",\n      ", "", 1))
	})
	if err := os.Remove(filepath.Join(dir, "0", "vertices", "c", "3", "4", "6")); err != nil {
		t.Fatal(err)
	}
	s := apitest.Open(t, dir, "g", cache.New(16<<20))
	h := apitest.New(t, api.Options{Stores: []*zvf.Store{s}}).Handler()
	for _, box := range []string{"min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9", "min=300,400,500&max=399,499,699", "min=300,400,500&max=399,499,699&limit=5"} {
		code, ctype, body := serve(t, h, "/api/v1/stores/g/bbox?"+box)
		var p api.Problem
		if code != 422 || ctype != "application/problem+json" || json.Unmarshal(body, &p) != nil ||
			!strings.Contains(p.Detail, "links/0") || !strings.Contains(p.Detail, "3.4.6") || !strings.Contains(p.Detail, "does not have") {
			t.Errorf("bbox %s: %d %s, want a 422 naming links/0 and chunk 3.4.6", box, code, body)
		}
	}
	if code, _, body := serve(t, h, "/api/v1/stores/g/bbox?min=300,400,500&max=399,499,699&connectivity=false&f=ndjson"); code != 200 {
		t.Errorf("bbox without connectivity: %d %s", code, body)
	}
}
