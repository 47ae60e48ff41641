package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/faultstore"
	"github.com/zvfserve/zvfserve/zvf/synth"
	"github.com/zvfserve/zvfserve/zvf/writer"
	"github.com/zvfserve/zvfserve/zvf/zvftest/alloctest"
)

// A 60,000-point store (512 level-0 chunks of ~117 points): its whole-box
// answer is 1.7 MB of JSON or 720 kB of binary, well past the 256 KiB a
// response holds back before it commits to 200 and streams.
const (
	streamPoints = 60_000
	wholeBox     = "/api/v1/stores/points/bbox?min=0,0,0&max=1000,1000,1000"
)

// streamStore is the points store, written once per test binary.
var streamStore = sync.OnceValues(func() (storage.Writer, error) {
	return synth.Points(context.Background(), streamPoints, 1, writer.CodecNone)
})

func sharedPoints(t *testing.T) storage.Store {
	t.Helper()
	st, err := streamStore()
	if err != nil {
		t.Fatal(err)
	}
	return storage.Sub(st, "points")
}

// logBuffer collects the server's JSON log lines; a test waits for them
// with awaitRequests.
type logBuffer struct{ apitest.Buffer }

// requests returns the access-log lines ("msg":"request") of text.
func requests(t *testing.T, text string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["msg"] == "request" {
			out = append(out, m)
		}
	}
	return out
}

// awaitRequests returns the access-log lines of route ("": every line)
// once n of them are written (a response's metrics are counted before
// its line is), failing t if that takes 10 s.
func (l *logBuffer) awaitRequests(t *testing.T, n int, route string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	if !l.Await(10*time.Second, nil, func(text string) bool {
		lines = lines[:0]
		for _, m := range requests(t, text) {
			if route == "" || m["route"] == route {
				lines = append(lines, m)
			}
		}
		return len(lines) >= n
	}) {
		t.Fatalf("%d access-log lines after 10 s, want %d", len(lines), n)
	}
	return lines
}

// streamServer serves the points store (read one chunk at a time, cold
// cache) through a fault store; rules are added after the store opened.
func streamServer(t *testing.T, o api.Options, h2 bool, rules ...*faultstore.Rule) (*api.Server, *faultstore.Store, *logBuffer, string, *http.Client) {
	t.Helper()
	srv, fs, logs := pointsServer(t, o, rules...)
	ts := startHTTP(t, srv, h2)
	return srv, fs, logs, ts.URL, ts.Client()
}

// pointsServer is streamServer without the listener.
func pointsServer(t *testing.T, o api.Options, rules ...*faultstore.Rule) (*api.Server, *faultstore.Store, *logBuffer) {
	t.Helper()
	ctx := context.Background()
	fs := faultstore.New(sharedPoints(t), nil)
	s, err := zvf.Open(ctx, fs, zvf.Options{Name: "points", Cache: cache.New(64 << 20), Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fs.Close() })
	for _, r := range rules {
		fs.Add(r)
	}
	logs := &logBuffer{}
	o.Stores = []*zvf.Store{s}
	o.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	srv := apitest.New(t, o)
	return srv, fs, logs
}

// fetch reads a whole response; err is what reading the body said.
func fetch(t *testing.T, c *http.Client, url string) (*http.Response, []byte, error) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

// metric returns the value of the sample whose line matches re, or -1.
func metric(t *testing.T, srv *api.Server, re string) float64 {
	t.Helper()
	rec := newRecorder()
	req, _ := http.NewRequest(http.MethodGet, "/metrics", nil)
	srv.AdminHandler().ServeHTTP(rec, req)
	m := regexp.MustCompile(`(?m)^` + re + ` (\S+)$`).FindStringSubmatch(rec.buf.String())
	if m == nil {
		return -1
	}
	var v float64
	fmt.Sscan(m[1], &v)
	return v
}

