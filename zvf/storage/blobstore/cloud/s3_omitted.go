//go:build nos3

package cloud

import "github.com/zvfserve/zvfserve/zvf/storage/blobstore"

func addS3(d blobstore.Drivers, _ Options) { d["s3"] = blobstore.Omitted("s3", "nos3") }
