package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/neuroglancer"
	"github.com/zvfserve/zvfserve/cmd/internal/cli"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// graphStore is a reference fixture.
const graphStore = "../../testdata/zvf-reference/graph.zarrvectors"

// served is a `zvfserve serve` running in-process.
type served struct {
	base, admin string
	out, errs   *syncBuffer
	cancel      context.CancelFunc // what SIGTERM does in main
	done        chan int
	exited      chan struct{} // closed when serve has returned
}

// exitsClean fails the test unless serve, cancelled when the test ends,
// returns without an error.
func (s *served) exitsClean(t *testing.T) {
	t.Cleanup(func() {
		s.cancel()
		select {
		case code := <-s.done:
			s.done <- code
			if code != 0 {
				t.Errorf("serve exited %d: %s", code, s.errs.String())
			}
		case <-time.After(30 * time.Second):
			t.Error("serve did not return")
		}
	})
}

// startServe runs serve with args (plus a loopback --addr) and waits until
// it prints where it listens.
func startServe(t *testing.T, args ...string) *served {
	t.Helper()
	return startServeWith(t, serveHooks{}, args...)
}

func startServeWith(t *testing.T, hooks serveHooks, args ...string) *served {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &served{out: &syncBuffer{}, errs: &syncBuffer{}, cancel: cancel, done: make(chan int, 1), exited: make(chan struct{})}
	go func() {
		defer close(s.exited)
		code := 0
		if err := serve(ctx, append([]string{"--addr", "127.0.0.1:0"}, args...), s.out, s.errs, hooks); err != nil {
			s.errs.Write([]byte("zvfserve serve: " + err.Error() + "\n"))
			code = 1
		}
		s.done <- code
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.done:
		case <-time.After(30 * time.Second):
			t.Error("serve did not return")
		}
	})
	m := s.out.await(listening, 20*time.Second, s.exited)
	if m == nil {
		select {
		case <-s.exited:
			t.Fatalf("serve exited: %s", s.errs.String())
		default:
		}
		t.Fatalf("serve did not start: %s %s", s.out.String(), s.errs.String())
	}
	s.base = m[1]
	if m := regexp.MustCompile(`admin listening" addr=(\S+)`).FindStringSubmatch(s.errs.String()); m != nil {
		s.admin = "http://" + m[1]
	}
	return s
}