// TestStreamFailingMidwayIsVisible: when storage fails after the answer
// has started (the last chunk of the box), the client must not receive a
// well-formed but short body — the connection (HTTP/1.1) or stream
// (HTTP/2) is aborted — and the access log and the request counter record
// the response as aborted by an error, not as a plain 200.
func TestStreamFailingMidwayIsVisible(t *testing.T) {
	t.Parallel()
	for _, proto := range []string{"HTTP/1.1", "HTTP/2.0"} {
		for _, f := range []string{"json", "ndjson", "bin", "arrow"} {
			t.Run(proto+" "+f, func(t *testing.T) {
				srv, _, logs, url, client := streamServer(t, api.Options{}, proto == "HTTP/2.0",
					&faultstore.Rule{Op: "get", Key: "vertices/7.7.7/c/0", Fault: faultstore.Fault{Err: errors.Join(storage.ErrUnavailable, faultstore.ErrInjected)}})
				resp, body, err := fetch(t, client, url+wholeBox+"&f="+f)
				if resp.Proto != proto {
					t.Fatalf("served over %s", resp.Proto)
				}
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("status %d: the failure came before the answer started", resp.StatusCode)
				}
				if err == nil {
					t.Fatalf("the client read %d bytes and a clean end of a cut answer", len(body))
				}
				lines := logs.awaitRequests(t, 1, "")
				if len(lines) != 1 || lines[0]["status"] != 200.0 || lines[0]["outcome"] != "error" {
					t.Fatalf("access log: %v", lines)
				}
				if v := metric(t, srv, `zvfserve_http_requests_total\{code="200",outcome="error",route="/api/v1/stores/\{store\}/bbox"\}`); v != 1 {
					t.Fatalf("requests_total{outcome=error} = %v", v)
				}
				if v := metric(t, srv, `zvfserve_http_requests_total\{code="200",outcome="complete",route="/api/v1/stores/\{store\}/bbox"\}`); v != -1 {
					t.Fatalf("the cut answer is also counted complete: %v", v)
				}
			})
		}
	}
}

// TestRequestTimeoutBoundsTheWait: --request-timeout bounds the work
// before an answer starts; an answer that keeps streaming runs past it
// (to its end), and only StreamTimeout, the hard cap on a response's
// whole time, cuts it — visibly, counted as a timeout.
func TestRequestTimeoutBoundsTheWait(t *testing.T) {
	t.Parallel()
	// The first 300 chunks (two reads each: their vertices' zarr.json and
	// c/0; box matching reads no fragment index on this bin-prefiltered
	// level) come at once, and the answer
	// starts within ~100 ms on an idle machine; then every chunk takes
	// 15 ms more: ~3.7 s of steady streaming after the answer started.
	// The request timeout leaves the start 20 times that (a loaded 2-core
	// machine once took over 500 ms), and the stream outlasts it. The
	// race detector makes the server several times slower (and CI runs it
	// beside other packages), so there every duration is four times as
	// long.
	scale := time.Duration(1)
	if alloctest.Race {
		scale = 4
	}
	slow := func() []*faultstore.Rule {
		return []*faultstore.Rule{
			{Fault: faultstore.Fault{Times: 2 * 300}},
			{Key: "/c/0", Fault: faultstore.Fault{Delay: scale * 15 * time.Millisecond}},
		}
	}
	for _, tc := range []struct {
		name    string
		o       api.Options
		outcome string
	}{
		{"streams past the request timeout", api.Options{RequestTimeout: scale * 2 * time.Second}, "complete"},
		{"cut by the stream cap", api.Options{RequestTimeout: scale * 2 * time.Second, StreamTimeout: scale * 3 * time.Second}, "timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, _, logs, url, client := streamServer(t, tc.o, false, slow()...)
			start := time.Now()
			resp, body, err := fetch(t, client, url+wholeBox)
			took := time.Since(start)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			lines := logs.awaitRequests(t, 1, "")
			if len(lines) != 1 || lines[0]["outcome"] != tc.outcome {
				t.Fatalf("access log: %v", lines)
			}
			if v := metric(t, srv, `zvfserve_http_requests_total\{code="200",outcome="`+tc.outcome+`",route="/api/v1/stores/\{store\}/bbox"\}`); v != 1 {
				t.Fatalf("requests_total{outcome=%s} = %v", tc.outcome, v)
			}
			if tc.outcome == "complete" {
				if err != nil || !bytes.Contains(body, []byte(fmt.Sprintf(`"count":%d`, streamPoints))) {
					t.Fatalf("after %v: %v, %d bytes, tail %q", took, err, len(body), body[max(0, len(body)-80):])
				}
				if took < tc.o.RequestTimeout {
					t.Fatalf("the answer took %v: not slow enough to test the request timeout", took)
				}
				return
			}
			if err == nil {
				t.Fatalf("cut by the cap after %v, yet the client saw a clean end", took)
			}
		})
	}
}

