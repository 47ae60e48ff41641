package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/api/neuroglancer"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// ngKeys are the paths a Neuroglancer info names relative to its own
// directory, as the viewer reads them.
type ngKeys struct {
	ByID          ngKey   `json:"by_id"`
	Spatial       []ngKey `json:"spatial"`
	Relationships []ngKey `json:"relationships"`
	Scales        []struct {
		Key  string   `json:"key"`
		Size [3]int64 `json:"size"`
		Off  [3]int64 `json:"voxel_offset"`
	} `json:"scales"`
	SegmentProperties string `json:"segment_properties"`
	// A segments source's: where its skeletons or meshes are.
	Skeletons string `json:"skeletons"`
	Mesh      string `json:"mesh"`
	// A skeleton source's.
	Sharding *struct {
		ShardBits int `json:"shard_bits"`
	} `json:"sharding"`
}

// ngKey is an annotation info's key and, when sharded, its shard bits.
type ngKey struct {
	Key      string `json:"key"`
	Sharding *struct {
		ShardBits int `json:"shard_bits"`
	} `json:"sharding"`
}

// file is the path of a file under the key, relative to the info: the
// named one, or the first shard file when the key is sharded.
func (k ngKey) file(dir, name string) string {
	if k.Sharding != nil {
		name = fmt.Sprintf("%0*x.shard", (k.Sharding.ShardBits+3)/4, 0)
	}
	return ngJoin(dir, k.Key, name)
}

// ngJoin joins a directory and a key as Neuroglancer does: each segment
// of the key escaped as JavaScript's encodeURIComponent escapes it (so
// "@" goes out as %40, which a route spelling it "@" never matched).
func ngJoin(dir string, key ...string) string {
	var b strings.Builder
	b.WriteString(dir)
	for _, seg := range strings.Split(path.Join(key...), "/") {
		b.WriteByte('/')
		for _, c := range []byte(seg) {
			if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-_.!~*'()", c) >= 0 {
				b.WriteByte(c)
			} else {
				fmt.Fprintf(&b, "%%%02X", c)
			}
		}
	}
	return b.String()
}

// ngStaleRequests reads the info of each source of store s and returns, per source, one data path it names — as Neuroglancer
// resolves the info's keys — that the current version answers 200.
func ngStaleRequests(t *testing.T, h http.Handler) map[string]string {
	t.Helper()
	get := func(p string) []byte {
		code, _, body := serveFull(t, h, p)
		if code != 200 {
			t.Fatalf("%s: %d %.300s", p, code, body)
		}
		return body
	}
	info := func(dir string) ngKeys {
		var k ngKeys
		if err := json.Unmarshal(get(dir+"/info"), &k); err != nil {
			t.Fatal(err)
		}
		return k
	}
	out := map[string]string{}
	for _, src := range []string{"annotations", "lines"} {
		dir := "/ng/s/" + src
		k := info(dir)
		out[src+" spatial"] = k.Spatial[0].file(dir, "0_0_0")
		out[src+" by_id"] = k.ByID.file(dir, "0")
		out[src+" relationship"] = k.Relationships[0].file(dir, "0")
	}
	k := info("/ng/s/density")
	sc := k.Scales[0]
	end := func(a int) int64 { return sc.Off[a] + min(sc.Size[a], 64) }
	out["density"] = ngJoin("/ng/s/density", sc.Key, fmt.Sprintf("%d-%d_%d-%d_%d-%d", sc.Off[0], end(0), sc.Off[1], end(1), sc.Off[2], end(2)))
	k = info("/ng/s/skeletons")
	out["skeleton segment properties"] = ngJoin("/ng/s/skeletons", k.SegmentProperties, "info")
	// The segments source names the skeleton source's folder (with "..",
	// which Neuroglancer resolves), whose files Neuroglancer then reads
	// as it reads a skeleton source of its own.
	k = info("/ng/s/segments")
	sc = k.Scales[0]
	out["segments volume"] = ngJoin("/ng/s/segments", sc.Key, fmt.Sprintf("%d-%d_%d-%d_%d-%d",
		sc.Off[0], sc.Off[0]+min(sc.Size[0], 32), sc.Off[1], sc.Off[1]+min(sc.Size[1], 32), sc.Off[2], sc.Off[2]+min(sc.Size[2], 32)))
	out["segments segment properties"] = path.Join("/ng/s/segments", k.SegmentProperties, "info")
	skeletons := path.Join("/ng/s/segments", k.Skeletons)
	out["info segments skeletons"] = skeletons + "/info"
	sk := info(skeletons)
	out["info segments skeleton segment properties"] = path.Join(skeletons, sk.SegmentProperties, "info")
	var props struct {
		Inline struct {
			IDs []string `json:"ids"`
		} `json:"inline"`
	}
	if err := json.Unmarshal(get(out["segments segment properties"]), &props); err != nil || len(props.Inline.IDs) == 0 {
		t.Fatalf("the segments source's segment properties name no segment: %v", err)
	}
	out["segments skeleton"] = ngKey{Sharding: sk.Sharding}.file(skeletons, props.Inline.IDs[0])
	for _, p := range out {
		get(p)
	}
	return out
}

