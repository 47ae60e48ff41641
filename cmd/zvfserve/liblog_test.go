package main

import (
	"bytes"
	"context"
	"encoding/json"
	stdlog "log"
	"log/slog"
	"strings"
	"testing"
)

// TestLibraryLogsFollowLogFormat: lines libraries write through the
// standard log package (plain text on stderr by default) come out in the server's format once serve routes them. Not
// parallel: it sets, then restores, process globals.
func TestLibraryLogsFollowLogFormat(t *testing.T) {
	var buf bytes.Buffer
	log, err := newLogger(&buf, "json", "info")
	if err != nil {
		t.Fatal(err)
	}
	prevSlog, prevOut, prevFlags := slog.Default(), stdlog.Writer(), stdlog.Flags()
	t.Cleanup(func() {
		stdlog.SetOutput(prevOut)
		stdlog.SetFlags(prevFlags)
		slog.SetDefault(prevSlog)
	})
	routeLibraryLogs(log)
	stdlog.Printf("a library's own line")
	lines := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
	if len(lines) != 1 {
		t.Fatalf("want 1 line, got %q", buf.String())
	}
	for i, want := range []struct{ level, msg string }{{"INFO", "a library's own line"}} {
		var l struct{ Level, Msg string }
		if err := json.Unmarshal([]byte(lines[i]), &l); err != nil || l.Level != want.level || l.Msg != want.msg {
			t.Errorf("line %q (%v): want JSON %s %q", lines[i], err, want.level, want.msg)
		}
	}
}

// TestToolsRouteLogPackage: in the process as a whole (runProcess), a line
// a library writes through the standard log package comes out on stderr
// as the commands' slog text, and stdout keeps the command's output alone.
// Not parallel: it sets, then restores, process globals.
func TestToolsRouteLogPackage(t *testing.T) {
	prevSlog, prevOut, prevFlags := slog.Default(), stdlog.Writer(), stdlog.Flags()
	t.Cleanup(func() {
		stdlog.SetOutput(prevOut)
		stdlog.SetFlags(prevFlags)
		slog.SetDefault(prevSlog)
	})
	var stdout, stderr bytes.Buffer
	if code := runProcess(context.Background(), []string{"version"}, &stdout, &stderr); code != 0 {
		t.Fatalf("version: exit %d: %s", code, stderr.String())
	}
	before := stdout.String()
	stdlog.Printf("a library's own line")
	if got, want := stderr.String(), "level=INFO msg=\"a library's own line\"\n"; got != want {
		t.Errorf("stderr %q, want %q", got, want)
	}
	if stdout.String() != before {
		t.Errorf("a library's line reached stdout: %q", stdout.String())
	}
}
