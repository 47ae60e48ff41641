package api_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/api"
)

// TestDescriptorURLsPaste: without --public-url the descriptor's
// Neuroglancer sources (and its state's layers) are absolute URLs on the
// address the client used, so that they work pasted into Neuroglancer;
// a proxy's Forwarded or X-Forwarded-* headers count only when the server
// is told to trust them, and a host that is not plainly one is never
// copied into a URL. --public-url wins over all of it. The answer's ETag
// and Vary follow what it was built from.
func TestDescriptorURLsPaste(t *testing.T) {
	t.Parallel()
	stores := openStores(t, "graph")
	_, plain := newServer(t, api.Options{Stores: stores})
	_, trusting := newServer(t, api.Options{Stores: stores, TrustProxyHeaders: true})
	_, public := newServer(t, api.Options{Stores: stores, TrustProxyHeaders: true, PublicURL: "https://pub.example/zvf"})
	host := strings.TrimPrefix(plain.URL, "http://")
	thost := strings.TrimPrefix(trusting.URL, "http://")
	xf := []string{"X-Forwarded-Proto", "https", "X-Forwarded-Host", "cdn.example"}
	for _, tc := range []struct {
		name string
		ts   *http.Client
		url  string
		hdr  []string
		want string // the base of every source
	}{
		{"the request's host", plain.Client(), plain.URL, nil, "http://" + host},
		{"another Host header", plain.Client(), plain.URL, []string{"Host", "viewer.example:8080"}, "http://viewer.example:8080"},
		{"proxy headers, untrusted", plain.Client(), plain.URL, xf, "http://" + host},
		{"X-Forwarded-*, trusted", trusting.Client(), trusting.URL, xf, "https://cdn.example"},
		{"Forwarded, trusted, first element", trusting.Client(), trusting.URL,
			[]string{"Forwarded", `for=192.0.2.1;proto=https;host="edge.example:8443", for=10.0.0.1;proto=http;host=inner`}, "https://edge.example:8443"},
		{"Forwarded before X-Forwarded-*", trusting.Client(), trusting.URL,
			append([]string{"Forwarded", "proto=http;host=edge.example"}, xf...), "http://edge.example"},
		{"a forwarded host that is no host", trusting.Client(), trusting.URL,
			[]string{"X-Forwarded-Host", `evil.example"><script>`, "X-Forwarded-Proto", "javascript"}, "http://" + thost},
		{"--public-url", public.Client(), public.URL, xf, "https://pub.example/zvf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, tc.url+"/api/v1/stores/graph", nil)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i+1 < len(tc.hdr); i += 2 {
				if tc.hdr[i] == "Host" {
					req.Host = tc.hdr[i+1]
					continue
				}
				req.Header.Set(tc.hdr[i], tc.hdr[i+1])
			}
			resp, err := tc.ts.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var d struct {
				Neuroglancer struct {
					Sources map[string]string `json:"sources"`
					State   struct {
						Layers []struct{ Source string } `json:"layers"`
					} `json:"state"`
				} `json:"neuroglancer"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&d); err != nil || resp.StatusCode != 200 {
				t.Fatalf("%d %v", resp.StatusCode, err)
			}
			ng := d.Neuroglancer
			if len(ng.Sources) != 5 || ng.Sources["density"] == "" || len(ng.State.Layers) == 0 { // annotations, lines, skeletons, segments, density
				t.Fatalf("sources %v, %d layers", ng.Sources, len(ng.State.Layers))
			}
			for route, u := range ng.Sources {
				if u != tc.want+"/ng/graph/"+route {
					t.Errorf("source %s: %q, want %q", route, u, tc.want+"/ng/graph/"+route)
				}
			}
			for _, l := range ng.State.Layers {
				if !strings.HasPrefix(l.Source, "precomputed://"+tc.want+"/ng/graph/") {
					t.Errorf("layer source %q is not on %s", l.Source, tc.want)
				}
			}
			trusted := tc.ts == trusting.Client()
			if got := slices.Contains(vary(resp.Header), "X-Forwarded-Host"); got != trusted {
				t.Errorf("Vary %v: X-Forwarded-Host in it: %v; the headers are trusted: %v", vary(resp.Header), got, trusted)
			}
		})
	}
	// Two addresses, two answers: their ETags differ.
	etag := func(hostHeader string) string {
		req, _ := http.NewRequest(http.MethodGet, plain.URL+"/api/v1/stores/graph", nil)
		req.Host = hostHeader
		resp, err := plain.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.Header.Get("ETag")
	}
	if a, b := etag("a.example"), etag("b.example"); a == "" || a == b {
		t.Fatalf("ETags %q and %q for answers built on two hosts", a, b)
	}
}
