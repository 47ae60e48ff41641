//go:build !nogcs

package cloud

import (
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore/gcsstore"
)

func addGCS(d blobstore.Drivers, _ Options) { d[gcsstore.Scheme] = gcsstore.Open }
