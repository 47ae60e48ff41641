package api_test

import (
	"io"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// soakPaths is the soak's mix of queries: every kind of store, every
// format, paged and whole answers, objects, manifests, groups, listings.
var soakPaths = []string{
	"/api/v1/stores/points_pyramid/bbox?min=0,0,0&max=600,600,600&attributes=*&f=bin",
	"/api/v1/stores/points_pyramid/bbox?min=100,100,100&max=400,400,400&attributes=*",
	"/api/v1/stores/points_pyramid/bbox?min=0,0,0&max=1000,1000,1000&level=auto&limit=500",
	"/api/v1/stores/polylines/bbox?min=0,0,0&max=1000,1000,1000&f=ndjson",
	"/api/v1/stores/polylines/objects/7",
	"/api/v1/stores/graph/objects/1/manifest",
	"/api/v1/stores/mesh/bbox?min=0,0,0&max=500,500,500&f=bin",
	"/api/v1/stores/graph/levels/0/chunks",
	"/api/v1/stores/points_pyramid/groups/1",
	"/api/v1/stores",
}

// soak serves the reference stores and returns a function that sends
// total requests of the mix over 64 concurrent connections (stopping at
// deadline) and returns how many were sent and how many failed.
func soak(tb testing.TB) func(total int, deadline time.Duration) (sent, errs int64) {
	stores := openStores(tb, "points_pyramid", "polylines", "graph", "mesh")
	_, ts := newServer(tb, api.Options{Stores: stores, MaxConcurrent: 32, QueueWait: 10 * time.Second})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64}}
	tb.Cleanup(client.CloseIdleConnections)
	return func(total int, deadline time.Duration) (int64, int64) {
		var next, errs atomic.Int64
		stop := time.Now().Add(deadline)
		var wg sync.WaitGroup
		for w := 0; w < 64; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := next.Add(1)
					if i > int64(total) || time.Now().After(stop) {
						return
					}
					resp, err := client.Get(ts.URL + soakPaths[int(i)%len(soakPaths)])
					if err != nil {
						errs.Add(1)
						continue
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						errs.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		return min(next.Load(), int64(total)), errs.Load()
	}
}

// TestSoak: 64 concurrent connections of mixed queries on loopback,
// bounded in count and time; zero errors, and the live heap after the run
// is not above the heap after a warm-up by more than a small margin. (The
// resident set is the benchmark's to report, BenchmarkSoak: other
// processes on a shared host move it.) End to end: it runs for many
// seconds.
func TestSoak(t *testing.T) {
	zvftest.EndToEnd(t)
	if testing.Short() {
		t.Skip("soak test skipped in -short mode")
	}
	run := soak(t)
	run(1000, 20*time.Second) // warm-up
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heapStart := ms.HeapAlloc
	n, errs := run(3000, 20*time.Second)
	runtime.GC()
	runtime.ReadMemStats(&ms)
	t.Logf("soak: %d requests at 64 connections, %d errors, heap %.1f → %.1f MB", n, errs,
		float64(heapStart)/1e6, float64(ms.HeapAlloc)/1e6)
	if errs != 0 {
		t.Fatalf("%d errors", errs)
	}
	if float64(ms.HeapAlloc) > float64(heapStart)*1.5+16e6 {
		t.Fatalf("heap grew from %d to %d bytes", heapStart, ms.HeapAlloc)
	}
}

// BenchmarkSoak: the soak's mix, 1,000 requests an op over 64 connections
// after a warm-up of as many; reports the process's resident set after
// the warm-up and after the ops (rss-start-MB, rss-end-MB) and its peak
// (rss-peak-MB), which the test cannot assert on a shared host.
func BenchmarkSoak(b *testing.B) {
	run := soak(b)
	run(1000, time.Minute)
	runtime.GC()
	start := procStatusMB(b, "VmRSS")
	b.ResetTimer()
	for b.Loop() {
		if _, errs := run(1000, time.Minute); errs != 0 {
			b.Fatalf("%d errors", errs)
		}
	}
	b.StopTimer()
	runtime.GC()
	b.ReportMetric(start, "rss-start-MB")
	b.ReportMetric(procStatusMB(b, "VmRSS"), "rss-end-MB")
	b.ReportMetric(procStatusMB(b, "VmHWM"), "rss-peak-MB")
}

// procStatusMB reads a size field (VmRSS, VmHWM) of this process's
// /proc/self/status in MB.
func procStatusMB(tb testing.TB, field string) float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		tb.Skipf("no /proc/self/status: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if name, rest, ok := strings.Cut(l, ":"); ok && name == field {
			f := strings.Fields(rest)
			if len(f) > 0 {
				kb, err := strconv.ParseFloat(f[0], 64)
				if err == nil {
					return kb / 1024
				}
			}
		}
	}
	tb.Fatalf("no %s in /proc/self/status", field)
	return 0
}
