package api_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"syscall"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/synth"
)

const benchLineVertices = 400_000

var benchLines = sync.OnceValues(func() (*api.Server, error) {
	ctx := context.Background()
	st, err := synth.Streamlines(ctx, benchLineVertices, 1)
	if err != nil {
		return nil, err
	}
	ch := cache.New(1 << 30)
	s, err := zvf.Open(ctx, storage.Sub(st, "streamlines"), zvf.Options{Name: "streamlines", Cache: ch})
	if err != nil {
		return nil, err
	}
	return api.New(api.Options{Stores: []*zvf.Store{s}, Cache: ch})
})

// binaryNext is the next cursor in a binary answer's trailer block.
func binaryNext(b *testing.B, body []byte) string {
	hl := int(binary.LittleEndian.Uint64(body[8:]))
	for o := 16 + (hl+7)/8*8; o < len(body); {
		kind := binary.LittleEndian.Uint32(body[o:])
		n := int(binary.LittleEndian.Uint64(body[o+8:]))
		if kind == 15 {
			var t struct {
				Next *string `json:"next"`
			}
			if err := json.Unmarshal(body[o+16:o+16+n], &t); err != nil {
				b.Fatal(err)
			}
			if t.Next == nil {
				return ""
			}
			return *t.Next
		}
		o += 16 + (n+7)/8*8
	}
	b.Fatal("no trailer")
	return ""
}

// benchLinePages: server time of a warm box of about 50,000 streamline
// vertices with their connectivity, in binary, every page of it at the
// given limit (0: one page), cursors followed as a client would.
func benchLinePages(b *testing.B, limit int) {
	srv, err := benchLines()
	if err != nil {
		b.Fatal(err)
	}
	h := srv.Handler()
	min, max := synth.BoxFor(benchLineVertices, 50_000, 301)
	base := fmt.Sprintf("/api/v1/stores/streamlines/bbox?min=%g,%g,%g&max=%g,%g,%g&f=bin", min[0], min[1], min[2], max[0], max[1], max[2])
	if limit > 0 {
		base += fmt.Sprintf("&limit=%d", limit)
	}
	pages, bytes := 0, 0
	walk := func() {
		pages, bytes = 0, 0
		for cur := ""; ; {
			u := base
			if cur != "" {
				u += "&cursor=" + url.QueryEscape(cur)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, u, nil))
			if rec.Code != http.StatusOK {
				b.Fatalf("%s: %d %s", u, rec.Code, rec.Body.Bytes())
			}
			pages++
			bytes += rec.Body.Len()
			if cur = binaryNext(b, rec.Body.Bytes()); cur == "" {
				return
			}
		}
	}
	walk() // warm
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime(b)
	for b.Loop() {
		walk()
	}
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
	b.SetBytes(int64(bytes))
	b.ReportMetric(float64(pages), "pages/op")
}

// cpuTime is the process's user and system CPU time in nanoseconds: on a
// loaded machine the time a request costs, where wall time mostly
// measures the wait for a core.
func cpuTime(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkBBoxLines50k: the box in one page (the reference for the paged
// answers below).
func BenchmarkBBoxLines50k(b *testing.B) { benchLinePages(b, 0) }

// BenchmarkBBoxLines50kPaged5000: the same answer in pages of 5,000 rows.
func BenchmarkBBoxLines50kPaged5000(b *testing.B) { benchLinePages(b, 5000) }

// BenchmarkBBoxLines50kPaged997: and in pages of 997.
func BenchmarkBBoxLines50kPaged997(b *testing.B) { benchLinePages(b, 997) }