func httpGet(t *testing.T, url string, hdr ...string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// TestServeTokenFile: --token-file guards the API with the file's token,
// which no endpoint (pprof's cmdline included), log line or --help shows.
func TestServeTokenFile(t *testing.T) {
	const token = "tok-7f3a9c"
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	saved := os.Args
	t.Cleanup(func() { os.Args = saved })
	os.Args = []string{"zvfserve", "serve", "--token-file", file, "--admin-addr", "127.0.0.1:0", graphStore}
	s := startServe(t, os.Args[2:]...)
	if s.admin == "" {
		t.Fatalf("no admin address in the log: %s", s.errs.String())
	}
	for _, tc := range []struct {
		url  string
		hdr  []string
		want int
	}{
		{s.base + "/api/v1/stores", nil, http.StatusUnauthorized},
		{s.base + "/api/v1/stores", []string{"Authorization", "Bearer " + token + "x"}, http.StatusUnauthorized},
		{s.base + "/api/v1/stores", []string{"Authorization", "Bearer " + token}, http.StatusOK},
		{s.base + "/healthz", nil, http.StatusOK},
		{s.admin + "/debug/pprof/cmdline", nil, http.StatusOK},
		{s.admin + "/metrics", nil, http.StatusOK},
		// With an admin listener, metrics are there only: not published
		// with the public port, token or not.
		{s.base + "/metrics", []string{"Authorization", "Bearer " + token}, http.StatusNotFound},
	} {
		code, body, hdr := httpGet(t, tc.url, tc.hdr...)
		if code != tc.want {
			t.Errorf("%s: %d, want %d", tc.url, code, tc.want)
		}
		if strings.Contains(body, token) {
			t.Errorf("%s shows the token", tc.url)
		}
		if code == http.StatusOK && strings.Contains(tc.url, "/api/") && !strings.Contains(hdr.Get("Cache-Control"), "private") {
			t.Errorf("%s: Cache-Control %q", tc.url, hdr.Get("Cache-Control"))
		}
	}
	if strings.Contains(s.errs.String(), token) || strings.Contains(s.out.String(), token) {
		t.Errorf("the log shows the token: %s", s.errs.String())
	}
}

// TestServeTokenFlags: conflicting, empty or missing token sources are
// usage errors (exit 2), each said in one sentence that names the flag and
// what it takes, and --help does not print a token taken from the
// environment. A missing file printed the OS error ("--token-file: open
// …: no such file or directory"), exit 1.
func TestServeTokenFlags(t *testing.T) {
	// What every --token-file mistake says it takes.
	const takes = "name a file that holds the bearer token (surrounding white space is ignored), or leave --token-file and ZVFSERVE_TOKEN_FILE unset"
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"both", []string{"--token", "a", "--token-file", empty}, 2, "both given"},
		{"empty file", []string{"--token-file", empty}, 2, "zvfserve serve: --token-file " + empty + " is empty: " + takes + "\n"},
		{"missing file", []string{"--token-file", filepath.Join(dir, "nope")}, 2,
			"zvfserve serve: --token-file " + filepath.Join(dir, "nope") + ": no such file: " + takes + "\n"},
		{"a folder", []string{"--token-file", dir}, 2, "zvfserve serve: --token-file " + dir + ": a folder, not a file: " + takes + "\n"},
		{"empty flag", []string{"--token", ""}, 2, "--token is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, code := runCmd(t, append(append([]string{"serve", "--addr", "127.0.0.1:0"}, tc.args...), graphStore)...)
			if code != tc.code || !strings.Contains(stderr, tc.msg) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, stderr, tc.code, tc.msg)
			}
		})
	}
	t.Setenv("ZVFSERVE_TOKEN", "env-secret-42")
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"serve", "--help"}, &out, &errb); code != 0 {
		t.Fatalf("--help: exit %d", code)
	}
	if strings.Contains(out.String()+errb.String(), "env-secret-42") || !strings.Contains(errb.String(), "-token-file") {
		t.Fatalf("--help: %s", errb.String())
	}
}

