package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/zvfserve/zvfserve/cmd/internal/cli/clitest"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/synth"
	"github.com/zvfserve/zvfserve/zvf/writer"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// TestMain checks that no test leaves goroutines behind (a benchmark's
// servers and clients must be gone when it returns), and removes the
// zvfserve binary the end-to-end tests built.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.Cleanup(func(int) {
			if built.dir != "" {
				_ = os.RemoveAll(built.dir)
			}
		}),
		// Idle keep-alive connections of http.DefaultClient: pooled, not leaked.
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("github.com/klauspost/compress/zstd.(*blockDec).startDecoder"),
		goleak.IgnoreAnyFunction("github.com/klauspost/compress/zstd.(*Decoder).startStreamDecoder"))
}

func runCmd(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return out.String(), errb.String(), code
}

// benchJSON runs a benchmark with --json and returns the report, its
// bytes and what the benchmark printed.
func benchJSON[R any](t *testing.T, args ...string) (R, []byte, string) {
	t.Helper()
	var rep R
	out := filepath.Join(t.TempDir(), "report.json")
	stdout, stderr, code := runCmd(t, append(args, "--json", out)...)
	if code != 0 {
		t.Fatalf("%v: exit %d: %s %s", args, code, stdout, stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	return rep, b, stdout
}

// built is the zvfserve binary the end-to-end tests start as servers.
var built struct {
	once      sync.Once
	dir, path string
	err       error
}

// zvfserveForTest builds cmd/zvfserve once (only the end-to-end tests
// need it: they start it as a server process) and returns its path.
func zvfserveForTest(t *testing.T) string {
	t.Helper()
	zvftest.EndToEnd(t)
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "zvfbench-test-"); built.err != nil {
			return
		}
		built.path = filepath.Join(built.dir, "zvfserve")
		// go test puts its own toolchain first on PATH.
		out, err := exec.Command("go", "build", "-o", built.path, "github.com/zvfserve/zvfserve/cmd/zvfserve").CombinedOutput()
		if err != nil {
			built.err = &buildError{err: err, out: string(out)}
		}
	})
	if built.err != nil {
		t.Fatalf("build zvfserve: %v", built.err)
	}
	return built.path
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + ": " + e.out }

// TestHelp: the command lists its benchmarks; each benchmark's --help
// says how to call it and what it does, and exits 0; no benchmark or an
// unknown one is a usage error (exit 2), as is an argument besides flags.
func TestHelp(t *testing.T) {
	t.Parallel()
	out, _, code := runCmd(t, "--help")
	if code != 0 {
		t.Errorf("--help: exit %d", code)
	}
	for name := range commands() {
		if !strings.Contains(out, "  "+name+" ") {
			t.Errorf("--help does not list %s:\n%s", name, out)
		}
		t.Run(name, func(t *testing.T) {
			out, errs, code := runCmd(t, name, "--help")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			help := out + errs
			clitest.CheckHelp(t, help, "zvfbench "+name)
			if !strings.Contains(help, "Flags:\n  -") {
				t.Errorf("no flags:\n%s", help)
			}
		})
	}
	_, errs, _ := runCmd(t, "load", "--help")
	for _, want := range []string{"cold", "warm", "--target", "p99", "docs/performance.md"} {
		if !strings.Contains(errs, want) {
			t.Errorf("load --help does not mention %q", want)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "Usage:"},
		{[]string{"bench"}, `unknown benchmark "bench"`},
		{[]string{"load", "extra"}, "load takes no arguments, only flags"},
		{[]string{"load", "--whole", "4"}, "unknown flag --whole"},
		{[]string{"whole", "--clients", "0"}, "--clients 0"},
		{[]string{"static", "--runs", "0"}, "--runs must be at least 1"},
		{[]string{"sweep", "--edges", "100,x"}, `--edges "100,x"`},
	} {
		out, errs, code := runCmd(t, tc.args...)
		if code != 2 || out != "" || !strings.Contains(errs, tc.want) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2 and %q", tc.args, code, out, errs, tc.want)
		}
		// A mistake's sentence is the last line, after any usage.
		if lines := strings.Split(strings.TrimRight(errs, "\n"), "\n"); tc.args != nil && !strings.Contains(lines[len(lines)-1], tc.want) {
			t.Errorf("%q: the last line of stderr is %q, not the error", tc.args, lines[len(lines)-1])
		}
	}
}

// points20k is the 20,000-point synthetic store the benchmarks' tests
// answer from (its points store below "points"), closed at cleanup.
func points20k(t *testing.T) storage.Store {
	t.Helper()
	mem, err := synth.Points(context.Background(), 20000, 1, writer.CodecNone)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := mem.Close(); err != nil {
			t.Error(err)
		}
	})
	return storage.Sub(mem, "points")
}
