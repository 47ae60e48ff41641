//go:build nos3

package blobstore

func pinS3Read(func(any) bool, string) {}
func s3ReadETag(func(any) bool) string { return "" }
func s3StatETag(func(any) bool) string { return "" }

const hasS3 = false