// TestColdAnswerSendsRowsWhileStorageReads: a cold answer that has
// started (past the 256 KiB hold-back) passes its rows on while it waits
// for a chunk storage is still reading, not when its body buffer fills.
// With the read of the box's last chunk held by the store, an
// uncompressed client already has every row before that chunk's (less at
// most one flush's worth, 64 KiB, left for a later wait). Once the read
// is let go, every answer is the one a server that never waited gives:
// the same bytes, compressed ones too (a compressor is fed early, never
// flushed), and the same headers and trailers (where the counts go never
// depends on what was cached).
func TestColdAnswerSendsRowsWhileStorageReads(t *testing.T) {
	t.Parallel()
	// About 35,000 of the 60,000 points (420 kB of binary: less than the
	// body buffer, which before this answer sent nothing until its end).
	min, max := synth.BoxFor(streamPoints, 35_000, 0)
	path := fmt.Sprintf("/api/v1/stores/points/bbox?min=%g,%g,%g&max=%g,%g,%g&f=bin", min[0], min[1], min[2], max[0], max[1], max[2])
	// The box's last chunk in key order (chunks of 125): its read is held.
	k := int(max[0] / 125)
	last := fmt.Sprintf("vertices/%d.%d.%d/c/0", k, k, k)
	_, _, _, plainURL, plainClient := streamServer(t, api.Options{}, false)
	for _, enc := range []string{"identity", "zstd", "gzip"} {
		// The answer from a store that is never held, as sent (a client
		// that names an encoding itself gets the bytes undecoded).
		wantResp, want := fetchEncoded(t, plainClient, plainURL+path, enc)
		// What must have arrived while the last chunk is read: the rows
		// before its own, less what a later wait would send. (A
		// compressed answer starts when its compressor's output passes
		// the hold-back, as it would warm: nothing is asked of it here.)
		before := 0
		if enc == "identity" {
			_, blocks := binBlocks(t, want)
			lastRows := -1
			for _, b := range blocks {
				if b.kind == 1 {
					lastRows = cap(want) - cap(b.payload) - 16
				}
			}
			if lastRows < 300<<10 {
				t.Fatalf("the rows before the last chunk's are %d bytes: the box no longer streams", lastRows)
			}
			before = lastRows - 64<<10
		}
		for _, proto := range []string{"HTTP/1.1", "HTTP/2.0"} {
			t.Run(enc+" "+proto, func(t *testing.T) {
				resp, got := heldAnswer(t, path, last, enc, proto == "HTTP/2.0", before)
				if !bytes.Equal(got, want) {
					t.Fatalf("the answer (%d bytes) differs from the one never held (%d bytes)", len(got), len(want))
				}
				for _, k := range []string{"Content-Length", "Content-Encoding", "Trailer", "Etag", "X-Vertex-Count", "X-Number-Matched"} {
					if g, w := resp.Header.Get(k), wantResp.Header.Get(k); g != w {
						t.Errorf("header %s: %q, never held %q", k, g, w)
					}
					if g, w := resp.Trailer.Get(k), wantResp.Trailer.Get(k); g != w {
						t.Errorf("trailer %s: %q, never held %q", k, g, w)
					}
				}
			})
		}
	}
}

// fetchEncoded is fetch of url with Accept-Encoding enc, the body as sent
// (the response's trailers read).
func fetchEncoded(t *testing.T, c *http.Client, url, enc string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Accept-Encoding", enc)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %s %v", url, resp.Status, err)
	}
	if got := resp.Header.Get("Content-Encoding"); got != strings.TrimPrefix(enc, "identity") {
		t.Fatalf("asked for %s, sent %q", enc, got)
	}
	return resp, b
}