// versionSegment is the version segment of a key's path.
var versionSegment = regexp.MustCompile(`/v[0-9a-f]{16}\.[0-9]+/`)

// TestNGStaleInfoAfterStoreChange: Neuroglancer reads a source's info
// once and then asks for cells, by_id records, related lists, density
// chunks and segment properties at the paths that info names, without
// validators. Before, those paths were the same for every version of the
// store, so a viewer holding the info of the version before a change was
// answered the new version's bytes, which it decoded with the old
// layout (another sharding, another grid, other ids) and drew wrongly
// without a word. Now every key the info names carries the store
// version: the old info's paths answer 410 store-changed saying to
// reload, and the new info's paths answer as the unversioned ones do.
func TestNGStaleInfoAfterStoreChange(t *testing.T) {
	t.Parallel()
	for _, sharded := range []neuroglancer.ShardMode{neuroglancer.ShardNever, neuroglancer.ShardAlways} {
		t.Run(string(sharded), func(t *testing.T) {
			t.Parallel()
			dir := zvftest.CopyTree(t, filepath.Join(fixtures, rewrittenFixture))
			base := zvftest.Store(t, dir)
			hs, srv := watchedServer(t, map[string]storage.Store{"s": base}, cache.New(64<<20), api.Options{NGSharded: sharded})
			if _, err := hs["s"].Current(); err != nil {
				t.Fatal(err)
			}
			h := srv.Handler()
			old := ngStaleRequests(t, h)
			rewriteInPlace(t, dir, filepath.Join(fixtures, rewrittenFixture))
			settled(t, base)
			if err := srv.Refresh(context.Background()); err != nil {
				t.Fatal(err)
			}
			cur := ngStaleRequests(t, h)
			for what, p := range old {
				if cur[what] == p {
					t.Errorf("%s: the info of the new version names the old one's path %s", what, p)
					continue
				}
				// As Neuroglancer reads a shard file: a Range, no validators.
				req := httptest.NewRequest(http.MethodGet, p, nil)
				req.Header.Set("Range", "bytes=0-15")
				code, hdr, body := serveRequest(t, h, req)
				var pr api.Problem
				if code != http.StatusGone || json.Unmarshal(body, &pr) != nil || !strings.HasSuffix(pr.Type, "/store-changed") ||
					!strings.Contains(pr.Detail, "changed") || !strings.Contains(pr.Detail, "reload") ||
					!strings.HasPrefix(hdr.Get("Content-Type"), "application/problem+json") {
					t.Errorf("%s: the old info's %s after the change: %d %s %.300s", what, p, code, hdr.Get("Content-Type"), body)
				}
			}
			// The current info's paths answer what the same paths without
			// the version do.
			for what, p := range cur {
				if strings.HasPrefix(what, "info ") {
					continue // an info names its keys relative to where it is
				}
				plain := versionSegment.ReplaceAllString(p, "/")
				if plain == p {
					t.Errorf("%s: %s names no version", what, p)
					continue
				}
				_, _, a := serveFull(t, h, p)
				_, _, b := serveFull(t, h, plain)
				if !bytes.Equal(a, b) {
					t.Errorf("%s: %s and %s differ", what, p, plain)
				}
			}
		})
	}
}

