package api_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/faultstore"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// TestAccessLogIsBounded: a request's log lines stay short whatever the
// client sends. The access log wrote the whole path and method the client
// sent: a 60 KiB path refused with 414 made a 60 KiB line (and an
// invented method of any length, refused with 405, the same), so a client
// chose the size of every line it caused.
func TestAccessLogIsBounded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, method, path string
		status             int
		want               string // in the line, whatever the length
	}{
		{"long path", "GET", "/api/v1/stores/" + strings.Repeat("a", 60<<10), http.StatusRequestURITooLong, `path=/api/v1/stores/aaaa`},
		{"long method", strings.Repeat("M", 30<<10), "/healthz", http.StatusMethodNotAllowed, `method=MMMM`},
		{"long path and method", strings.Repeat("M", 30<<10), "/" + strings.Repeat("p", 30<<10), http.StatusMethodNotAllowed, `path=/pppp`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var logs apitest.Buffer
			_, ts := newServer(t, api.Options{Stores: openStores(t, "graph"), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			c, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", tc.method, tc.path)
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			var line string
			if !logs.Await(5*time.Second, nil, func(text string) bool {
				for l := range strings.SplitSeq(text, "\n") {
					if strings.Contains(l, "msg=request ") {
						line = l
						return true
					}
				}
				return false
			}) {
				t.Fatalf("no access log line: %.300s", logs.String())
			}
			for l := range strings.SplitSeq(logs.String(), "\n") {
				if len(l) > 2<<10 {
					t.Errorf("a log line of %d bytes: %.200s…", len(l), l)
				}
			}
			if !strings.Contains(line, tc.want) || !strings.Contains(line, fmt.Sprintf("status=%d", tc.status)) {
				t.Errorf("the access log line does not name the request: %.300s", line)
			}
		})
	}
}

