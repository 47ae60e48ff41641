package main

import (
	"bytes"
	"flag"
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
// that would do.
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
		{name: "object store default", args: []string{"s3://b/s"}, limit: 1024,
			says:  []string{"no --max-connections fits", "--max-concurrent", "--read-concurrency", "64 × 32", "ulimit -n", "ulimit -n) to 6292, which fits --max-connections 4096"},
			lacks: []string{"lower it,"}},
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
