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
)

func rssMB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			f := strings.Fields(l)
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// TestSoak: 64 concurrent connections of mixed queries on loopback,
// bounded in count and time; zero errors, and memory after the run is not
// above memory after a warm-up by more than a small margin.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("soak test skipped in -short mode")
	}
	stores := openStores(t, "points_pyramid", "polylines", "graph", "mesh")
	_, ts := newServer(t, api.Options{Stores: stores, MaxConcurrent: 32, QueueWait: 10 * time.Second})
	paths := []string{
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
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64}}
	defer client.CloseIdleConnections()
	run := func(total int, deadline time.Duration) (int64, int64) {
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
					resp, err := client.Get(ts.URL + paths[int(i)%len(paths)])
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
	run(1000, 20*time.Second) // warm-up
	runtime.GC()
	start := rssMB()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heapStart := ms.HeapAlloc
	n, errs := run(3000, 20*time.Second)
	runtime.GC()
	runtime.ReadMemStats(&ms)
	end := rssMB()
	t.Logf("soak: %d requests at 64 connections, %d errors, RSS %.0f MB → %.0f MB, heap %.1f → %.1f MB", n, errs, start, end,
		float64(heapStart)/1e6, float64(ms.HeapAlloc)/1e6)
	if errs != 0 {
		t.Fatalf("%d errors", errs)
	}
	if float64(ms.HeapAlloc) > float64(heapStart)*1.5+16e6 {
		t.Fatalf("heap grew from %d to %d bytes", heapStart, ms.HeapAlloc)
	}
	if end > start*1.5+64 {
		t.Fatalf("RSS grew from %.0f to %.0f MB", start, end)
	}
}
