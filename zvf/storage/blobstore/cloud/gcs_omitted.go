//go:build nogcs

package cloud

import (
	"log/slog"

	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
)

func addGCS(d blobstore.Drivers, _ Options) { d["gs"] = blobstore.Omitted("gs", "nogcs") }

func routeGRPC(*slog.Logger) {}
