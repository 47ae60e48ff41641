package blobstore

// omittedDrivers names the cloud schemes this build left out (build tags
// nos3, nogcs, noazblob), with the tag, so that opening one says why.
func omittedDrivers() map[string]string {
	m := map[string]string{}
	if !hasS3 {
		m["s3"] = "nos3"
	}
	if !hasGCS {
		m["gs"] = "nogcs"
	}
	if !hasAzblob {
		m["azblob"] = "noazblob"
	}
	return m
}
