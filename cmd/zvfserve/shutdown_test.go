package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/cmd/internal/cli"
	"github.com/zvfserve/zvfserve/zvf/storage"
)

// hangingStore makes reads of chunk data (a chunk, or the listing of a
// chunk folder: the owners map lists the manifests' chunks), and the
// other listings (a store check), block until released — ignoring their
// context, as a read stuck in the kernel (a FIFO, a dead NFS mount) does.
type hangingStore struct {
	storage.Store
	armed   chan struct{} // closed: hang from now on
	release chan struct{}
	entered chan string // each hung call: "read" (a request's) or "walk" (a check's)
}

func (h *hangingStore) hang(op, key string) {
	select {
	case <-h.armed:
	default:
		return
	}
	switch data := strings.Contains(key, "/c/"); {
	case op == "get" && !data:
		return
	case op == "get" || data:
		op = "read"
	}
	h.entered <- op
	<-h.release
}

func (h *hangingStore) Get(ctx context.Context, key string, o storage.ReadOptions) (storage.Object, error) {
	h.hang("get", key)
	return h.Store.Get(ctx, key, o)
}

func (h *hangingStore) Walk(ctx context.Context, prefix string, fn func(string, storage.Attrs) error) error {
	h.hang("walk", prefix)
	return h.Store.Walk(ctx, prefix, fn)
}

func (h *hangingStore) List(ctx context.Context, prefix string) (storage.Listing, error) {
	h.hang("walk", prefix)
	return h.Store.List(ctx, prefix)
}