// TestNGKeyFromNewerReplica: behind a load balancer, a viewer may read an
// info from a replica that has seen the store's new version and then ask
// one that has not checked yet for what it names. That replica checks
// the store at once and answers from the new version, as it does for a
// paging cursor (TestCursorFromNewerReplica); before, it answered 410
// store-changed, telling the viewer to reload an info that was current.
// A version neither replica serves is still 410.
func TestNGKeyFromNewerReplica(t *testing.T) {
	t.Parallel()
	src := filepath.Join(fixtures, rewrittenFixture)
	dir := zvftest.CopyTree(t, src)
	stA, stB := zvftest.Store(t, dir), zvftest.Store(t, dir)
	_, a := watched(t, "s", stA)
	_, b := watched(t, "s", stB)

	rewriteInPlace(t, dir, src)
	settled(t, stA)
	if err := a.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	fromA := ngStaleRequests(t, a.Handler())
	for what, p := range fromA {
		_, wantHdr, want := serveFull(t, a.Handler(), p)
		code, hdr, body := serveFull(t, b.Handler(), p)
		if code != 200 || !bytes.Equal(body, want) || hdr.Get("ETag") != wantHdr.Get("ETag") {
			t.Errorf("%s: %s from the replica that had not checked: %d %.300s", what, p, code, body)
		}
	}
	forged := "/ng/s/annotations/v0123456789abcdef/spatial0/0_0_0"
	code, _, body := serveFull(t, b.Handler(), forged)
	var pr api.Problem
	if code != http.StatusGone || json.Unmarshal(body, &pr) != nil || !strings.HasSuffix(pr.Type, "/store-changed") ||
		!strings.Contains(pr.Detail, "0123456789abcdef") {
		t.Errorf("a version no replica served: %d %.300s", code, body)
	}
}

// TestNGInfoIsRevalidated: an info names the store version its keys are
// under, and after a change those keys answer 410 telling the viewer to
// reload. That works only if a reload reads the info again: a browser (or
// a shared cache) keeps an answer of max-age=3600 for an hour without
// asking, and Neuroglancer's fetch of the info then got the old info, and
// its 410s, until the hour was out. Infos are no-cache (kept, but asked
// again each time: a 304 while the version stands); what their versioned
// keys name keeps --max-age.
func TestNGInfoIsRevalidated(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		token       string
		wantInfo    string // an info's Cache-Control
		wantDataKey string // a versioned key's
	}{
		{name: "public", wantInfo: "no-cache", wantDataKey: "public, max-age=3600"},
		{name: "token", token: "s3cret", wantInfo: "private, no-cache", wantDataKey: "private, max-age=3600"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, ts := newServer(t, api.Options{MaxAge: time.Hour, Token: tc.token})
			auth := []string{"Authorization", "Bearer " + tc.token}
			for _, info := range []string{
				"/ng/points_pyramid/annotations/info",
				"/ng/points_pyramid/density/info",
				"/ng/skeleton/lines/info",
				"/ng/skeleton/skeletons/info",
				"/ng/mesh/meshes/info",
				"/ng/mesh/multilod/info",
				"/ng/skeleton/segments/info",
				"/ng/mesh/segments/info",
			} {
				resp, body := apitest.Get(t, ts, info, auth...)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("%s: %d %.300s", info, resp.StatusCode, body)
				}
				if cc := resp.Header.Get("Cache-Control"); cc != tc.wantInfo {
					t.Errorf("%s: Cache-Control %q, want %q: a reload after the store changed would not read the new info", info, cc, tc.wantInfo)
				}
				again, _ := apitest.Get(t, ts, info, append(auth, "If-None-Match", resp.Header.Get("ETag"))...)
				if again.StatusCode != http.StatusNotModified || again.Header.Get("Cache-Control") != tc.wantInfo {
					t.Errorf("%s revalidated: %d, Cache-Control %q; want 304, %q", info, again.StatusCode, again.Header.Get("Cache-Control"), tc.wantInfo)
				}
			}
			var k ngKeys
			if _, body := apitest.Get(t, ts, "/ng/points_pyramid/annotations/info", auth...); json.Unmarshal(body, &k) != nil {
				t.Fatalf("annotations info: %s", body)
			}
			data := k.Spatial[0].file("/ng/points_pyramid/annotations", "0_0_0")
			if resp, body := apitest.Get(t, ts, data, auth...); resp.StatusCode != http.StatusOK || resp.Header.Get("Cache-Control") != tc.wantDataKey {
				t.Errorf("%s: %d, Cache-Control %q; want 200, %q: %.200s", data, resp.StatusCode, resp.Header.Get("Cache-Control"), tc.wantDataKey, body)
			}
		})
	}
}

