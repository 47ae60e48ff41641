//go:build !nogcs

package cloud

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"

	"google.golang.org/grpc/grpclog"
)

// grpcLogMu serialises routeGRPC: gRPC's setter writes its globals
// unguarded, and a process that runs serve more than once at a time (the
// command's tests, in parallel) would race on them.
var grpcLogMu sync.Mutex

// routeGRPC sets gRPC's process-wide logger (gRPC comes with the GCS
// driver; its default writes text to standard error) to log.
func routeGRPC(log *slog.Logger) {
	grpcLogMu.Lock()
	defer grpcLogMu.Unlock()
	grpclog.SetLoggerV2(grpcLogger{log.With("from", "grpc")})
}

// grpcLogger is gRPC's LoggerV2 over slog. gRPC's own default shows its
// errors only; here its info and warnings are debug lines.
type grpcLogger struct{ l *slog.Logger }

func (g grpcLogger) out(level slog.Level, msg string) {
	g.l.Log(context.Background(), level, strings.TrimSuffix(msg, "\n"))
}

func (g grpcLogger) Info(args ...any)   { g.out(slog.LevelDebug, fmt.Sprint(args...)) }
func (g grpcLogger) Infoln(args ...any) { g.out(slog.LevelDebug, fmt.Sprintln(args...)) }
func (g grpcLogger) Infof(format string, args ...any) {
	g.out(slog.LevelDebug, fmt.Sprintf(format, args...))
}
func (g grpcLogger) Warning(args ...any)   { g.out(slog.LevelDebug, fmt.Sprint(args...)) }
func (g grpcLogger) Warningln(args ...any) { g.out(slog.LevelDebug, fmt.Sprintln(args...)) }
func (g grpcLogger) Warningf(format string, args ...any) {
	g.out(slog.LevelDebug, fmt.Sprintf(format, args...))
}
func (g grpcLogger) Error(args ...any)   { g.out(slog.LevelError, fmt.Sprint(args...)) }
func (g grpcLogger) Errorln(args ...any) { g.out(slog.LevelError, fmt.Sprintln(args...)) }
func (g grpcLogger) Errorf(format string, args ...any) {
	g.out(slog.LevelError, fmt.Sprintf(format, args...))
}
func (g grpcLogger) Fatal(args ...any)   { g.out(slog.LevelError, fmt.Sprint(args...)); os.Exit(1) }
func (g grpcLogger) Fatalln(args ...any) { g.out(slog.LevelError, fmt.Sprintln(args...)); os.Exit(1) }
func (g grpcLogger) Fatalf(format string, args ...any) {
	g.out(slog.LevelError, fmt.Sprintf(format, args...))
	os.Exit(1)
}

// V reports whether verbose logs of level l are wanted: none past 0.
func (g grpcLogger) V(l int) bool { return l <= 0 }
