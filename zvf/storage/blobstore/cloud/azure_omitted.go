//go:build noazblob

package cloud

import "github.com/zvfserve/zvfserve/zvf/storage/blobstore"

func addAzure(d blobstore.Drivers, _ Options) { d["azblob"] = blobstore.Omitted("azblob", "noazblob") }
