package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// TestLinkEmulation: --rtt holds every answer for a round trip and
// --mbps paces the bytes of all a server's answers together; the answers
// arrive whole (lower bounds only: a loaded machine is only slower).
func TestLinkEmulation(t *testing.T) {
	t.Parallel()
	body := bytes.Repeat([]byte("z"), 50_000)
	via := &link{RTT: 30 * time.Millisecond, Mbps: 8} // 50 kB at 1 MB/s: 50 ms each
	h := via.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i < len(body); i += 10_000 {
			_, _ = w.Write(body[i : i+10_000])
		}
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	t0 := time.Now()
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := get(context.Background(), srv.Client(), srv.URL)
			if err != nil || !bytes.Equal(b, body) {
				t.Errorf("%d bytes, %v", len(b), err)
			}
		}()
	}
	wg.Wait()
	// Two answers share the link: 100 kB at 1 MB/s after the round trip.
	if d := time.Since(t0); d < 130*time.Millisecond {
		t.Errorf("two 50 kB answers over a 30 ms, 8 Mbit/s link took %v, at least 130 ms expected", d)
	}
	if got := (*link)(nil).String(); got != "loopback" {
		t.Errorf("no link: %q", got)
	}
}
