package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/cmd/internal/cli"
)

// TestSweep: sweep builds a store per chunk edge (smaller chunks, more
// files), serves each from a fresh zvfserve process (found on PATH) and
// reports its first answer, a cold box and its peak RSS. End to end: it
// builds zvfserve.
func TestSweep(t *testing.T) {
	bin := zvfserveForTest(t)
	t.Setenv("PATH", filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	dir := t.TempDir()
	out := filepath.Join(t.TempDir(), "report.json")
	stdout, stderr, code := runCmd(t, "sweep", "--edges", "250,125", "--points", "20000", "--runs", "2", "--store", dir, "--json", out)
	if code != 0 {
		t.Fatalf("exit %d: %s %s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "the servers are "+bin) {
		t.Errorf("not the zvfserve on PATH: %s", stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rows []sweepRow
	if err := json.Unmarshal(b, &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Chunk != 250 || rows[1].Chunk != 125 || rows[0].Chunks != 64 || rows[1].Chunks != 512 || rows[1].Files <= rows[0].Files {
		t.Fatalf("rows: %s", b)
	}
	for _, r := range rows {
		if r.FirstAnswerS[0] <= 0 || r.FirstAttrMs[0] <= 0 || r.Cold50kMs[0] <= 0 || r.PeakRSSMB[0] <= 0 || r.FirstAnswerS[1] > r.FirstAnswerS[2] {
			t.Errorf("%+v", r)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "sweep-125", "points", "zarr.json")); err != nil {
		t.Errorf("the stores are not kept under --store: %v", err)
	}
}

// TestZvfserveBin: without --server-bin, the benchmarks that start servers
// take the zvfserve beside zvfbench, else the one on PATH; with neither,
// they say how to get one (a usage error).
func TestZvfserveBin(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	if _, err := zvfserveBin(); !errors.Is(err, cli.ErrUsage) || !strings.Contains(err.Error(), "--server-bin") {
		t.Errorf("no zvfserve anywhere: %v", err)
	}
	bin := filepath.Join(dir, "zvfserve")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := zvfserveBin(); err != nil || got != bin {
		t.Errorf("on PATH: %q, %v; want %q", got, err, bin)
	}
}
