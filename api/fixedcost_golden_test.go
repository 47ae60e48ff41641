package api_test

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
)

var updateFixedCost = flag.Bool("update-fixed-cost", false, "rewrite testdata/fixed-cost-answers.txt from this code's answers")

// fixedCostRequests are requests whose whole answers — status, every
// header a client sees, body — the work on the request path's fixed cost
// must leave alone: warm binary answers, level=auto, JSON, HEAD,
// conditional requests, CORS, a preflight, encodings, problems.
var fixedCostRequests = []struct {
	method, path string
	hdr          []string
}{
	{"GET", "/api/v1/stores/points_bins/bbox?min=0,0,0&max=500,500,500&f=bin", nil},
	{"GET", "/api/v1/stores/points_bins/bbox?min=0,0,0&max=500,500,500&f=bin&connectivity=false", nil},
	{"GET", "/api/v1/stores/points_pyramid/bbox?min=0,0,0&max=800,800,800&f=bin&level=auto&limit=1000", nil},
	{"GET", "/api/v1/stores/polylines/bbox?min=0,0,0&max=500,500,500&f=bin&level=auto", nil},
	{"GET", "/api/v1/stores/polylines/bbox?min=0,0,0&max=500,500,500&f=json", nil},
	{"HEAD", "/api/v1/stores/points_bins/bbox?min=0,0,0&max=500,500,500&f=bin", nil},
	{"GET", "/api/v1/stores/points_bins/bbox?min=0,0,0&max=500,500,500&f=bin", []string{"If-None-Match", "*"}},
	{"GET", "/api/v1/stores/points_bins/bbox?min=0,0,0&max=500,500,500&f=bin", []string{"If-Match", `"nope"`}},
	{"GET", "/api/v1/stores/points_bins/bbox?min=0,0,0&max=500,500,500&f=bin", []string{"Origin", "https://viewer.example"}},
	{"OPTIONS", "/api/v1/stores/points_bins/bbox?min=0,0,0&max=500,500,500", []string{"Origin", "https://viewer.example", "Access-Control-Request-Method", "GET"}},
	{"GET", "/api/v1/stores/points_bins/bbox?min=0,0,0&max=500,500,500&f=bin", []string{"Accept-Encoding", "zstd"}},
	{"GET", "/api/v1/stores/points_bins/bbox?min=0,0,0&max=500,500,500", []string{"Accept-Encoding", "gzip", "Accept", "application/json"}},
	{"GET", "/api/v1/stores/points_bins/bbox?min=0,0,0&max=500,500,500&f=bin", []string{"Accept", "application/x-ndjson"}},
	{"GET", "/api/v1/stores/points_bins/bbox?min=0,0&max=500,500,500&f=bin", nil},
	{"GET", "/api/v1/stores/points_bins/bbox?min=0,0,0&max=500,500,500&f=bin&bogus=1", nil},
	{"GET", "/api/v1/stores/nosuch/bbox?min=0,0,0&max=1,1,1", nil},
	{"GET", "/api/v1/nosuchroute", nil},
	{"POST", "/api/v1/stores/points_bins/bbox?min=0,0,0&max=1,1,1", nil},
}

// varying headers hold a clock or a counter: the test checks their form
// and keeps what the form's first group holds (Server-Timing's metric).
var varying = map[string]*regexp.Regexp{
	"Date":          regexp.MustCompile(`^()[A-Z][a-z]{2}, \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d GMT$`),
	"X-Request-Id":  regexp.MustCompile(`^()[0-9a-f]{1,8}-[0-9a-f]+$`),
	"Server-Timing": regexp.MustCompile(`^(total|first-byte);dur=\d+\.\d{3}$`),
}

// TestFixedCostAnswersUnchanged compares whole answers, over a real
// connection, with the ones recorded before the request path's fixed
// cost was cut (the body by its SHA-256; a header with a clock or a
// counter by its form). A header gained, lost, renamed or reworded fails.
func TestFixedCostAnswersUnchanged(t *testing.T) {
	t.Parallel()
	_, ts := newServer(t, api.Options{MaxAge: time.Hour, CORSOrigins: []string{"https://viewer.example"}})
	var out strings.Builder
	for _, rq := range fixedCostRequests {
		resp, body := apitest.Do(t, ts, rq.method, rq.path, rq.hdr...)
		fmt.Fprintf(&out, "%s %s %v\n  status %d\n", rq.method, rq.path, rq.hdr, resp.StatusCode)
		keys := make([]string, 0, len(resp.Header))
		for k := range resp.Header {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			for _, v := range resp.Header[k] {
				if re, ok := varying[k]; ok {
					m := re.FindStringSubmatch(v)
					if m == nil {
						t.Errorf("%s %s: %s %q not of its form", rq.method, rq.path, k, v)
						m = []string{"", ""}
					}
					v = m[1] + "(varies)"
				}
				fmt.Fprintf(&out, "  %s: %s\n", k, v)
			}
		}
		sum := sha256.Sum256(body)
		fmt.Fprintf(&out, "  body %d %s\n", len(body), hex.EncodeToString(sum[:8]))
	}
	checkGolden(t, "testdata/fixed-cost-answers.txt", out.String(), *updateFixedCost)
}
