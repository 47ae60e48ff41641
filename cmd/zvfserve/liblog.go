package main

import (
	"log/slog"

	"github.com/zvfserve/zvfserve/zvf/storage/blobstore/cloud"
)

// routeLibraryLogs sends what libraries log on their own — through the
// standard log package, or the cloud SDKs' process-wide loggers (gRPC's),
// which write text to standard error — through log, so that every line
// serve writes follows --log-format and --log-level. The AWS SDK's logger
// is given to each store as it opens (openStore). It sets process globals:
// serve's entry point calls it, tests of serve do not.
func routeLibraryLogs(log *slog.Logger) {
	// The log package's output goes to log's handler, at info.
	slog.SetDefault(log)
	cloud.RouteLogs(log)
}
