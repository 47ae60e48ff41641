package main

import (
	"context"
	"net/http"
	"strconv"
)

// benchTrivial fetches the answers of q's burst from base once, then
// runs n bursts of q against a server that holds them and writes each in
// one call, with its length: no query, no encoding, no cache.
func benchTrivial(ctx context.Context, c *benchClient, base string, q benchQuery, n, burst, points int) (benchResult, error) {
	bodies := map[string][]byte{}
	for i := 0; i < burst; i++ {
		p := burstPath(q, i, points)
		if bodies[p] != nil {
			continue
		}
		b, err := get(ctx, c.Client, base+p)
		if err != nil {
			return benchResult{}, err
		}
		bodies[p] = b
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := bodies[r.URL.RequestURI()]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		_, _ = w.Write(b)
	})
	tb, stop, err := serveLocal(h)
	if err != nil {
		return benchResult{}, err
	}
	defer stop()
	// One burst first, as the warm phase had: connections are open.
	if _, err := benchBurst(ctx, c, tb, q, burst, points); err != nil {
		return benchResult{}, err
	}
	res, err := benchRounds(ctx, c, tb, q, n, burst, points)
	res.Phase = "trivial"
	return res, err
}
