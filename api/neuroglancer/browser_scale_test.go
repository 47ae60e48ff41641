package neuroglancer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/api/neuroglancer"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/demo"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// timedLog records each answer zvfserve gave: when it ended (from the
// log's start), its status, path and the body bytes sent.
type timedLog struct {
	mu    sync.Mutex
	start time.Time
	seen  []timedAnswer
}

type timedAnswer struct {
	end    time.Duration
	status int
	path   string
	bytes  int64
}

func (l *timedLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := apitest.NewCountingWriter(w)
		h.ServeHTTP(sw, r)
		l.mu.Lock()
		l.seen = append(l.seen, timedAnswer{time.Since(l.start), sw.Status, r.URL.Path, sw.N})
		l.mu.Unlock()
	})
}

// reset forgets what was seen and starts the clock.
func (l *timedLog) reset() {
	l.mu.Lock()
	l.seen, l.start = nil, time.Now()
	l.mu.Unlock()
}

func (l *timedLog) answers() []timedAnswer {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.seen)
}

// TestNeuroglancerAtScale opens stores of real size in Neuroglancer 2.41.2
// (headless Chromium, its cache off, a server whose cache starts empty:
// what the first user of a store meets) and measures what a user feels:
// the time until the first source answers and until every visible chunk
// is loaded, the requests and bytes, and any answer other than 200, 206
// or 304. docs/neuroglancer.md reports the numbers. Run it with
// ZVFSERVE_BROWSER=1 (it takes minutes).
func TestNeuroglancerAtScale(t *testing.T) {
	if os.Getenv("ZVFSERVE_BROWSER") != "1" {
		t.Skip("Neuroglancer at scale: set ZVFSERVE_BROWSER=1 to run it (needs Chromium and .ci/build-neuroglancer; it takes minutes)")
	}
	dist := neuroglancerDist(t)
	bctx := newBrowser(t, chromiumPath(t))
	ctx := context.Background()
	mem := zvftest.Store(t, "mem://")
	infos, err := demo.Build(ctx, mem, demo.Options{Seed: 1, Scale: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range infos {
		t.Logf("demo ×10 %s: %s, %d vertices, %d levels", in.Name, in.Geometry, in.Vertices, in.Levels)
	}
	points := pointStore(t, 1_000_000, 125, true)
	open := func(ch *cache.Cache) []*zvf.Store {
		var out []*zvf.Store
		for _, s := range append([][2]any{{points, "points1m"}}, demoPrefixes(mem, infos)...) {
			st, err := zvf.Open(ctx, s[0].(storage.Store), zvf.Options{Name: s[1].(string), Cache: ch})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, st)
		}
		return out
	}
	page := httptest.NewServer(http.FileServer(http.Dir(dist)))
	t.Cleanup(page.Close)

	for _, tc := range []struct {
		name    string
		stores  []string
		sharded neuroglancer.ShardMode
		// most: the bytes the paths under a prefix may take. A view of the
		// whole box fetched every one of the demo's 461,501 cells (8.7 MB)
		// while its coarse levels held a few thousand.
		most map[string]int64
	}{
		{"1M points", []string{"points1m"}, "", map[string]int64{"/ng/points1m/annotations/": 1 << 20}},
		{"1M points unsharded", []string{"points1m"}, neuroglancer.ShardNever, map[string]int64{"/ng/points1m/annotations/": 1 << 20}},
		{"demo ×10", []string{"cells", "axons", "skeletons", "meshes"}, "", map[string]int64{"/ng/cells/annotations/": 2 << 20}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch := cache.New(1 << 30)
			srv := apitest.New(t, api.Options{Stores: open(ch), Cache: ch, NGSharded: tc.sharded, MaxAge: time.Hour}) // serve's defaults
			var log timedLog
			data := httptest.NewServer(log.wrap(srv.Handler()))
			defer data.Close()
			state := map[string]any{"layout": "3d", "showAxisLines": false, "showScaleBar": false, "showDefaultAnnotations": false}
			var layers []neuroglancer.Layer
			for _, name := range tc.stores {
				var d struct {
					Neuroglancer *neuroglancer.Description `json:"neuroglancer"`
				}
				resp, body := apitest.Get(t, data, "/api/v1/stores/"+name)
				if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &d) != nil || d.Neuroglancer == nil {
					t.Fatalf("descriptor of %s: %d %.300s", name, resp.StatusCode, body)
				}
				layers = append(layers, d.Neuroglancer.State.Layers...)
			}
			state["layers"] = layers
			js, _ := json.Marshal(state)
			tctx, cancel := context.WithTimeout(bctx, 8*time.Minute)
			defer cancel()
			if _, err := chromedp.Call(tctx, network.SetCacheDisabled, network.SetCacheDisabledParams{CacheDisabled: true}); err != nil {
				t.Fatal(err)
			}
			log.reset()
			if err := chromedp.Do(tctx, chromedp.Navigate(page.URL+"/index.html#!"+url.PathEscape(string(js)))); err != nil {
				t.Fatal(err)
			}
			if _, err := pollNavigated[bool](tctx, "typeof window.zvfWhenLoaded === 'function'"); err != nil {
				t.Fatal(err)
			}
			st, err := chromedp.Run(tctx, chromedp.Evaluate[map[string]any]("window.zvfWhenLoaded(420000)", chromedp.EvalAwaitPromise))
			loaded := time.Since(log.start)
			seen := log.answers()
			if err != nil {
				t.Fatalf("Neuroglancer did not load every visible chunk without error after %v: %v\n%s", loaded, err, summary(seen))
			}
			t.Logf("%s: every visible chunk loaded %v after the page was opened; %v\n%s", tc.name, loaded.Round(10*time.Millisecond), st["chunks"], summary(seen))
			for prefix, most := range tc.most {
				var n int64
				for _, a := range seen {
					if strings.HasPrefix(a.path, prefix) {
						n += a.bytes
					}
				}
				if n > most {
					t.Errorf("%s took %d bytes, want at most %d", prefix, n, most)
				}
			}
			for _, a := range seen {
				// 408: a request whose client left (Neuroglancer aborts
				// fetches of chunks it no longer needs).
				if a.status != http.StatusOK && a.status != http.StatusPartialContent && a.status != http.StatusNotModified && a.status != http.StatusRequestTimeout {
					t.Errorf("zvfserve answered %d to %s", a.status, a.path)
				}
			}
		})
	}
}

