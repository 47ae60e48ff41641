package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/zvfserve/zvfserve/zvf/demo"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// The parts of the fleet test: MinIO (started by .ci/run), zvfserve
// replicas as child processes of the test binary, nginx as an unprivileged
// child with its own files, and the stores they serve.

// fleetEnv is what the fleet test needs from the machine.
type fleetEnv struct {
	endpoint string // MinIO, http://127.0.0.1:9123 in CI
	nginx    string // the nginx binary
	bin      string // this test binary, which is zvfserve with ZVFSERVE_TEST_AS_COMMAND=1
}

// needFleet finds MinIO and nginx, or skips the test saying what is
// missing (fails instead under ZVFSERVE_REQUIRE_FLEET=1, as in CI). The
// fleet is an end-to-end test: it runs with ZVFSERVE_E2E=1 (or
// ZVFSERVE_REQUIRE_FLEET=1).
func needFleet(t *testing.T) fleetEnv {
	t.Helper()
	zvftest.EndToEnd(t, "ZVFSERVE_REQUIRE_FLEET")
	var missing []string
	e := fleetEnv{endpoint: os.Getenv("ZVFSERVE_S3_ENDPOINT")}
	if e.endpoint == "" {
		missing = append(missing, "an S3 endpoint (ZVFSERVE_S3_ENDPOINT with AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY; .ci/run starts MinIO)")
	} else if resp, err := http.Get(e.endpoint + "/minio/health/live"); err != nil {
		missing = append(missing, fmt.Sprintf("a live S3 endpoint at %s (%v)", e.endpoint, err))
	} else {
		resp.Body.Close()
	}
	for _, p := range []string{"nginx", "/usr/sbin/nginx"} {
		if f, err := exec.LookPath(p); err == nil {
			e.nginx = f
			break
		}
	}
	if e.nginx == "" {
		missing = append(missing, "nginx (Debian package nginx; .ci/run installs it)")
	}
	if len(missing) > 0 {
		msg := "the fleet test needs " + strings.Join(missing, " and ")
		if os.Getenv("ZVFSERVE_REQUIRE_FLEET") == "1" {
			t.Fatal(msg + ", and ZVFSERVE_REQUIRE_FLEET=1")
		}
		t.Skip(msg)
	}
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	e.bin = bin
	return e
}

// s3Query is the query string of an s3:// URL for the endpoint.
func (e fleetEnv) s3Query() string {
	return "?endpoint=" + url.QueryEscape(e.endpoint) + "&use_path_style=true&region=us-east-1"
}

// freePort reserves a loopback port number. Replicas keep theirs across a
// restart, since nginx names them by address.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// replica is one zvfserve serve process on fixed loopback ports.
type replica struct {
	name        string
	port, admin int
	args        []string // flags and stores, without the addresses
	logDir      string
	bin         string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when the current process has been waited for
	state  *os.ProcessState
	starts int
}

func (r *replica) addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }
func (r *replica) url() string  { return "http://" + r.addr() }

// start runs the process and waits until it answers /readyz.
func (r *replica) start(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	r.starts++
	logf, err := os.Create(filepath.Join(r.logDir, fmt.Sprintf("%s.%d.log", r.name, r.starts)))
	if err != nil {
		r.mu.Unlock()
		t.Fatal(err)
	}
	args := append([]string{"serve", "--addr", r.addr(), "--admin-addr", "127.0.0.1:" + strconv.Itoa(r.admin)}, r.args...)
	cmd := exec.Command(r.bin, args...)
	cmd.Env = append(os.Environ(), "ZVFSERVE_TEST_AS_COMMAND=1")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		r.mu.Unlock()
		t.Fatal(err)
	}
	exited := make(chan struct{})
	r.cmd, r.exited = cmd, exited
	r.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		logf.Close()
		r.mu.Lock()
		r.state = cmd.ProcessState
		r.mu.Unlock()
		close(exited)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(r.url() + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-exited:
			t.Fatalf("replica %s exited at start: %s", r.name, r.logs())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica %s not ready after 30 s: %s", r.name, r.logs())
		}
	}
}

