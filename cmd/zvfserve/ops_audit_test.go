package main

import (
	"bytes"
	"context"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// TestServeRevalidateWalkNeedsRevalidate: --revalidate-walk with
// --revalidate 0 is a command-line mistake (exit 2): with --revalidate 0
// stores are served as immutable and nothing is checked, so the walk the
// operator asked for never ran, and nothing said so.
func TestServeRevalidateWalkNeedsRevalidate(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var out, errs bytes.Buffer
	code := run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--revalidate", "0", "--revalidate-walk", "1m", graphStore}, &out, &errs)
	if code != 2 || !strings.Contains(errs.String(), "--revalidate-walk") || !strings.Contains(errs.String(), "--revalidate 0") {
		t.Fatalf("--revalidate 0 --revalidate-walk 1m: exit %d (want 2, naming both): %s", code, errs.String())
	}
}

// stallingStore makes every call of the store it wraps wait until hang is
// closed, or until its context ends (as a backend that accepts
// connections and never answers does: the SDKs honour ctx).
type stallingStore struct {
	storage.Store
	hang    chan struct{}
	entered chan struct{} // closed at the first stalled call
	once    sync.Once
}

func (s *stallingStore) wait(ctx context.Context) error {
	s.once.Do(func() { close(s.entered) })
	select {
	case <-s.hang:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *stallingStore) Get(ctx context.Context, key string, o storage.ReadOptions) (storage.Object, error) {
	if err := s.wait(ctx); err != nil {
		return storage.Object{}, err
	}
	return s.Store.Get(ctx, key, o)
}

func (s *stallingStore) List(ctx context.Context, prefix string) (storage.Listing, error) {
	if err := s.wait(ctx); err != nil {
		return storage.Listing{}, err
	}
	return s.Store.List(ctx, prefix)
}

func (s *stallingStore) Stat(ctx context.Context, key string) (storage.Attrs, error) {
	if err := s.wait(ctx); err != nil {
		return storage.Attrs{}, err
	}
	return s.Store.Stat(ctx, key)
}

// TestServeStartsBesideAHungStore: a store whose backend never answers at
// start keeps neither serve from listening nor the other stores from
// serving: past the start wait, serve listens, the other store answers,
// the hung one answers 502 and /readyz names it; once its backend answers,
// a check opens it. serve used to open every store before it listened, so
// one backend that hung kept the whole replica (its /healthz too) down:
// Kubernetes' liveness probe restarted it, over and over.
func TestServeStartsBesideAHungStore(t *testing.T) {
	t.Parallel()
	stall := &stallingStore{hang: make(chan struct{}), entered: make(chan struct{})}
	var n atomic.Int32
	wrap := func(st storage.Store) storage.Store {
		if n.Add(1) == 2 { // the second STORE: "hung"
			stall.Store = st
			return stall
		}
		return st
	}
	hung := zvftest.CopyTree(t, graphStore)
	start := time.Now()
	// wrapArg: the backend hangs from the first call serve makes, the
	// listing that tells a store from a folder of stores.
	s := startServeWith(t, serveHooks{wrapArg: wrap}, "--start-wait", "300ms", "--revalidate", "100ms", "good="+graphStore, "hung="+hung)
	s.exitsClean(t)
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("serve listened %v after it started", took)
	}
	const q = "/bbox?min=390,223,585&max=480,313,675"
	if code, body, _ := httpGet(t, s.base+"/api/v1/stores/good"+q); code != http.StatusOK {
		t.Fatalf("the good store: %d %.200s", code, body)
	}
	if code, body, _ := httpGet(t, s.base+"/api/v1/stores/hung"+q); code != http.StatusBadGateway || !strings.Contains(body, "backend-unavailable") {
		t.Fatalf("the hung store: %d %.300s", code, body)
	}
	if code, body, _ := httpGet(t, s.base+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz: %d %q", code, body)
	}
	if code, body, _ := httpGet(t, s.base+"/readyz"); code != http.StatusServiceUnavailable || body != "1 of 2 stores not serving: hung\n" {
		t.Fatalf("/readyz: %d %q", code, body)
	}
	// The line names the stores still opening when serve listens: hung,
	// and on a loaded machine good too (its open gets a quarter of the
	// 300 ms start wait: CI at load 12 named "good, hung").
	opening := regexp.MustCompile(`stores still open[^\n]* stores=("[^"\n]*\bhung\b[^"\n]*"|hung)( |\n)`)
	if !strings.Contains(s.errs.String(), "to tell a store from a folder of stores") || !strings.Contains(s.errs.String(), `arg="hung=`) ||
		!opening.MatchString(s.errs.String()) {
		t.Errorf("the log does not name the store still opening: %s", s.errs.String())
	}
	close(stall.hang)
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, _, _ := httpGet(t, s.base+"/api/v1/stores/hung"+q)
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the store was not served once its backend answered: %d: %s", code, s.errs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, body, _ := httpGet(t, s.base+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz once both stores serve: %d %q", code, body)
	}
}

