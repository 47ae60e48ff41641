package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/api"
)

// TestMalformedQueryPairIsRefused: a query setting Go's URL parser cannot
// read — a bad percent escape, or an unescaped ';' — is a 400 naming it.
// It was dropped silently, so a filter, sample or level the client gave
// (say filter=name='a;b', as curl sends it) was ignored and the answer
// was the unfiltered one, with 200.
func TestMalformedQueryPairIsRefused(t *testing.T) {
	t.Parallel()
	_, ts := newServer(t, api.Options{Stores: openStores(t, "points_bins")})
	const count = "/api/v1/stores/points_bins/count?min=0,0,0&max=1000,1000,1000"
	for _, pair := range []string{
		"sample=0.001;",
		"filter=object_id='a;b'",
		"sample=0.001%zz",
		"level=1%",
		"%zz=1",
		"a;b=1",
	} {
		code, ct, body := getRaw(t, ts.URL+count+"&"+pair)
		var p api.Problem
		if json.Unmarshal(body, &p) != nil || code != http.StatusBadRequest || p.Status != code ||
			!strings.HasSuffix(p.Type, "/bad-parameter") || !strings.Contains(p.Detail, pair) ||
			ct != "application/problem+json" {
			t.Errorf("%s: %d %s %s, want a bad-parameter problem naming it", pair, code, ct, body)
		}
	}
	// Escaped, the same settings are read.
	if code, _, body := getRaw(t, ts.URL+count+"&sample=0.001%3B"); code != http.StatusBadRequest ||
		!strings.Contains(string(body), `sample=\"0.001;\"`) {
		t.Errorf("sample=0.001%%3B: %d %s, want the sample's own 400", code, body)
	}
	if code, _, body := getRaw(t, ts.URL+count+"&sample=0.5"); code != http.StatusOK {
		t.Errorf("sample=0.5: %d %s", code, body)
	}
}

// getRaw sends url's query exactly as written.
func getRaw(t *testing.T, url string) (int, string, []byte) {
	t.Helper()
	base, raw, _ := strings.Cut(url, "?")
	req, err := http.NewRequest(http.MethodGet, base, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.URL.RawQuery = raw
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), body
}