// TestServeShutdownWithHungRead: SIGTERM makes serve stop being ready,
// gives in-flight requests the grace period, then returns whatever the
// storage does — here a bbox read and the periodic store check both hang
// for good, deaf to cancellation.
func TestServeShutdownWithHungRead(t *testing.T) {
	t.Parallel()
	h := &hangingStore{armed: make(chan struct{}), release: make(chan struct{}), entered: make(chan string, 64)}
	var once sync.Once
	wrap := func(st storage.Store) storage.Store {
		h.Store = st
		return h
	}
	s := startServeWith(t, serveHooks{wrapStore: wrap}, "--shutdown-grace", "1s", "--revalidate", "20ms", graphStore)
	// Released at cleanup (before startServe's cleanup waits for serve to
	// return), so that the stuck goroutines can finish.
	t.Cleanup(func() { once.Do(func() { close(h.release) }) })
	close(h.armed)
	clientDone := make(chan error, 1)
	go func() {
		resp, err := http.Get(s.base + "/api/v1/stores/graph/bbox?min=390,223,585&max=480,313,675")
		if err == nil {
			resp.Body.Close()
		}
		clientDone <- err
	}()
	seen := map[string]bool{}
	for !seen["read"] || !seen["walk"] {
		select {
		case op := <-h.entered:
			seen[op] = true
		case <-time.After(10 * time.Second):
			t.Fatalf("hung calls seen: %v", seen)
		}
	}
	start := time.Now()
	s.cancel() // SIGTERM
	select {
	case code := <-s.done:
		s.done <- code
		took := time.Since(start)
		if took > 3*time.Second {
			t.Errorf("serve returned %v after SIGTERM with a 1 s grace period", took)
		}
		if code != 1 || !strings.Contains(s.errs.String(), "grace period") {
			t.Errorf("exit %d: %s", code, s.errs.String())
		}
		for _, want := range []string{"shutting down", "grace period over"} {
			if !strings.Contains(s.errs.String(), want) {
				t.Errorf("the log does not say %q: %s", want, s.errs.String())
			}
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not return 10 s after SIGTERM with a 1 s grace period")
	}
	select {
	case err := <-clientDone:
		if err == nil {
			t.Error("the cut request looked like a whole answer")
		}
	case <-time.After(5 * time.Second):
		t.Error("the client of the hung request was left waiting")
	}
}

// TestServeShutdownDelay: with --shutdown-delay, SIGTERM first turns
// /readyz to 503 while /healthz stays 200 and the API still answers (each
// answer closing its connection), so a balancer polling readiness takes
// the replica out before it refuses connections; then serve exits 0.
// Without the delay the listener closed at once: a request that a
// balancer sent on before its next readiness poll was refused.
func TestServeShutdownDelay(t *testing.T) {
	t.Parallel()
	const delay = 2 * time.Second
	s := startServe(t, "--shutdown-delay", delay.String(), "--shutdown-grace", "1s", graphStore)
	c := &http.Client{Transport: &http.Transport{}, Timeout: 5 * time.Second}
	// closed: the server ended the answer's connection (the client asked to keep it).
	get := func(path string) (code int, closed bool, err error) {
		resp, err := c.Get(s.base + path)
		if err != nil {
			return 0, false, err
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Close, nil
	}
	start := time.Now()
	s.cancel() // SIGTERM
	// /readyz turns false before anything else changes; poll it within the delay.
	for {
		code, _, err := get("/readyz")
		if err != nil {
			t.Fatalf("/readyz %v after SIGTERM: %v (the listener must stay open for --shutdown-delay)", time.Since(start), err)
		}
		if code == http.StatusServiceUnavailable {
			break
		}
		if time.Since(start) > delay/2 {
			t.Fatalf("/readyz still %d %v after SIGTERM", code, time.Since(start))
		}
	}
	tests := []struct {
		path string
		want int
	}{
		{"/healthz", http.StatusOK},
		{"/readyz", http.StatusServiceUnavailable},
		{"/api/v1/stores/graph", http.StatusOK},
	}
	for _, tc := range tests {
		code, closed, err := get(tc.path)
		if err != nil || code != tc.want {
			t.Errorf("%s while draining: %d %v, want %d", tc.path, code, err, tc.want)
			continue
		}
		if !closed {
			t.Errorf("%s while draining kept its connection open; want it closed (keep-alive off, so clients reconnect elsewhere)", tc.path)
		}
	}
	select {
	case code := <-s.done:
		s.done <- code
		if took := time.Since(start); code != 0 || took < delay || took > delay+3*time.Second {
			t.Errorf("serve returned %d %v after SIGTERM, want 0 after the %v delay: %s", code, took, delay, s.errs.String())
		}
	case <-time.After(delay + 10*time.Second):
		t.Fatal("serve did not return after the delay")
	}
}

// TestServeOutlivesItsLogReader: serve keeps serving when whatever reads
// its standard error goes away (a log shipper restarting, `| tee` killed):
// logging is best effort, and a write to the closed pipe must not end the
// process with SIGPIPE — also when it was started with SIGPIPE ignored, as
// systemd's IgnoreSIGPIPE=yes does (the Go runtime installs its own
// handler regardless). Then SIGTERM still ends it cleanly.
func TestServeOutlivesItsLogReader(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		ignored bool
	}{{"default", false}, {"started with SIGPIPE ignored", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := []string{"serve", "--addr", "127.0.0.1:0", "--revalidate", "0", graphStore}
			cmd := exec.Command(os.Args[0], args...)
			if tc.ignored {
				// An ignored signal stays ignored across exec.
				cmd = exec.Command("/bin/sh", append([]string{"-c", `trap "" PIPE; exec "$0" "$@"`, os.Args[0]}, args...)...)
			}
			cmd.Env = append(os.Environ(), "ZVFSERVE_TEST_AS_COMMAND=1")
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan struct{}) // closed once waitErr is set
			var waitErr error
			base := make(chan string, 1)
			go func() {
				sc := bufio.NewScanner(stdout)
				for sc.Scan() {
					if m := listening.FindStringSubmatch(sc.Text()); m != nil {
						base <- m[1]
						break
					}
				}
				_, _ = io.Copy(io.Discard, stdout)
				waitErr = cmd.Wait()
				close(exited)
			}()
			t.Cleanup(func() {
				_ = cmd.Process.Kill()
				<-exited
			})
			var url string
			select {
			case url = <-base:
			case <-exited:
				t.Fatalf("serve exited before listening: %v", waitErr)
			case <-time.After(30 * time.Second):
				t.Fatal("serve did not start")
			}
			// The log reader goes away: every access-log line from now on
			// is a write to a pipe nobody reads.
			if err := stderr.Close(); err != nil {
				t.Fatal(err)
			}
			c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
			for i := 0; i < 5; i++ {
				resp, err := c.Get(url + "/api/v1/stores/graph")
				if err != nil {
					select {
					case <-exited:
						t.Fatalf("request %d: serve is gone (%v)", i, waitErr)
					case <-time.After(time.Second):
					}
					t.Fatalf("request %d: %v", i, err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("request %d: status %d", i, resp.StatusCode)
				}
			}
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			select {
			case <-exited:
				if waitErr != nil {
					t.Fatalf("after SIGTERM: %v", waitErr)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("serve still running 30 s after SIGTERM")
			}
		})
	}
}

// TestServeSecondSignalExitsAtOnce: the first SIGINT starts a graceful
// shutdown (here a 60 s --shutdown-delay); a second one ends the process
// at once, as an operator pressing Ctrl-C twice expects. Before, the
// second signal was swallowed and serve drained for the whole delay.
func TestServeSecondSignalExitsAtOnce(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(os.Args[0], "serve", "--addr", "127.0.0.1:0", "--revalidate", "0", "--shutdown-delay", "60s", graphStore)
	cmd.Env = append(os.Environ(), "ZVFSERVE_TEST_AS_COMMAND=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 64)
	exited := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	await := func(what string) {
		t.Helper()
		timeout := time.After(30 * time.Second)
		for {
			select {
			case l := <-lines:
				if strings.Contains(l, what) {
					return
				}
			case err := <-exited:
				t.Fatalf("serve exited before %q: %v", what, err)
			case <-timeout:
				t.Fatalf("no %q in serve's log", what)
			}
		}
	}
	await("zvfserve started")
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	await("draining")
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 128+int(syscall.SIGINT) {
			t.Errorf("after the second signal: %v, want exit status 130 (killed by SIGINT)", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve still draining 10 s after a second SIGINT")
	}
}

// TestInterruptedBeforeStarted: Ctrl-C while serve builds the demo (or
// demo writes it) used to end with "zvfserve serve: demo: write cells:
// context canceled" and exit 1, a Go error for what the user did. Now
// demo says it was stopped by the signal, and exits as a shell expects of
// a process a signal ended (128 + the signal's number); serve, whose
// work is to run until it is signalled, stops as it does once started:
// exit 0, saying it stopped before listening.
func TestInterruptedBeforeStarted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		sig  syscall.Signal
		args []string
		want string
		code int
	}{
		{syscall.SIGINT, []string{"serve", "--addr", "127.0.0.1:0"}, "msg=\"stopped before listening: signalled while the stores were being listed and opened\"\n", 0},
		{syscall.SIGTERM, []string{"demo", filepath.Join(t.TempDir(), "out")}, "zvfserve demo: stopped by SIGTERM before it finished\n", 143},
	} {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(&cli.Interrupted{Signal: tc.sig})
		var out, errs bytes.Buffer
		code := run(ctx, tc.args, &out, &errs)
		if code != tc.code || !strings.HasSuffix(errs.String(), tc.want) || strings.Contains(errs.String(), "context canceled") {
			t.Errorf("%s: exit %d, stderr %q; want %d, %q", tc.args[0], code, errs.String(), tc.code, tc.want)
		}
	}
}