// TestServeMaxConnections: --max-connections is enforced on the listener,
// checked against the open-file limit (an explicit value that does not fit
// is a usage error; the default is lowered to fit, and said so).
func TestServeMaxConnections(t *testing.T) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	t.Run("enforced", func(t *testing.T) {
		s := startServe(t, "--max-connections", "20", "--admin-addr", "127.0.0.1:0", graphStore)
		addr := strings.TrimPrefix(s.base, "http://")
		for i := 0; i < 20; i++ {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			// Half a request: not silent, so never closed to make room
			// (a connection silent for a second would be).
			if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\n"); err != nil {
				t.Fatal(err)
			}
		}
		// The admin listener has connections of its own, apart from the cap.
		awaitOpen := func(n int) {
			t.Helper()
			want := fmt.Sprintf("zvfserve_http_connections_open %d\n", n)
			for deadline := time.Now().Add(10 * time.Second); !strings.Contains(metrics(t, s.admin), want); time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("%d connections never open", n)
				}
			}
		}
		awaitOpen(20)
		// A probe on --addr gets one of the slots past the cap, data does not.
		noKeepAlive := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
		for path, want := range map[string]int{"/healthz": http.StatusOK, "/api/v1/stores": http.StatusServiceUnavailable} {
			resp, err := noKeepAlive.Get(s.base + path)
			if err != nil {
				t.Fatalf("%s at the cap: %v", path, err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Fatalf("%s at the cap: %d, want %d", path, resp.StatusCode, want)
			}
		}
		awaitOpen(20) // the probe slots' connections closed with their answers
		// Slow requests holding every probe slot do not keep a probe out:
		// the oldest makes room.
		for i := 0; i < api.ProbeConnections; i++ {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\n"); err != nil {
				t.Fatal(err)
			}
		}
		awaitOpen(20 + api.ProbeConnections)
		resp, err := noKeepAlive.Get(s.base + "/healthz")
		if err != nil {
			t.Fatalf("/healthz with every probe slot held: %v", err)
		}
		resp.Body.Close()
		if m := metrics(t, s.admin); resp.StatusCode != http.StatusOK || !strings.Contains(m, "zvfserve_http_connections_probe_slot_closed_total 1\n") ||
			!strings.Contains(m, "zvfserve_http_connections_refused_total 0\n") {
			t.Fatalf("/healthz with every probe slot held: %d; metrics:\n%s", resp.StatusCode, m)
		}
		// Probes pointed at the admin listener still get through.
		for _, p := range []string{"/healthz", "/readyz"} {
			resp, err := http.Get(s.admin + p)
			if err != nil {
				t.Fatalf("admin %s at the cap: %v", p, err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("admin %s at the cap: %d", p, resp.StatusCode)
			}
		}
	})
	t.Run("explicit value over the open-file limit", func(t *testing.T) {
		_, stderr, code := runCmd(t, "serve", "--addr", "127.0.0.1:0", "--max-connections", strconv.FormatUint(lim.Cur, 10), graphStore)
		if code != 2 || !strings.Contains(stderr, "RLIMIT_NOFILE") {
			t.Fatalf("exit %d: %s", code, stderr)
		}
	})
	t.Run("default lowered to fit", func(t *testing.T) {
		low := lim
		low.Cur = 1024
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
			t.Skipf("cannot lower the open-file limit: %v", err)
		}
		t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim) })
		s := startServe(t, graphStore)
		// 1024 - 64 - 64 slots × 8 reads - the connections the listeners
		// hold past the cap (4 probe slots, 64 newcomers read for a
		// probe's line, 16 admin): before, those were left out, and a
		// flood at the cap could take descriptors the store reads need.
		want := 1024 - 64 - 64*8 - (api.ProbeConnections + 64 + api.AdminMaxConnections)
		if log := s.errs.String(); !strings.Contains(log, fmt.Sprintf("max_connections=%d ", want)) || !strings.Contains(log, "kept_past_cap=84") {
			t.Fatalf("want max_connections=%d and kept_past_cap=84 in the log: %s", want, log)
		}
	})
	// Under 600, the default 64 slots × 8 reads leave no room for
	// connections: serve refused to start unless told lower values. Not
	// told, it now lowers them to fit (reads at most half of the 452
	// descriptors left: 28 slots × 8) and says so in one line; told, it
	// still refuses.
	lowered := func(t *testing.T, cur uint64) {
		t.Helper()
		low := lim
		low.Cur = cur
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
			t.Skipf("cannot lower the open-file limit: %v", err)
		}
		t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim) })
	}
	t.Run("default concurrency lowered to fit", func(t *testing.T) {
		lowered(t, 600)
		s := startServe(t, graphStore)
		log := s.errs.String()
		if !strings.Contains(log, "max_concurrent=28 read_concurrency=8 max_connections=228 open_file_limit=600") ||
			strings.Count(log, "RLIMIT_NOFILE") != 1 {
			t.Fatalf("want one line saying max_concurrent=28 read_concurrency=8 max_connections=228: %s", log)
		}
		resp, err := http.Get(s.base + "/api/v1/stores")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "graph") {
			t.Fatalf("/api/v1/stores: %d %s", resp.StatusCode, body)
		}
	})
	t.Run("explicit concurrency over the open-file limit", func(t *testing.T) {
		lowered(t, 600)
		_, stderr, code := runCmd(t, "serve", "--addr", "127.0.0.1:0", "--max-concurrent", "64", "--read-concurrency", "8", graphStore)
		if code != 2 || !strings.Contains(stderr, "no --max-connections fits") || !strings.Contains(stderr, "--max-concurrent 64 × 8") {
			t.Fatalf("exit %d: %s", code, stderr)
		}
	})
}