// demoPrefixes pairs each demo store's folder in mem with its name.
func demoPrefixes(mem storage.Store, infos []demo.StoreInfo) [][2]any {
	var out [][2]any
	for _, in := range infos {
		out = append(out, [2]any{storage.Sub(mem, in.Prefix), in.Name})
	}
	return out
}

// summary groups answers by source and kind of path: requests, bytes,
// when the first and the last ended, and the statuses.
func summary(seen []timedAnswer) string {
	type group struct {
		n           int
		bytes       int64
		first, last time.Duration
		status      map[int]int
	}
	groups := map[string]*group{}
	var keys []string
	for _, a := range seen {
		k := pathKind(a.path)
		g := groups[k]
		if g == nil {
			g = &group{first: a.end, status: map[int]int{}}
			groups[k] = g
			keys = append(keys, k)
		}
		g.n++
		g.bytes += a.bytes
		g.first, g.last = min(g.first, a.end), max(g.last, a.end)
		g.status[a.status]++
	}
	slices.Sort(keys)
	var b strings.Builder
	var n int
	var bytes int64
	for _, k := range keys {
		g := groups[k]
		n += g.n
		bytes += g.bytes
		fmt.Fprintf(&b, "  %-50s %5d requests %11d bytes, first %7v last %7v %v\n", k, g.n, g.bytes,
			g.first.Round(time.Millisecond), g.last.Round(time.Millisecond), g.status)
	}
	fmt.Fprintf(&b, "  in all: %d requests, %d bytes", n, bytes)
	return b.String()
}

// pathKind names what a path asks for, its ids and version replaced.
func pathKind(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		switch {
		case len(s) > 17 && s[0] == 'v' && strings.Contains(s, "."):
			parts[i] = "v…"
		case strings.HasSuffix(s, ".shard"):
			parts[i] = "{n}.shard"
		case strings.HasSuffix(s, ".index"):
			parts[i] = "{id}.index"
		case s != "" && strings.Trim(s, "0123456789_-:") == "":
			parts[i] = "{id}"
		}
	}
	return strings.Join(parts, "/")
}
