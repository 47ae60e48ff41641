package main

import (
	"context"
	"io"
	"log/slog"

	"github.com/zvfserve/zvfserve/zvf/storage/blobstore/cloud"
)

// routeLibraryLogs sends what libraries log on their own — through the
// standard log package, or the cloud SDKs' process-wide loggers (gRPC's),
// which write text to standard error — through log, so that every line
// serve writes follows --log-format and --log-level. The AWS SDK's logger
// is given to each store as it opens (openStore). It sets process globals:
// the process's entry point (runProcess) and serve's call it, tests of
// serve do not.
func routeLibraryLogs(log *slog.Logger) {
	// The log package's output goes to log's handler, at info.
	slog.SetDefault(log)
	cloud.RouteLogs(log)
}

// toolLogger is the logger of the commands other than serve, for what
// libraries log on their way (the AWS SDK's credential chain, gRPC, the
// log package): text lines on w, standard error, at info and above,
// without a time stamp, as a terminal shows them. Standard output is
// left to the answer (query's, zarr-cat's JSON). There is no
// --log-format for these commands: their own messages (an error, a
// progress bar, a paging note) are sentences, not records, and one JSON
// line among them would help no parser.
func toolLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{
		Level: slog.LevelInfo,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
}

// runProcess is run as the process's entry point (main, and the test
// binary run as zvfserve): what libraries log through process-wide
// loggers goes through toolLogger on stderr from the start, until serve,
// having read --log-format, routes it through its own logger.
func runProcess(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	routeLibraryLogs(toolLogger(stderr))
	return run(ctx, args, stdout, stderr)
}