// metrics fetches /metrics on a fresh connection.
func metrics(t *testing.T, base string) string {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(base + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestServeMemoryLimit: serve keeps the Go soft memory limit at the cache
// budget plus headroom, unless GOMEMLIMIT says otherwise.
func TestServeMemoryLimit(t *testing.T) {
	orig := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(orig) })
	startServe(t, "--cache-bytes", "67108864", graphStore)
	if got := debug.SetMemoryLimit(-1); got != 64<<20+memoryHeadroom {
		t.Errorf("memory limit %d, want %d", got, 64<<20+memoryHeadroom)
	}
	debug.SetMemoryLimit(orig)
	t.Setenv("GOMEMLIMIT", "1GiB")
	startServe(t, "--cache-bytes", "1048576", graphStore)
	if got := debug.SetMemoryLimit(-1); got != orig {
		t.Errorf("with GOMEMLIMIT set, serve changed the limit to %d", got)
	}
}

// TestServeMaxChunkBytes: --max-chunk-bytes reaches the codecs: a store
// whose chunks are larger than the limit is served as a 422 that says so,
// and the same store answers with the default.
func TestServeMaxChunkBytes(t *testing.T) {
	const box = "/api/v1/stores/graph/bbox?min=390,223,585&max=480,313,675"
	small := startServe(t, "--max-chunk-bytes", "16", graphStore)
	code, body, _ := httpGet(t, small.base+box)
	if code != http.StatusUnprocessableEntity || !strings.Contains(body, "16") {
		t.Fatalf("16-byte limit: %d %s", code, body)
	}
	def := startServe(t, graphStore)
	if code, body, _ := httpGet(t, def.base+box); code != http.StatusOK || !strings.Contains(body, fmt.Sprintf(`"count":%d,`, graphBoxCount(t))) {
		t.Fatalf("default limit: %d %.200s", code, body)
	}
}

// TestServeEnvironment: every flag takes its ZVFSERVE_ variable (the
// command line wins), parsed like the flag, so a malformed value is a
// usage error at start — it used to be ignored silently, leaving the
// default in place.
func TestServeEnvironment(t *testing.T) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var c serveConfig
	serveFlags(fs, &c)
	if err := fs.Parse([]string{"--max-age", "5s"}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"ZVFSERVE_CACHE_BYTES": "1234", "ZVFSERVE_MAX_AGE": "9h", "ZVFSERVE_FOLLOW_SYMLINKS": "true",
		"ZVFSERVE_REVALIDATE_WALK": "10m", "ZVFSERVE_TOKEN": "not-taken-here", "ZVFSERVE_NG_SHARDED": "always"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	if err := applyEnv(fs, lookup, "token"); err != nil {
		t.Fatal(err)
	}
	if c.cacheBytes != 1234 || c.maxAge != 5*time.Second || !c.followSymlinks || c.revalidateWalk != 10*time.Minute || c.token != "" ||
		c.ngSharded != neuroglancer.ShardAlways {
		t.Fatalf("%+v", c)
	}
	// Each says the kind of value wanted (they said "parse error").
	for _, tc := range []struct{ k, v, want string }{
		{"ZVFSERVE_CACHE_BYTES", "512MB", `ZVFSERVE_CACHE_BYTES="512MB": want a whole number`},
		{"ZVFSERVE_SETTLE", "2", `ZVFSERVE_SETTLE="2": want a duration such as 90s, 5m or 1h`},
		{"ZVFSERVE_FOLLOW_SYMLINKS", "yes please", `ZVFSERVE_FOLLOW_SYMLINKS="yes please": want true or false`},
		{"ZVFSERVE_NG_SHARDED", "sometimes", `ZVFSERVE_NG_SHARDED="sometimes": "sometimes" is not a sharding mode`},
	} {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		serveFlags(fs, &serveConfig{})
		_ = fs.Parse(nil)
		err := applyEnv(fs, func(n string) (string, bool) { return tc.v, n == tc.k }, "token")
		if !errors.Is(err, cli.ErrUsage) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s=%q: %v; want %q", tc.k, tc.v, err, tc.want)
		}
	}
	var out, errs bytes.Buffer
	t.Setenv("ZVFSERVE_MAX_VERTICES", "lots")
	if code := run(context.Background(), []string{"serve", graphStore}, &out, &errs); code != 2 || !strings.Contains(errs.String(), "ZVFSERVE_MAX_VERTICES") {
		t.Fatalf("serve with a malformed variable: exit %d, %s", code, errs.String())
	}
}

