//go:build !nos3

package cloud

import (
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore/s3store"
)

func addS3(d blobstore.Drivers, o Options) {
	d[s3store.Scheme] = s3store.OpenWith(s3store.Options{Logger: o.Logger})
}
