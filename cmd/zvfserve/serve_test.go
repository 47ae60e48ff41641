package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// syncBuffer collects output written by the server goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestServeBadStoreBesideGood: serve starts with a store that does not
// open, serves it as a problem beside a healthy one, and picks it up by
// itself (--revalidate) once it is fixed.
func TestServeBadStoreBesideGood(t *testing.T) {
	good := "../../testdata/zvf-reference/graph.zarrvectors"
	bad := zvftest.CopyTree(t, good)
	root := filepath.Join(bad, "zarr.json")
	orig, err := os.ReadFile(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(root, []byte(strings.Replace(string(orig), `"0.7.0"`, `"0.9.0"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var out, errs syncBuffer
	done := make(chan int)
	go func() {
		done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--revalidate", "50ms", "good=" + good, "bad=" + bad}, &out, &errs)
	}()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("serve exited %d: %s", code, errs.String())
		}
	}()
	addr := regexp.MustCompile(`on (http://[^/\s]+)/`)
	var base string
	for deadline := time.Now().Add(10 * time.Second); base == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m := addr.FindStringSubmatch(out.String()); m != nil {
			base = m[1]
		}
	}
	if base == "" {
		t.Fatalf("server did not start: %s %s", out.String(), errs.String())
	}
	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	const q = "/bbox?min=390,223,585&max=480,313,675"
	if code, body := get("/api/v1/stores/good" + q); code != 200 || !strings.Contains(body, `"count":79`) {
		t.Fatalf("good store: %d %.200s", code, body)
	}
	if code, body := get("/api/v1/stores/bad" + q); code != http.StatusUnprocessableEntity || !strings.Contains(body, "zv_version") {
		t.Fatalf("bad store: %d %.200s", code, body)
	}
	if !strings.Contains(errs.String(), "store does not open") {
		t.Fatalf("the log does not say which store failed: %s", errs.String())
	}
	if err := os.WriteFile(root, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if code, body := get("/api/v1/stores/bad" + q); code == 200 && strings.Contains(body, `"count":79`) {
			return
		}
	}
	t.Fatal("the fixed store was not picked up")
}

func TestReadConcurrency(t *testing.T) {
	for _, tc := range []struct {
		flag   int
		target string
		want   int
	}{
		{0, "./data/x.zarrvectors", 8}, {0, "file:///data/x", 8}, {0, "mem://", 8},
		{0, "s3://bucket/x?region=us-east-1", 32}, {0, "gs://b/x", 32}, {0, "azblob://c/x", 32},
		{4, "s3://bucket/x", 4}, {64, "./x", 64},
	} {
		if got := readConcurrency(tc.flag, tc.target); got != tc.want {
			t.Errorf("readConcurrency(%d, %q) = %d, want %d", tc.flag, tc.target, got, tc.want)
		}
	}
}