// TestNGKeyOfAnEarlierServer: a line annotation's record grew when link
// attributes became properties, with the store unchanged. A viewer
// holding an earlier zvfserve's info (its keys under the same store
// version) would have been sent the longer records and decoded them with
// the old property list. Keys name the encoding's layout beside the
// store version, and a key of another layout answers 410 saying to
// reload, with the store unchanged.
func TestNGKeyOfAnEarlierServer(t *testing.T) {
	t.Parallel()
	_, ts := newServer(t, api.Options{})
	var k ngKeys
	if _, body := apitest.Get(t, ts, "/ng/graph/lines/info"); json.Unmarshal(body, &k) != nil {
		t.Fatalf("lines info: %s", body)
	}
	cur := k.Spatial[0].file("/ng/graph/lines", "0_0_0")
	if resp, body := apitest.Get(t, ts, cur); resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d %.300s", cur, resp.StatusCode, body)
	}
	seg := versionSegment.FindString(cur)
	if seg == "" {
		t.Fatalf("%s names no store version and layout", cur)
	}
	earlier := strings.Replace(cur, seg, seg[:strings.IndexByte(seg, '.')]+".1/", 1)
	resp, body := apitest.Get(t, ts, earlier)
	var pr api.Problem
	if resp.StatusCode != http.StatusGone || json.Unmarshal(body, &pr) != nil || !strings.HasSuffix(pr.Type, "/store-changed") ||
		!strings.Contains(pr.Detail, "earlier zvfserve") || !strings.Contains(pr.Detail, "reload") {
		t.Errorf("%s: %d %.300s", earlier, resp.StatusCode, body)
	}
}

// TestNGKeyOfALaterServer: in a fleet being upgraded, a viewer may hold
// the info of a replica of a later release (keys of a later layout) and
// send its keys to one of the earlier release. The 410 says so, and that
// reloading helps once every replica runs one release. Before, it said
// the info was an earlier zvfserve's, the opposite of what happened.
func TestNGKeyOfALaterServer(t *testing.T) {
	t.Parallel()
	_, ts := newServer(t, api.Options{})
	var k ngKeys
	if _, body := apitest.Get(t, ts, "/ng/graph/lines/info"); json.Unmarshal(body, &k) != nil {
		t.Fatalf("lines info: %s", body)
	}
	cur := k.Spatial[0].file("/ng/graph/lines", "0_0_0")
	seg := versionSegment.FindString(cur)
	if seg == "" {
		t.Fatalf("%s names no store version and layout", cur)
	}
	later := strings.Replace(cur, seg, seg[:strings.IndexByte(seg, '.')]+".99/", 1)
	resp, body := apitest.Get(t, ts, later)
	var pr api.Problem
	if resp.StatusCode != http.StatusGone || json.Unmarshal(body, &pr) != nil || !strings.HasSuffix(pr.Type, "/store-changed") ||
		!strings.Contains(pr.Detail, "later zvfserve") || strings.Contains(pr.Detail, "earlier") || !strings.Contains(pr.Detail, "layout 99") {
		t.Errorf("%s: %d %.400s", later, resp.StatusCode, body)
	}
}

