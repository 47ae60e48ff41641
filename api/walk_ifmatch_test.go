package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// TestWalkIsPinnedByItsFirstTag: every page of a paged bbox walk carries
// the walk's ETag (the first page's: the cursor is not part of it), so a
// client can pin the walk with If-Match: <first page's ETag>. While the
// store is unchanged each page is its 200 under that tag; once it changed,
// the next page is 412 precondition-failed, as RFC 9110 13.1.1 has it for
// a tag that names no current representation — the state If-Match tests
// is the one that makes the cursor stale, so the precondition answers
// first; without If-Match (or with one naming the current walk) it is
// still 409 stale-cursor. Before, each page had a tag of its own, so
// If-Match: <first page's ETag> was 412 on every later page, changed or
// not, and a client could not tell a change mid-walk from the tags.
func TestWalkIsPinnedByItsFirstTag(t *testing.T) {
	t.Parallel()
	dir := zvftest.CopyTree(t, filepath.Join(fixtures, rewrittenFixture))
	base := zvftest.Store(t, dir)
	_, srv := watched(t, "s", base)
	get := func(path string, hdr ...string) (int, http.Header, []byte) {
		t.Helper()
		req := httptest.NewRequest(http.MethodGet, path, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		return serveRequest(t, srv.Handler(), req)
	}
	for _, first := range []string{
		"/api/v1/stores/s/bbox?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9&limit=10",
		"/api/v1/stores/s/bbox?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9&limit=10&level=auto&f=ndjson",
	} {
		code, hdr, body := get(first)
		tag, next := hdr.Get("ETag"), hdr.Get("X-Next-Cursor")
		if code != 200 || tag == "" || next == "" {
			t.Fatalf("%s: first page: %d, ETag %q, cursor %q: %.200s", first, code, tag, next, body)
		}
		pages := 0
		for url := first + "&cursor=" + next; next != "" && pages < 5; pages++ {
			plainCode, plainHdr, plain := get(url)
			if plainCode != 200 || plainHdr.Get("ETag") != tag {
				t.Fatalf("%s: page %d: %d, ETag %q, want the first page's %q", url, pages+2, plainCode, plainHdr.Get("ETag"), tag)
			}
			code, hdr, body := get(url, "If-Match", tag)
			if code != 200 || string(body) != string(plain) || hdr.Get("ETag") != tag {
				t.Fatalf("%s: page %d, If-Match the first page's tag: %d, ETag %q: %.200s", url, pages+2, code, hdr.Get("ETag"), body)
			}
			if code, _, _ := get(url, "If-None-Match", tag); code != http.StatusNotModified {
				t.Errorf("%s: page %d, If-None-Match its tag: %d, want 304", url, pages+2, code)
			}
			next = hdr.Get("X-Next-Cursor")
			url = first + "&cursor=" + next
		}
	}
	// The other corners are another walk, with another tag.
	_, a, _ := get("/api/v1/stores/s/bbox?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9&limit=10")
	_, b, _ := get("/api/v1/stores/s/bbox?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e8&limit=10")
	if a.Get("ETag") == b.Get("ETag") {
		t.Errorf("two boxes share the tag %s", a.Get("ETag"))
	}

	first := "/api/v1/stores/s/bbox?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9&limit=10"
	_, hdr, _ := get(first)
	tag, page2 := hdr.Get("ETag"), first+"&cursor="+hdr.Get("X-Next-Cursor")
	rewriteInPlace(t, dir, filepath.Join(fixtures, rewrittenFixture))
	settled(t, base)
	if err := srv.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, now, _ := get(first)
	if now.Get("ETag") == tag {
		t.Fatal("the walk's tag was kept across versions")
	}
	for _, tc := range []struct {
		hdr  []string
		code int
		kind string
	}{
		{[]string{"If-Match", tag}, http.StatusPreconditionFailed, "precondition-failed"},
		{[]string{"If-Match", "W/" + tag}, http.StatusPreconditionFailed, "precondition-failed"},
		{nil, http.StatusConflict, "stale-cursor"},
		{[]string{"If-Match", now.Get("ETag")}, http.StatusConflict, "stale-cursor"},
		{[]string{"If-Match", "*"}, http.StatusConflict, "stale-cursor"},
	} {
		code, hdr, body := get(page2, tc.hdr...)
		var p api.Problem
		if code != tc.code || json.Unmarshal(body, &p) != nil || !strings.HasSuffix(p.Type, "/"+tc.kind) || hdr.Get("ETag") != "" {
			t.Errorf("page 2 after the change, %q: %d, ETag %q: %s; want %d %s", tc.hdr, code, hdr.Get("ETag"), body, tc.code, tc.kind)
		}
	}
}

// TestWalkTagReadsDecodedKeys: the ETag leaves the cursor out by its
// decoded key, as the handlers read it, and hashes every key decoded: a
// client that percent-encodes the key ("c%75rsor=…", "l%69mit=10") keeps
// the walk's tag, and the next page's link has one cursor. Before, an
// escaped cursor key stayed in the tag, so If-Match: <first page's tag>
// was 412 on a page of an unchanged store, and the link carried the
// escaped cursor beside the new one.
func TestWalkTagReadsDecodedKeys(t *testing.T) {
	t.Parallel()
	srv, _ := newServer(t, api.Options{Stores: openStores(t, "points_pyramid")})
	get := func(path string, hdr ...string) (int, http.Header, []byte) {
		t.Helper()
		req := httptest.NewRequest(http.MethodGet, path, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		return serveRequest(t, srv.Handler(), req)
	}
	first := "/api/v1/stores/points_pyramid/bbox?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9&limit=10&level=0"
	code, hdr, body := get(first)
	tag, next := hdr.Get("ETag"), hdr.Get("X-Next-Cursor")
	if code != 200 || tag == "" || next == "" {
		t.Fatalf("%s: %d, ETag %q, cursor %q: %.200s", first, code, tag, next, body)
	}
	if _, h, _ := get(strings.Replace(first, "limit=", "l%69mit=", 1)); h.Get("ETag") != tag {
		t.Errorf("first page with l%%69mit: ETag %q, want the plain spelling's %q", h.Get("ETag"), tag)
	}
	_, _, plain := get(first + "&cursor=" + next)
	for _, key := range []string{"cursor", "c%75rsor", "%63ursor", "CURSOR"} {
		page2 := first + "&" + key + "=" + next
		code, hdr, body := get(page2, "If-Match", tag)
		if key == "CURSOR" { // another key (unknown parameters are refused): not the cursor
			if code == 200 {
				t.Errorf("%s: 200, want it refused", page2)
			}
			continue
		}
		if code != 200 || hdr.Get("ETag") != tag || string(body) != string(plain) {
			t.Errorf("%s, If-Match the first page's tag %s: %d, ETag %q: %.200s", page2, tag, code, hdr.Get("ETag"), body)
			continue
		}
		if link := hdr.Get("Link"); strings.Count(link, "ursor=") != 1 || strings.Contains(link, "%75") || strings.Contains(link, "%63") {
			t.Errorf("%s: next link %q, want one cursor", page2, link)
		}
	}
}
