package main

import (
	"bytes"
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
