package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDemoCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := filepath.Join(dir, "demo")
	truth := filepath.Join(dir, "truth.json")
	var stdout, stderr bytes.Buffer
	// Flags may follow OUT, as with every other command.
	code := run(context.Background(), []string{"demo", "--seed", "3", "--scale", "0.05", out, "--codec", "zstd", "--truth", truth}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, name := range []string{"cells", "axons", "skeletons", "meshes"} {
		b, err := os.ReadFile(filepath.Join(out, name, "zarr.json"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !json.Valid(b) || !strings.Contains(string(b), `"zv_version": "0.7.0"`) {
			t.Errorf("%s root: %s", name, b)
		}
		if !strings.Contains(stdout.String(), name) {
			t.Errorf("output does not list %s:\n%s", name, stdout.String())
		}
	}
	if b, err := os.ReadFile(truth); err != nil || !json.Valid(b) {
		t.Errorf("truth file: %v", err)
	}
}

func TestDemoCommandUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"demo"},
		{"demo", "a", "b"},
		{"demo", "--codec", "lz4", t.TempDir()},
		{"demo", "--scale", "nope", t.TempDir()},
		{"demo", "--bogus", t.TempDir()},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, &stdout, &stderr); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, stderr.String())
		}
	}
	// One sentence that names the flag and what it takes; it printed the
	// writer's error ("zvf writer: invalid codec: …").
	var stdout, stderr bytes.Buffer
	const codecWant = "zvfserve demo: --codec lz4: want none, zstd or blosc (the blob codec of level 0)\n"
	if code := run(context.Background(), []string{"demo", "--codec", "lz4", t.TempDir()}, &stdout, &stderr); code != 2 || stderr.String() != codecWant {
		t.Errorf("--codec lz4: exit %d, stderr %q; want 2 and %q", code, stderr.String(), codecWant)
	}
	stderr.Reset()
	if code := run(context.Background(), []string{"demo", "--scale", "-1", t.TempDir()}, &stdout, &stderr); code != 1 {
		t.Errorf("negative scale: exit %d, want 1", code)
	}
	if code := run(context.Background(), []string{"demo", "--help"}, &stdout, &stderr); code != 0 {
		t.Errorf("--help: exit %d, want 0", code)
	}
}
