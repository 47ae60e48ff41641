// Package cloud gathers the cloud drivers a build has: s3store, gcsstore
// and azurestore, each of which the build tags nos3, nogcs and noazblob
// leave out (a URL of a scheme left out then says so). The programs that
// serve users import it; a test imports only the driver it exercises.
package cloud

import (
	"log/slog"

	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
)

// Drivers is every cloud scheme's Opener, for blobstore.Drivers.Open.
func Drivers() blobstore.Drivers { return DriversWith(Options{}) }

// Options are what the drivers share.
type Options struct {
	// Logger receives what the cloud SDKs log (the AWS SDK's credential
	// chain warns there), so that it follows the program's log format;
	// nil leaves each SDK's own logging.
	Logger *slog.Logger
}

// DriversWith is Drivers with o.
func DriversWith(o Options) blobstore.Drivers {
	d := blobstore.Drivers{}
	addS3(d, o)
	addGCS(d, o)
	addAzure(d, o)
	return d
}

// RouteLogs sends what the cloud SDKs log through process-wide loggers
// (gRPC's, in builds with the GCS driver) to log. It sets process globals:
// call it once, at start, before any store opens.
func RouteLogs(log *slog.Logger) { routeGRPC(log) }