// signal sends sig to the running process.
func (r *replica) signal(sig syscall.Signal) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil || r.cmd.Process == nil {
		return errors.New("not started")
	}
	return r.cmd.Process.Signal(sig)
}

// wait waits for the current process to exit, at most d.
func (r *replica) wait(d time.Duration) (*os.ProcessState, bool) {
	r.mu.Lock()
	exited := r.exited
	r.mu.Unlock()
	select {
	case <-exited:
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.state, true
	case <-time.After(d):
		return nil, false
	}
}

// stop kills the process if it runs and waits for it.
func (r *replica) stop() {
	if r.signal(syscall.SIGKILL) == nil {
		r.wait(10 * time.Second)
	}
}

// logs is the current process's log, for failure messages.
func (r *replica) logs() string {
	r.mu.Lock()
	n := r.starts
	r.mu.Unlock()
	b, _ := os.ReadFile(filepath.Join(r.logDir, fmt.Sprintf("%s.%d.log", r.name, n)))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// metrics reads the replica's Prometheus counters named in names.
func (r *replica) metrics(names ...string) (map[string]float64, error) {
	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(r.admin) + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 || !slices.Contains(names, f[0]) {
			continue
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			return nil, fmt.Errorf("metric %s: %v", f[0], err)
		}
		out[f[0]] = v
	}
	return out, sc.Err()
}

// rssPeak is the process's peak resident set (VmHWM), in bytes.
func (r *replica) rssPeak() int64 {
	r.mu.Lock()
	pid := 0
	if r.cmd != nil && r.cmd.Process != nil {
		pid = r.cmd.Process.Pid
	}
	r.mu.Unlock()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	m := regexp.MustCompile(`VmHWM:\s+(\d+) kB`).FindSubmatch(b)
	if m == nil {
		return 0
	}
	n, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return n << 10
}

// nginxProc is nginx running the configuration of docs/deploy/nginx.conf
// as an unprivileged child with its own pid, log and temp files.
type nginxProc struct {
	port   int
	dir    string
	cmd    *exec.Cmd
	exited chan struct{}
}

// deployedNginxConf is the operator's configuration the test runs.
const deployedNginxConf = "../../docs/deploy/nginx.conf"

// renderNginx turns the deployed configuration into the test's: the
// upstream servers become the replicas' addresses, the listen port a
// loopback one; roundRobin drops the hash line (nginx's default balancing,
// for the comparison). Each replacement must match exactly as often as the
// file says, so the file the operator reads is the file the test runs.
func renderNginx(conf string, port int, upstreams []string, roundRobin bool) (string, error) {
	server := regexp.MustCompile(`(?m)^(\s*server\s+)[^\s{;]+((?:\s[^;\n]*)?;)`)
	if n := len(server.FindAllStringIndex(conf, -1)); n != len(upstreams) {
		return "", fmt.Errorf("%s has %d upstream server lines, want %d", deployedNginxConf, n, len(upstreams))
	}
	i := 0
	conf = server.ReplaceAllStringFunc(conf, func(line string) string {
		m := server.FindStringSubmatch(line)
		i++
		return m[1] + upstreams[i-1] + m[2]
	})
	listen := regexp.MustCompile(`(?m)^(\s*listen\s+)80;`)
	if n := len(listen.FindAllStringIndex(conf, -1)); n != 1 {
		return "", fmt.Errorf("%s has %d 'listen 80;' lines, want 1", deployedNginxConf, n)
	}
	conf = listen.ReplaceAllString(conf, "${1}127.0.0.1:"+strconv.Itoa(port)+";")
	hash := regexp.MustCompile(`(?m)^\s*hash \$request_uri consistent;\n`)
	if n := len(hash.FindAllStringIndex(conf, -1)); n != 1 {
		return "", fmt.Errorf("%s has %d 'hash $request_uri consistent;' lines, want 1", deployedNginxConf, n)
	}
	if roundRobin {
		conf = hash.ReplaceAllString(conf, "")
	}
	return conf, nil
}