// TestServeTokenFromTheEnvironment: ZVFSERVE_TOKEN is taken as a token
// file is, without surrounding white space (a Kubernetes Secret made from a
// file carries its newline: that token could never be sent, and every
// request was a 401); set but blank — a template that lost its value —,
// it is an error, as an empty --token or token file is, not a server
// without authentication; so is a token-file setting that is empty, and a
// token no header can carry.
func TestServeTokenFromTheEnvironment(t *testing.T) {
	t.Run("newline", func(t *testing.T) {
		t.Setenv("ZVFSERVE_TOKEN", "env-tok-81\n")
		s := startServe(t, graphStore)
		s.exitsClean(t)
		for _, tc := range []struct {
			hdr  []string
			want int
		}{
			{nil, http.StatusUnauthorized},
			{[]string{"Authorization", "Bearer env-tok-8"}, http.StatusUnauthorized},
			{[]string{"Authorization", "Bearer env-tok-81"}, http.StatusOK},
		} {
			if code, body, _ := httpGet(t, s.base+"/api/v1/stores", tc.hdr...); code != tc.want {
				t.Errorf("%v: %d, want %d: %.200s", tc.hdr, code, tc.want, body)
			}
		}
	})
	for _, tc := range []struct {
		name, env, value string
		args             []string
		msg              string
	}{
		{"blank token", "ZVFSERVE_TOKEN", " \n", nil, "ZVFSERVE_TOKEN is empty"},
		{"empty token", "ZVFSERVE_TOKEN", "", nil, "ZVFSERVE_TOKEN is empty"},
		{"empty token file", "ZVFSERVE_TOKEN_FILE", "", nil, "--token-file"},
		{"empty token file flag", "", "", []string{"--token-file", ""}, "--token-file"},
		{"control character", "", "", []string{"--token", "a\x01b"}, "--token"},
		{"control character in the variable", "ZVFSERVE_TOKEN", "a\tb", nil, "ZVFSERVE_TOKEN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv(tc.env, tc.value)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			var out, errs bytes.Buffer
			code := run(ctx, append(append([]string{"serve", "--addr", "127.0.0.1:0"}, tc.args...), graphStore), &out, &errs)
			if code != 2 || !strings.Contains(errs.String(), tc.msg) {
				t.Fatalf("exit %d, want 2 naming %q: %s", code, tc.msg, errs.String())
			}
		})
	}
}

// TestServeUsageErrorsHideStoreQueries: the errors about a STORE argument
// name it without its query string, as every other error about a store
// URL does (its parameters may carry credentials: an endpoint's user and
// password); a bad name or two stores of one name printed the whole
// argument.
func TestServeUsageErrorsHideStoreQueries(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		msg  string
	}{
		{"bad name", []string{"bad name=s3://bucket/x?endpoint=http://key:secret-1@h:1&region=x"}, `(from "bad name=s3://bucket/x?…")`},
		{"same name", []string{"a=s3://b/x?endpoint=http://key:secret-1@h:1&region=x", "a=s3://b/y?endpoint=http://key:secret-2@h:1&region=x"},
			`(from "a=s3://b/x?…" and "a=s3://b/y?…")`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var out, errs bytes.Buffer
			code := run(ctx, append([]string{"serve", "--addr", "127.0.0.1:0"}, tc.args...), &out, &errs)
			if code != 2 || strings.Contains(errs.String(), "secret") || !strings.Contains(errs.String(), tc.msg) {
				t.Fatalf("exit %d, want 2 with %s and no secret: %s", code, tc.msg, errs.String())
			}
		})
	}
}

// TestServeRefusesSettleZero: --settle 0 is refused (exit 2) rather than
// served as the 2 s default, which is what the reader made of a settle of
// 0 without a word: an operator who asked for new versions at once got
// them 2 s late.
func TestServeRefusesSettleZero(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var out, errs bytes.Buffer
	code := run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--settle", "0", graphStore}, &out, &errs)
	if code != 2 || !strings.Contains(errs.String(), "--settle") {
		t.Fatalf("--settle 0: exit %d, want 2 naming --settle: %s", code, errs.String())
	}
}
