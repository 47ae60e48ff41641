//go:build !nogcs

package cloud

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"

	"google.golang.org/grpc/grpclog"
)

// TestRouteLogsGRPC: once routed, gRPC's log lines (plain text on stderr
// by default) come out through the given logger, in its format; its info
// lines are debug. Not parallel: it sets, then restores, gRPC's logger.
func TestRouteLogsGRPC(t *testing.T) {
	var buf bytes.Buffer
	RouteLogs(slog.New(slog.NewJSONHandler(&buf, nil)))
	t.Cleanup(func() { grpclog.SetLoggerV2(grpclog.NewLoggerV2(io.Discard, io.Discard, os.Stderr)) })
	grpclog.Errorf("grpc: an error")
	grpclog.Infof("grpc: chatter below info")
	lines := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
	var l struct{ Level, Msg, From string }
	if len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &l) != nil || l.Level != "ERROR" || l.Msg != "grpc: an error" || l.From != "grpc" {
		t.Errorf("routed gRPC logs: %q; want one JSON error line from grpc", buf.String())
	}
}