// TestCheckLogsSayWhatHappened: the checks of a store that does not open
// say so — not that it changed, which it did not: every retry of a store
// whose bucket was empty logged "store changed and does not open", once
// a minute, as if a writer were at work — and the check that finally
// opens it says that.
func TestCheckLogsSayWhatHappened(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bucket := zvftest.Store(t, "mem://")
	late, err := zvf.OpenHandle(ctx, bucket, zvf.Options{Name: "late", Cache: cache.New(64 << 20)}, zvf.Watch{Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	var logs apitest.Buffer
	srv, _ := newServer(t, api.Options{Handles: []*zvf.Handle{late}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	for range 2 {
		if err := srv.Refresh(ctx); err == nil {
			t.Fatal("an empty bucket opened as a store")
		}
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d log lines for two failed checks, want 2: %s", len(lines), logs.String())
	}
	for _, l := range lines {
		if strings.Contains(l, "changed") || !strings.Contains(l, `msg="store does not open; serving its error"`) || !strings.Contains(l, "store=late") {
			t.Errorf("a failed retry of a store that never opened: %s", l)
		}
	}
	uploadTree(t, bucket, filepath.Join(fixtures, "graph.zarrvectors"))
	if err := srv.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if l := strings.TrimSpace(logs.String()[len(strings.Join(lines, "\n")):]); !strings.Contains(l, `msg="store opens; serving it"`) || strings.Contains(l, "changed") {
		t.Errorf("the check that opened the store logged: %s", l)
	}
}

// TestClientGoneIsCounted499: a request whose client went away before its
// answer started is logged and counted with status 499 (nginx's "client
// closed request"), as problem.StatusClientClosed says; it was counted and
// logged as the 408 Request Timeout the problem document would be sent
// with, which reads as the server timing out the client.
func TestClientGoneIsCounted499(t *testing.T) {
	t.Parallel()
	var logs apitest.Buffer
	m := api.NewMetrics()
	fs, h := faultyServer(t, api.Options{Metrics: m, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	fs.Add(hang())
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+graphBox, nil)
	done := make(chan error, 1)
	go func() {
		resp, err := ts.Client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	for fs.InFlight.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	var line string
	if !logs.Await(5*time.Second, nil, func(text string) bool {
		for l := range strings.SplitSeq(text, "\n") {
			if strings.Contains(l, "msg=request ") {
				line = l
				return true
			}
		}
		return false
	}) {
		t.Fatalf("no access log line: %s", logs.String())
	}
	if !strings.Contains(line, "status=499") {
		t.Errorf("access log: %s", line)
	}
	// Once: the access log says it all. A "request failed" line with
	// err="context canceled" beside it said nothing more, twice a fetch
	// Neuroglancer aborts.
	if n := strings.Count(strings.TrimSpace(logs.String()), "\n") + 1; n != 1 {
		t.Errorf("%d log lines for one client that left, want 1:\n%s", n, logs.String())
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if out := rec.Body.String(); !strings.Contains(out, `zvfserve_http_requests_total{code="499",outcome="disconnected",route="/api/v1/stores/{store}/bbox"} 1`) {
		t.Errorf("metrics:\n%s", grepLines(out, "zvfserve_http_requests_total{"))
	}
}

func grepLines(text, sub string) string {
	var b strings.Builder
	for l := range strings.SplitSeq(text, "\n") {
		if strings.Contains(l, sub) {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// TestProblemsCountedByType: the metrics tell problems apart by type, as
// their documents do. By status alone they could not be: a backend that
// refuses the server (storage-denied: fix the credentials) and one that is
// down (backend-unavailable: wait) are both 502, an overloaded server and
// a store being replaced both 503. Every type is exported from the start
// (at 0), so that an alert on one has a series to watch.
func TestProblemsCountedByType(t *testing.T) {
	t.Parallel()
	m := api.NewMetrics()
	fst, h := faultyServer(t, api.Options{Metrics: m})
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	get := func(path string, want int) {
		t.Helper()
		resp, err := ts.Client().Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("%s: %d, want %d", path, resp.StatusCode, want)
		}
	}
	fst.Add(&faultstore.Rule{Op: "get", Key: "vertices", Fault: faultstore.Fault{Err: errors.Join(storage.ErrUnavailable, faultstore.ErrInjected), Times: 1}})
	get(graphBox, http.StatusBadGateway)
	fst.Reset()
	fst.Add(&faultstore.Rule{Op: "get", Key: "vertices", Fault: faultstore.Fault{Err: fs.ErrPermission}})
	get(graphBox, http.StatusBadGateway)
	get(graphBox, http.StatusBadGateway)
	fst.Reset()
	get("/api/v1/stores/nope", http.StatusNotFound)
	get(graphBox+"&limit=x", http.StatusBadRequest)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	out := rec.Body.String()
	for _, want := range []string{
		`zvfserve_http_problems_total{type="backend-unavailable"} 1`,
		`zvfserve_http_problems_total{type="storage-denied"} 2`,
		`zvfserve_http_problems_total{type="not-found"} 1`,
		`zvfserve_http_problems_total{type="bad-parameter"} 1`,
		`zvfserve_http_problems_total{type="overloaded"} 0`,
		`zvfserve_http_problems_total{type="store-changing"} 0`,
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("no %s in\n%s", want, grepLines(out, "zvfserve_http_problems_total"))
		}
	}
}

// TestHandlerPanicLogsItsStack: a panic in a handler is logged with the
// stack that led to it, as the panics of background work are; the line
// said only the panic's value, which does not say where the bug is.
func TestHandlerPanicLogsItsStack(t *testing.T) {
	t.Parallel()
	var logs apitest.Buffer
	ui := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panicInTheViewer() })
	_, ts := newServer(t, api.Options{Stores: openStores(t, "graph"), UI: ui, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	resp, body := apitest.Get(t, ts, "/index.html")
	if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(body), "internal") || strings.Contains(string(body), "goroutine") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	var line string
	for l := range strings.SplitSeq(logs.String(), "\n") {
		if strings.Contains(l, "panic serving request") {
			line = l
		}
	}
	if !strings.Contains(line, `"panic":"viewer exploded"`) || !strings.Contains(line, `"stack":"goroutine `) || !strings.Contains(line, "panicInTheViewer") {
		t.Errorf("the panic's log line: %.600s", line)
	}
}

//go:noinline
func panicInTheViewer() { panic("viewer exploded") }

// firstCheck records when its store was first listed after armed was set
// (a check lists the store's root).
type firstCheck struct {
	storage.Store
	armed *atomic.Bool
	at    atomic.Int64 // UnixNano; 0: not yet
}

func (f *firstCheck) List(ctx context.Context, prefix string) (storage.Listing, error) {
	if f.armed.Load() {
		f.at.CompareAndSwap(0, time.Now().UnixNano())
	}
	return f.Store.List(ctx, prefix)
}

// TestChecksAreSpreadOverTheInterval: the stores of a server are checked
// at times spread over --revalidate, not all at once: every store's first
// check came one interval after start, so a folder of thousands of stores
// sent its bucket thousands of listings in the same instant, every
// interval — the burst an object store throttles (S3's 503 SlowDown),
// failing requests with the checks.
func TestChecksAreSpreadOverTheInterval(t *testing.T) {
	t.Parallel()
	const n, every = 8, 800 * time.Millisecond
	var armed atomic.Bool
	sts := map[string]storage.Store{}
	var recs []*firstCheck
	for i := range n {
		f := &firstCheck{Store: zvftest.Store(t, filepath.Join(fixtures, "graph.zarrvectors")), armed: &armed}
		recs = append(recs, f)
		sts[fmt.Sprintf("s%d", i)] = f
	}
	_, srv := watchedServer(t, sts, cache.New(64<<20), api.Options{})
	armed.Store(true)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		srv.Revalidate(ctx, every, time.Minute, false)
	}()
	defer func() { stop(); <-done }()
	deadline := time.Now().Add(10 * every)
	var first, last time.Duration
	for i := 0; i < n; {
		if time.Now().After(deadline) {
			t.Fatalf("store %d not checked within %v", i, 10*every)
		}
		at := recs[i].at.Load()
		if at == 0 {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		d := time.Unix(0, at).Sub(start)
		if i == 0 || d < first {
			first = d
		}
		last = max(last, d)
		i++
	}
	if last-first < every/2 || last > every+every/2 {
		t.Errorf("the %d stores' first checks came %v to %v after start; want them spread over the %v interval", n, first, last, every)
	}
}

// TestClientMistakesLogOnce: a request refused for the client's own
// mistake (an unknown store, a bad parameter) is logged once, by the
// access log; what the server or its data got wrong (a backend refusing
// it, here) is logged with its error as well, at WARN or ERROR. Every 404
// a crawler caused was a WARN "request failed" line beside its access
// line, drowning the warnings an operator must act on.
func TestClientMistakesLogOnce(t *testing.T) {
	t.Parallel()
	var logs apitest.Buffer
	fst, h := faultyServer(t, api.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	for _, tc := range []struct {
		path   string
		status int
		lines  []string // what the log says of it, in order
	}{
		{"/api/v1/stores/nope/bbox?min=0,0,0&max=1,1,1", http.StatusNotFound, []string{"level=INFO msg=request "}},
		{graphBox + "&limit=x", http.StatusBadRequest, []string{"level=INFO msg=request "}},
		{"/api/v1/stores/graph/objects/999999", http.StatusNotFound, []string{"level=INFO msg=request "}},
		{graphBox, http.StatusBadGateway, []string{`level=ERROR msg="request failed"`, "level=INFO msg=request "}},
	} {
		from := len(logs.String())
		if tc.status == http.StatusBadGateway {
			fst.Add(&faultstore.Rule{Op: "get", Key: "vertices", Fault: faultstore.Fault{Err: fs.ErrPermission}})
		}
		resp, err := ts.Client().Get(ts.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Fatalf("%s: %d, want %d", tc.path, resp.StatusCode, tc.status)
		}
		logs.Await(5*time.Second, nil, func(text string) bool { return strings.Contains(text[from:], "msg=request ") })
		got := strings.Split(strings.TrimSpace(logs.String()[from:]), "\n")
		ok := len(got) == len(tc.lines)
		for i := 0; ok && i < len(got); i++ {
			ok = strings.Contains(got[i], tc.lines[i])
		}
		if !ok {
			t.Errorf("%s (%d) logged:\n%s\nwant lines with %q", tc.path, tc.status, logs.String()[from:], tc.lines)
		}
	}
}