// startNginx runs nginx in front of upstreams. Every response carries the
// upstream that answered it (X-Fleet-Upstream, added by the test's outer
// configuration, not the deployed one).
func startNginx(t *testing.T, bin string, upstreams []string, roundRobin bool) *nginxProc {
	t.Helper()
	conf, err := os.ReadFile(deployedNginxConf)
	if err != nil {
		t.Fatal(err)
	}
	n := &nginxProc{port: freePort(t), dir: t.TempDir()}
	site, err := renderNginx(string(conf), n.port, upstreams, roundRobin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(n.dir, "zvfserve.conf"), []byte(site), 0o644); err != nil {
		t.Fatal(err)
	}
	// The http-level frame a distribution's nginx.conf gives, with every
	// file in the test's folder.
	main := fmt.Sprintf(`daemon off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 1024; }
http {
    access_log %[1]s/access.log;
    client_body_temp_path %[1]s/client_body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
    add_header X-Fleet-Upstream $upstream_addr always;
    include %[1]s/zvfserve.conf;
}
`, n.dir)
	if err := os.WriteFile(filepath.Join(n.dir, "nginx.conf"), []byte(main), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "-t", "-p", n.dir, "-c", filepath.Join(n.dir, "nginx.conf")).CombinedOutput()
	if err != nil {
		t.Fatalf("nginx -t: %v: %s", err, out)
	}
	n.cmd = exec.Command(bin, "-p", n.dir, "-c", filepath.Join(n.dir, "nginx.conf"))
	logf, err := os.Create(filepath.Join(n.dir, "stderr.log"))
	if err != nil {
		t.Fatal(err)
	}
	n.cmd.Stdout, n.cmd.Stderr = logf, logf
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n.exited = make(chan struct{})
	go func() {
		_ = n.cmd.Wait()
		logf.Close()
		close(n.exited)
	}()
	t.Cleanup(func() {
		_ = n.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-n.exited:
		case <-time.After(10 * time.Second):
			_ = n.cmd.Process.Kill()
			<-n.exited
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", n.addr())
		if err == nil {
			c.Close()
			return n
		}
		select {
		case <-n.exited:
			b, _ := os.ReadFile(filepath.Join(n.dir, "error.log"))
			t.Fatalf("nginx exited: %s", b)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("nginx does not listen after 10 s")
		}
	}
}

func (n *nginxProc) addr() string { return "127.0.0.1:" + strconv.Itoa(n.port) }
func (n *nginxProc) url() string  { return "http://" + n.addr() }

// storeObjects is a store's objects, key → bytes.
type storeObjects map[string][]byte

// demoObjects builds the demo scene and returns the named stores' objects.
func demoObjects(t *testing.T, o demo.Options, names ...string) map[string]storeObjects {
	t.Helper()
	ctx := context.Background()
	mem := zvftest.Store(t, "mem://")
	infos, err := demo.Build(ctx, mem, o)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]storeObjects{}
	for _, in := range infos {
		if !slices.Contains(names, in.Name) {
			continue
		}
		objs := storeObjects{}
		sub := storage.Sub(mem, in.Prefix)
		err := sub.Walk(ctx, "", func(key string, _ storage.Attrs) error {
			b, err := storage.ReadAll(ctx, sub, key, 1<<30)
			objs[key] = b
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		out[in.Name] = objs
	}
	if len(out) != len(names) {
		t.Fatalf("demo built %v, want %v", slices.Collect(maps.Keys(out)), names)
	}
	return out
}

// upload puts objs under w in key order, as `aws s3 sync` and rclone do,
// with conc puts at once (aws s3 sync's default is 10), then deletes the
// keys of stale that objs lacks. It returns when the last delete is done.
func upload(ctx context.Context, w storage.Writer, objs storeObjects, stale storeObjects, conc int) error {
	keys := slices.Sorted(maps.Keys(objs))
	for _, k := range slices.Sorted(maps.Keys(stale)) {
		if _, ok := objs[k]; !ok {
			keys = append(keys, k)
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(conc)
	for i, k := range keys {
		if i == len(objs) {
			// Deletes start once every put is done, as sync tools do.
			if err := g.Wait(); err != nil {
				return err
			}
			g, gctx = errgroup.WithContext(ctx)
			g.SetLimit(conc)
		}
		g.Go(func() error {
			if b, ok := objs[k]; ok {
				return w.Put(gctx, k, b)
			}
			return w.Delete(gctx, k)
		})
	}
	return g.Wait()
}
