package main

import (
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/zvfserve/zvfserve/cmd/internal/cli"
)

// TestMain checks that no test leaves goroutines behind (a hung read
// released at cleanup must unwind, a shut-down server must be gone). With
// ZVFSERVE_TEST_AS_COMMAND=1 the test binary is zvfserve itself, so that a
// test can start the server as a child process (the fleet tests do).
func TestMain(m *testing.M) {
	if os.Getenv("ZVFSERVE_TEST_AS_COMMAND") == "1" {
		ctx, stop := cli.Signals()
		code := runProcess(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	goleak.VerifyTestMain(m,
		goleak.Cleanup(func(int) {
			if sharedDemo.dir != "" {
				_ = os.RemoveAll(filepath.Dir(sharedDemo.dir))
			}
		}),
		// Idle keep-alive connections of http.DefaultClient: pooled, not leaked.
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("github.com/klauspost/compress/zstd.(*blockDec).startDecoder"),
		goleak.IgnoreAnyFunction("github.com/klauspost/compress/zstd.(*Decoder).startStreamDecoder"))
}