// heldAnswer asks a fresh server over the points store for path with
// Accept-Encoding enc while the store holds the read of key last; once at
// least before body bytes have reached the client (failing t if they do
// not in 10 s) it lets the read go and returns the response (its trailers
// read) and the whole body as sent.
func heldAnswer(t *testing.T, path, last, enc string, h2 bool, before int) (*http.Response, []byte) {
	t.Helper()
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	gate := func(ctx context.Context, _ time.Duration) error {
		once.Do(func() { close(held) })
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	fs := faultstore.New(sharedPoints(t), gate)
	s, err := zvf.Open(context.Background(), fs, zvf.Options{Name: "points", Cache: cache.New(64 << 20)})
	if err != nil {
		t.Fatal(err)
	}
	fs.Add(&faultstore.Rule{Op: "get", Key: last, Fault: faultstore.Fault{Delay: time.Nanosecond, Times: 1}})
	ts := startHTTP(t, apitest.New(t, api.Options{Stores: []*zvf.Store{s}}), h2)
	var got atomic.Int64
	type result struct {
		resp *http.Response
		body []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, ts.URL+path, nil)
		req.Header.Set("Accept-Encoding", enc)
		resp, err := ts.Client().Do(req)
		if err != nil {
			done <- result{err: err}
			return
		}
		defer resp.Body.Close()
		var body []byte
		buf := make([]byte, 32<<10)
		for {
			n, err := resp.Body.Read(buf)
			body = append(body, buf[:n]...)
			got.Store(int64(len(body)))
			if err == io.EOF {
				done <- result{resp: resp, body: body}
				return
			}
			if err != nil {
				done <- result{body: body, err: err}
				return
			}
		}
	}()
	var releaseOnce sync.Once
	let := func() { releaseOnce.Do(func() { close(release) }) }
	defer let()
	<-held
	deadline := time.Now().Add(10 * time.Second)
	for got.Load() < int64(before) {
		if time.Now().After(deadline) {
			t.Fatalf("while the last chunk was read the client had %d bytes, want %d", got.Load(), before)
		}
		time.Sleep(time.Millisecond)
	}
	let()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.resp, r.body
}

// BenchmarkColdBBoxSlowStore: a cold answer from a store whose every
// read takes 2 ms (as an object store's do, or longer), about 35,000
// vertices in 343 chunks, binary, uncompressed and as zstd (as the viewer
// asks), over a real connection: when its first and last bytes reach
// the client. The answer passes what it holds on while it waits for reads
// (sendHeld), so the first byte comes once the hold-back is past, not
// when the body buffer fills.
func BenchmarkColdBBoxSlowStore(b *testing.B) {
	ctx := context.Background()
	min, max := synth.BoxFor(streamPoints, 35_000, 0)
	path := fmt.Sprintf("/api/v1/stores/points/bbox?min=%g,%g,%g&max=%g,%g,%g&f=bin", min[0], min[1], min[2], max[0], max[1], max[2])
	st, err := streamStore()
	if err != nil {
		b.Fatal(err)
	}
	fs := faultstore.New(storage.Sub(st, "points"), nil)
	fs.Add(&faultstore.Rule{Op: "get", Key: "/c/0", Fault: faultstore.Fault{Delay: 2 * time.Millisecond}})
	ch := cache.New(64 << 20)
	s, err := zvf.Open(ctx, fs, zvf.Options{Name: "points", Cache: ch})
	if err != nil {
		b.Fatal(err)
	}
	srv, err := api.New(api.Options{Stores: []*zvf.Store{s}, Cache: ch})
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	buf := make([]byte, 64<<10)
	for _, enc := range []string{"identity", "zstd", "gzip"} {
		b.Run(enc, func(b *testing.B) {
			var first, last time.Duration
			for b.Loop() {
				ch.Purge()
				req, _ := http.NewRequest(http.MethodGet, ts.URL+path, nil)
				req.Header.Set("Accept-Encoding", enc)
				t0 := time.Now()
				resp, err := ts.Client().Do(req)
				if err != nil {
					b.Fatal(err)
				}
				n, err := resp.Body.Read(buf)
				first += time.Since(t0)
				for err == nil {
					_, err = resp.Body.Read(buf)
				}
				last += time.Since(t0)
				if err != io.EOF || n == 0 || resp.StatusCode != http.StatusOK {
					b.Fatal(resp.Status, err)
				}
				resp.Body.Close()
			}
			b.ReportMetric(float64(first.Microseconds())/1000/float64(b.N), "first-byte-ms")
			b.ReportMetric(float64(last.Microseconds())/1000/float64(b.N), "last-byte-ms")
		})
	}
}
