package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"
)

// Cache locality: the same viewer-like load through nginx with consistent
// hashing on the URI and with round-robin, each on three fresh replicas;
// per-replica cache hit ratio and bytes read from the bucket.

// viewerSessions is a viewer's load: each session opens one store at the
// overview (level 2), zooms in around a point of interest (level 1, then
// the 250 µm tiles of level 0) and pans a few times, asking only for tiles
// it has not shown yet. Points of interest are shared: a few are popular.
func viewerSessions(seed uint64, n int) [][]reqKey {
	rng := rand.New(rand.NewPCG(seed, 7))
	hot := [][2]int{{300, 300}, {700, 250}, {500, 700}, {200, 800}, {800, 800}}
	weights := []float64{0.35, 0.25, 0.2, 0.12, 0.08}
	var out [][]reqKey
	for s := range n {
		store := []string{"cells", "axons"}[s%2]
		pick, x := rng.Float64(), 0
		for x < len(weights)-1 && pick > weights[x] {
			pick -= weights[x]
			x++
		}
		fx, fy := hot[x][0]+rng.IntN(250)-125, hot[x][1]+rng.IntN(250)-125
		seen := map[string]bool{}
		var sess []reqKey
		view := func(level, fx, fy int) {
			tile := 250 << level
			for tx := max(0, (fx-tile)/tile*tile); tx < min(1000, fx+tile); tx += tile {
				for ty := max(0, (fy-tile)/tile*tile); ty < min(1000, fy+tile); ty += tile {
					p := fmt.Sprintf("/api/v1/stores/%s/bbox?min=%d,%d,0&max=%d,%d,600&level=%d&attributes=*&f=bin", store, tx, ty, tx+tile, ty+tile, level)
					if !seen[p] {
						seen[p] = true
						sess = append(sess, reqKey{http.MethodGet, p, ""})
					}
				}
			}
		}
		view(2, 500, 500)
		view(1, fx, fy)
		view(0, fx, fy)
		for range 3 {
			fx, fy = min(999, max(0, fx+rng.IntN(251)-125)), min(999, max(0, fy+rng.IntN(251)-125))
			view(0, fx, fy)
		}
		out = append(out, sess)
	}
	return out
}

// localityResult is one balancing policy's figures.
type localityResult struct {
	policy              string
	requests, failed    int
	took                time.Duration
	hits, misses, bytes []float64 // per replica
}

func (r localityResult) totals() (hitRatio, bytes float64) {
	var h, m, b float64
	for i := range r.hits {
		h, m, b = h+r.hits[i], m+r.misses[i], b+r.bytes[i]
	}
	return h / max(1, h+m), b
}

var localityMetrics = []string{"zvfserve_cache_hits_total", "zvfserve_cache_misses_total", "zvfserve_store_read_bytes_total"}

// runLocality starts three fresh replicas with a cache of cacheBytes each
// and nginx with the policy, runs the sessions (four users at once) and
// reads the replicas' counters.
func runLocality(t *testing.T, env fleetEnv, newReplica func(string, int64) *replica, roundRobin bool, cacheBytes int64, sessions [][]reqKey) localityResult {
	t.Helper()
	res := localityResult{policy: "consistent hash"}
	if roundRobin {
		res.policy = "round-robin"
	}
	var reps []*replica
	var addrs []string
	base := map[string]map[string]float64{}
	for i := range 3 {
		r := newReplica(fmt.Sprintf("loc%d", i), cacheBytes)
		r.start(t)
		m, err := r.metrics(localityMetrics...)
		if err != nil {
			t.Fatal(err)
		}
		base[r.name] = m
		reps = append(reps, r)
		addrs = append(addrs, r.addr())
	}
	lb := startNginx(t, env.nginx, addrs, roundRobin)
	var mu sync.Mutex
	var users sync.WaitGroup
	next := 0
	start := time.Now()
	for range 4 {
		users.Go(func() {
			c := fleetClient(false)
			for {
				mu.Lock()
				if next == len(sessions) {
					mu.Unlock()
					return
				}
				sess := sessions[next]
				next++
				mu.Unlock()
				for _, k := range sess {
					r := do(context.Background(), c, lb.url(), "nginx", k, "")
					mu.Lock()
					res.requests++
					if r.err != nil || r.ans.status != http.StatusOK {
						res.failed++
						if res.failed <= 5 {
							t.Errorf("%s: %s: %d %v", res.policy, k, r.ans.status, r.err)
						}
					}
					mu.Unlock()
				}
			}
		})
	}
	users.Wait()
	res.took = time.Since(start)
	for _, r := range reps {
		m, err := r.metrics(localityMetrics...)
		if err != nil {
			t.Fatal(err)
		}
		b := base[r.name]
		res.hits = append(res.hits, m[localityMetrics[0]]-b[localityMetrics[0]])
		res.misses = append(res.misses, m[localityMetrics[1]]-b[localityMetrics[1]])
		res.bytes = append(res.bytes, m[localityMetrics[2]]-b[localityMetrics[2]])
		r.stop()
	}
	return res
}

// measureLocality compares consistent hashing with round-robin and
// prints the figures docs/deploy.md quotes.
func measureLocality(t *testing.T, env fleetEnv, newReplica func(string, int64) *replica, cacheBytes int64) {
	sessions := viewerSessions(42, 48)
	results := []localityResult{
		runLocality(t, env, newReplica, false, cacheBytes, sessions),
		runLocality(t, env, newReplica, true, cacheBytes, sessions),
	}
	for _, r := range results {
		ratio, bytes := r.totals()
		line := fmt.Sprintf("locality, %s: %d requests (%d failed) in %v; cache hit ratio %.1f%%, %.1f MiB read from the bucket; per replica:",
			r.policy, r.requests, r.failed, r.took.Round(time.Millisecond), 100*ratio, bytes/(1<<20))
		for i := range r.hits {
			line += fmt.Sprintf(" [hits %.0f%%, %.1f MiB]", 100*r.hits[i]/max(1, r.hits[i]+r.misses[i]), r.bytes[i]/(1<<20))
		}
		t.Log(line)
	}
	ch, _ := results[0].totals()
	rr, _ := results[1].totals()
	_, chBytes := results[0].totals()
	_, rrBytes := results[1].totals()
	if ch <= rr || chBytes >= rrBytes {
		t.Errorf("consistent hashing (hit ratio %.3f, %.0f bytes read) is not better than round-robin (%.3f, %.0f bytes)", ch, chBytes, rr, rrBytes)
	}
}
