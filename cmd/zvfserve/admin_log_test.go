package main

import (
	"bytes"
	"encoding/json"
	"net"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/api"
)

// TestAdminServerLogsStructured: what net/http reports about the admin
// listener (accept errors, panics) goes through the server's logger in
// its --log-format, as the API server's does. Such errors cannot be
// provoked on demand over plain HTTP, so this writes to the server's
// ErrorLog and checks the line; before, the admin server had none, and
// net/http printed them as plain text on stderr.
func TestAdminServerLogsStructured(t *testing.T) {
	var buf bytes.Buffer
	log, err := newLogger(&buf, "json", "info")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := api.New(api.Options{AdminMetrics: true})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	admin, _ := adminServer(srv, ln, log)
	if admin.ErrorLog == nil {
		t.Fatal("the admin server has no ErrorLog: net/http would print plain text on stderr")
	}
	admin.ErrorLog.Printf("http: Accept error: %v; retrying", "too many open files")
	var line struct{ Level, Msg string }
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil || line.Level != "WARN" || !strings.Contains(line.Msg, "Accept error") {
		t.Errorf("admin server error log line %q (%v): want a JSON warning", buf.String(), err)
	}
	if admin.IdleTimeout <= 0 || admin.MaxHeaderBytes <= 0 || admin.ReadHeaderTimeout <= 0 || admin.WriteTimeout <= 0 {
		t.Errorf("admin server unbounded: idle %v, header bytes %d, header timeout %v, write timeout %v", admin.IdleTimeout, admin.MaxHeaderBytes, admin.ReadHeaderTimeout, admin.WriteTimeout)
	}
}
