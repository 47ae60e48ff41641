//go:build nogcs

package cloud

import "github.com/zvfserve/zvfserve/zvf/storage/blobstore"

func addGCS(d blobstore.Drivers) { d["gs"] = blobstore.Omitted("gs", "nogcs") }
