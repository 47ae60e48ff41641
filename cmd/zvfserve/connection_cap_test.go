package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
)

// TestConnectionCapSaysWhatFits: --max-connections is fitted to the
// open-file limit beside the descriptors kept for store reads and for
// connections past the cap. Where no value of it could fit (an object
// store's 64 × 32 reads kept under a limit of 1024), serve refused the
// default it was not given with "lower it", which cannot help; and an
// explicit value too large said "lower it" without saying to what. Now
// the refusal names the most that fits, or, when none does, the flags
// that make room (--max-concurrent, --read-concurrency) and the limit
// that would do. And where the defaults of those flags leave no room (an
// object store's 64 × 32 reads under 1,024), serve refused a new user on
// a stock machine: now the ones not given are lowered to fit, said in
// one line; given, they are kept, and the refusal stays.
func TestConnectionCapSaysWhatFits(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		limit uint64
		want  int      // the cap, when it starts
		says  []string // in the refusal, or in the log when it starts
		lacks []string // in neither
	}{
		{name: "local default lowered", args: []string{"/data/s"}, limit: 1024, want: 1024 - (64 + 64*8) - 84,
			says: []string{"max_connections=364"}},
		// 876 descriptors for reads and connections: at most half (438)
		// for reads, 13 slots × 32 reads; the rest for connections.
		{name: "object store default fitted", args: []string{"s3://b/s"}, limit: 1024, want: 876 - 13*32,
			says:  []string{"lowered to fit", "max_concurrent=13 ", "read_concurrency=32 ", "max_connections=460 ", "open_file_limit=1024"},
			lacks: []string{"--max-connections lowered"}},
		// Given, 64 slots stay: the reads are lowered (438 / 64 = 6, at
		// least 8), which still leaves 364 connections.
		{name: "object store, slots given", args: []string{"--max-concurrent", "64", "s3://b/s"}, limit: 1024, want: 876 - 64*8,
			says: []string{"lowered to fit", "max_concurrent=64 ", "read_concurrency=8 ", "max_connections=364 "}},
		{name: "object store, slots and reads given", args: []string{"--max-concurrent", "64", "--read-concurrency", "32", "s3://b/s"}, limit: 1024,
			says:  []string{"no --max-connections fits", "--max-concurrent", "--read-concurrency", "64 × 32", "ulimit -n", "ulimit -n) to 6292, which fits --max-connections 4096"},
			lacks: []string{"lower it,"}},
		{name: "object store, connections given", args: []string{"--max-connections", "100", "s3://b/s"}, limit: 1024, want: 100,
			says: []string{"max_concurrent=13 ", "max_connections=100 "}},
		{name: "object store, too many connections given", args: []string{"--max-connections", "1000", "s3://b/s"}, limit: 1024,
			says: []string{"--max-connections 1000", "at most 460 fit", "--max-concurrent 13 × 32"}},
		{name: "object store under a roomy limit", args: []string{"s3://b/s"}, limit: 1 << 20, want: 4096,
			lacks: []string{"lowered"}},
		{name: "explicit too large", args: []string{"--max-connections", "1000", "/data/s"}, limit: 1024,
			says: []string{"--max-connections 1000", "at most 364 fit"}},
		{name: "explicit fits", args: []string{"--max-connections", "300", "/data/s"}, limit: 1024, want: 300},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("serve", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			var c serveConfig
			serveFlags(fs, &c)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			got, err := fitConnections(fs, &c, slog.New(slog.NewTextHandler(&logs, nil)), tc.limit, false)
			said := logs.String()
			if err != nil {
				said = err.Error()
			}
			if got != tc.want || (tc.want == 0) != (err != nil) {
				t.Fatalf("cap %d, %v; want %d", got, err, tc.want)
			}
			// What serve then runs with is what the line says.
			if err == nil && strings.Contains(said, "max_concurrent=") &&
				!strings.Contains(said, fmt.Sprintf("max_concurrent=%d read_concurrency=%d ", c.maxConcurrent, c.storeReads(fs))) {
				t.Errorf("serve would run %d slots × %d reads; the log says %s", c.maxConcurrent, c.storeReads(fs), said)
			}
			for _, s := range tc.says {
				if !strings.Contains(said, s) {
					t.Errorf("%q lacks %q", said, s)
				}
			}
			for _, s := range tc.lacks {
				if strings.Contains(said, s) {
					t.Errorf("%q has %q", said, s)
				}
			}
		})
	}
}
