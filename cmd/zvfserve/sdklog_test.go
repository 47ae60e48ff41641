package main

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeLibraryLogsFollowLogFormat: with --log-format json every line
// serve writes on standard error is JSON, the AWS SDK's included. Here
// the SDK's credential chain reaches an instance metadata service (a
// local fake) that refuses the IMDSv2 token, so the SDK warns that it
// falls back to IMDSv1, and then finds no role: the store does not open.
// No network is used: the bucket's endpoint is a closed local port. Before,
// the SDK printed "SDK 2026/… WARN falling back to IMDSv1" as plain text
// straight to stderr, past --log-format and --log-level.
func TestServeLibraryLogsFollowLogFormat(t *testing.T) {
	t.Parallel()
	imds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			http.Error(w, "forbidden", http.StatusForbidden) // no IMDSv2 token
			return
		}
		http.NotFound(w, r) // no role
	}))
	defer imds.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + closed.Addr().String()
	_ = closed.Close()

	dir := t.TempDir()
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") && !strings.HasPrefix(kv, "ZVFSERVE_") && !strings.HasPrefix(kv, "HOME=") {
			env = append(env, kv)
		}
	}
	env = append(env, "ZVFSERVE_TEST_AS_COMMAND=1", "HOME="+dir,
		"AWS_CONFIG_FILE="+filepath.Join(dir, "config"), "AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(dir, "credentials"),
		"AWS_EC2_METADATA_SERVICE_ENDPOINT="+imds.URL, "AWS_RETRY_MODE=standard", "AWS_MAX_ATTEMPTS=1")
	cmd := exec.Command(os.Args[0], "serve", "--addr", "127.0.0.1:0", "--log-format", "json", "--revalidate", "0",
		"s3://bucket/store.zarrvectors?region=us-east-1&use_path_style=true&endpoint="+endpoint)
	cmd.Env = env
	// Read while the child writes them: buffers that lock.
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// It either gives up on the store at start (an error, exit) or serves
	// it as its error; then it is stopped.
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		select {
		case <-done:
			break wait
		case <-tick.C:
			if strings.Contains(stdout.String(), "serving") {
				_ = cmd.Process.Signal(syscall.SIGTERM)
				<-done
				break wait
			}
		case <-deadline:
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("serve neither exited nor served within 30 s; stderr:\n%s", stderr.String())
		}
	}
	out := stderr.String()
	if !strings.Contains(out, "IMDSv1") {
		t.Fatalf("the SDK did not log its IMDSv1 fallback; the test does not exercise what it should. stderr:\n%s", out)
	}
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Errorf("a stderr line is not JSON (--log-format json): %q", line)
		}
	}
}