// TestServeLinkedRootRepointed: the store served is a link (current ->
// v1); re-pointed to another store (current -> v2), the running server
// answers v2's descriptor after its next check. This goes through serve's
// own wiring (metrics wrapper and all), which must keep the local store's
// ability to re-resolve its root.
func TestServeLinkedRootRepointed(t *testing.T) {
	// The link points at the committed fixtures (relative, as ln -s v1
	// current makes it), which serve only reads: copying them was most
	// of this serial test.
	base := t.TempDir()
	target := func(fixture string) string {
		abs, err := filepath.Abs(fixture)
		if err != nil {
			t.Fatal(err)
		}
		rel, err := filepath.Rel(base, abs)
		if err != nil {
			t.Fatal(err)
		}
		return rel
	}
	v1, v2 := target(graphStore), target("../../testdata/zvf-reference/points_pyramid.zarrvectors")
	cur := filepath.Join(base, "current")
	if err := os.Symlink(v1, cur); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, "--revalidate", "20ms", "s="+cur)
	geometry := func() string {
		_, body, _ := httpGet(t, s.base+"/api/v1/stores/s")
		var d struct {
			GeometryTypes []string `json:"geometry_types"`
		}
		_ = json.Unmarshal([]byte(body), &d)
		return strings.Join(d.GeometryTypes, ",")
	}
	if g := geometry(); g != "graph" {
		t.Fatalf("v1 serves %q", g)
	}
	next := filepath.Join(base, "next")
	if err := os.Symlink(v2, next); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(next, cur); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); geometry() != "point_cloud"; {
		if time.Now().After(deadline) {
			t.Fatalf("still %q 10 s after the link moved", geometry())
		}
		time.Sleep(20 * time.Millisecond) // the server's check interval
	}
}

// TestServeWalkNamesRewrittenData: with --revalidate-walk (for owners who
// rewrite data in place), a server restarted after a chunk was rewritten
// with its metadata untouched names the new version apart from the old
// one, so a client's old ETag gets the answer, not a 304. Before, the
// first open named a version by its metadata alone.
func TestServeWalkNamesRewrittenData(t *testing.T) {
	store := zvftest.CopyTree(t, graphStore)
	const chunk = "/api/v1/stores/g/levels/0/chunks/3.4.2"
	etag := func() string {
		s := startServe(t, "--revalidate-walk", "1h", "g="+store)
		code, _, hdr := httpGet(t, s.base+chunk)
		if code != http.StatusOK || hdr.Get("ETag") == "" {
			t.Fatalf("%s: %d, ETag %q", chunk, code, hdr.Get("ETag"))
		}
		s.cancel()
		<-s.exited
		return hdr.Get("ETag")
	}
	before := etag()
	// The same bytes written anew, as a pipeline's rewrite of a chunk
	// does (a new file moved into place).
	p := filepath.Join(store, "0", "vertices", "3.4.2", "c", "0")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p+".new", b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p+".new", p); err != nil {
		t.Fatal(err)
	}
	if after := etag(); after == before {
		t.Errorf("the rewritten store is named %s, as before the rewrite", before)
	}
}