// TestNGStandaloneSegmentsRevalidate: a standalone skeleton or mesh
// source's segment files (a skeleton, a multilod index and data, a legacy
// mesh manifest and fragment) are read at paths Neuroglancer builds from
// the source's URL and a segment id, which cannot name the store version.
// Each answer is revalidated on every use, as the info is (no-cache, a
// 304 while the version stands), under an ETag that changes with the
// version, so a viewer draws no old segment after a store replacement.
// Before, they were kept for --max-age (public, max-age=3600), an hour
// of old segments beside an info that was already the new one's. Under a
// version (the segments source names them there) --max-age stays.
func TestNGStandaloneSegmentsRevalidate(t *testing.T) {
	t.Parallel()
	for fixture, paths := range map[string][]string{
		"skeleton.zarrvectors": {"skeletons/1"},
		"mesh.zarrvectors":     {"multilod/1.index", "multilod/1", "meshes/1:0", "meshes/frag/1"},
	} {
		t.Run(fixture, func(t *testing.T) {
			t.Parallel()
			dir := zvftest.CopyTree(t, filepath.Join(fixtures, fixture))
			base := zvftest.Store(t, dir)
			_, srv := watchedServer(t, map[string]storage.Store{"s": base}, cache.New(64<<20), api.Options{MaxAge: time.Hour})
			h := srv.Handler()
			_, _, seg := serveFull(t, h, "/ng/s/segments/info")
			version := regexp.MustCompile(`v[0-9a-f]+\.[0-9]+/`).Find(seg)
			if version == nil {
				t.Fatalf("segments info names no version: %.300s", seg)
			}
			tags := map[string]string{}
			for _, p := range paths {
				p = "/ng/s/" + p
				code, hdr, body := serveFull(t, h, p)
				if code != 200 || hdr.Get("Cache-Control") != "no-cache" || hdr.Get("ETag") == "" {
					t.Errorf("%s: %d, Cache-Control %q, ETag %q; want 200, no-cache and a tag: %.200s", p, code, hdr.Get("Cache-Control"), hdr.Get("ETag"), body)
				}
				tags[p] = hdr.Get("ETag")
				req := httptest.NewRequest(http.MethodGet, p, nil)
				req.Header.Set("If-None-Match", tags[p])
				if code, hdr, _ := serveRequest(t, h, req); code != http.StatusNotModified || hdr.Get("Cache-Control") != "no-cache" {
					t.Errorf("%s revalidated: %d, Cache-Control %q; want 304, no-cache", p, code, hdr.Get("Cache-Control"))
				}
			}
			for _, p := range paths {
				if strings.HasPrefix(p, "meshes/") {
					continue // the legacy source has no versioned paths
				}
				dir, file := path.Split(p)
				vp := "/ng/s/" + dir + string(version) + file
				if code, hdr, body := serveFull(t, h, vp); code != 200 || hdr.Get("Cache-Control") != "public, max-age=3600" {
					t.Errorf("%s: %d, Cache-Control %q; want 200, public, max-age=3600: %.200s", vp, code, hdr.Get("Cache-Control"), body)
				}
			}
			rewriteInPlace(t, dir, filepath.Join(fixtures, fixture))
			settled(t, base)
			if err := srv.Refresh(context.Background()); err != nil {
				t.Fatal(err)
			}
			for p, old := range tags {
				req := httptest.NewRequest(http.MethodGet, p, nil)
				req.Header.Set("If-None-Match", old)
				if code, hdr, body := serveRequest(t, h, req); code != 200 || hdr.Get("ETag") == old || hdr.Get("ETag") == "" {
					t.Errorf("%s after the store's replacement, If-None-Match the old tag: %d, ETag %q; want 200 under a new tag: %.200s", p, code, hdr.Get("ETag"), body)
				}
			}
		})
	}
}
