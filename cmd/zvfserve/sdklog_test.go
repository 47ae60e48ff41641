package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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

// TestToolsLibraryLogsGoThroughSlog: the commands other than serve route
// what libraries log through one slog text logger on standard error, and
// standard output keeps only the answer. zarr-cat reads an array from a
// fake S3 whose credentials come from a fake instance metadata service
// that refuses the IMDSv2 token: the AWS SDK warns that it falls back to
// IMDSv1, then gets a role's credentials and the read succeeds. Before,
// the SDK printed "SDK 2026/… WARN falling back to IMDSv1" in a format of
// its own, past any logger.
func TestToolsLibraryLogsGoThroughSlog(t *testing.T) {
	t.Parallel()
	imds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPut:
			http.Error(w, "forbidden", http.StatusForbidden) // no IMDSv2 token
		case r.URL.Path == "/latest/meta-data/iam/security-credentials/":
			_, _ = io.WriteString(w, "role")
		case r.URL.Path == "/latest/meta-data/iam/security-credentials/role":
			_, _ = io.WriteString(w, `{"Code":"Success","Type":"AWS-HMAC","AccessKeyId":"AKIDTEST","SecretAccessKey":"secret","Token":"token","Expiration":"2099-01-01T00:00:00Z","LastUpdated":"2026-01-01T00:00:00Z"}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer imds.Close()
	objs := map[string]string{
		"/bucket/arr/zarr.json": `{"zarr_format":3,"node_type":"array","shape":[3],"data_type":"int32",` +
			`"chunk_grid":{"name":"regular","configuration":{"chunk_shape":[3]}},` +
			`"chunk_key_encoding":{"name":"default","configuration":{"separator":"/"}},` +
			`"fill_value":7,"codecs":[{"name":"bytes","configuration":{"endian":"little"}}]}`,
	}
	s3 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := objs[r.URL.Path]
		if !ok {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchKey</Code></Error>`)
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Header().Set("ETag", `"e"`)
		w.Header().Set("Last-Modified", "Tue, 02 Jan 2024 03:04:05 GMT")
		if r.Method != http.MethodHead {
			_, _ = io.WriteString(w, body)
		}
	}))
	defer s3.Close()

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
	cmd := exec.Command(os.Args[0], "zarr-cat", "s3://bucket/arr?region=us-east-1&use_path_style=true&endpoint="+s3.URL)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("zarr-cat: %v; stderr:\n%s", err, stderr.String())
	}
	var answer struct{ Values []int }
	if err := json.Unmarshal(stdout.Bytes(), &answer); err != nil || len(answer.Values) != 3 || answer.Values[0] != 7 {
		t.Fatalf("stdout is not zarr-cat's JSON answer alone (%v): %q", err, stdout.String())
	}
	out := stderr.String()
	if !strings.Contains(out, "IMDSv1") {
		t.Fatalf("the SDK did not log its IMDSv1 fallback; the test does not exercise what it should. stderr:\n%s", out)
	}
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if !strings.HasPrefix(line, "level=WARN msg=") || !strings.HasSuffix(line, " from=aws-sdk") {
			t.Errorf("stderr line %q: want slog text, level=WARN msg=… from=aws-sdk", line)
		}
	}
}
