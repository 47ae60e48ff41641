//go:build !noazblob

package cloud

import (
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore/azurestore"
)

func addAzure(d blobstore.Drivers, _ Options) { d[azurestore.Scheme] = azurestore.Open }
