// Package cloud gathers the cloud drivers a build has: s3store, gcsstore
// and azurestore, each of which the build tags nos3, nogcs and noazblob
// leave out (a URL of a scheme left out then says so). The programs that
// serve users import it; a test imports only the driver it exercises.
package cloud

import "github.com/zvfserve/zvfserve/zvf/storage/blobstore"

// Drivers is every cloud scheme's Opener, for blobstore.Drivers.Open.
func Drivers() blobstore.Drivers {
	d := blobstore.Drivers{}
	addS3(d)
	addGCS(d)
	addAzure(d)
	return d
}
