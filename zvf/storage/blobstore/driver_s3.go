//go:build !nos3

package blobstore

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	_ "gocloud.dev/blob/s3blob" // s3:// (and S3-compatible servers)
)

// pinS3Read asks S3 to serve only the version etag (If-Match), so a read
// in pieces cannot mix two versions of one object.
func pinS3Read(as func(any) bool, etag string) {
	var in *s3.GetObjectInput
	if as(&in) {
		in.IfMatch = aws.String(etag)
	}
}

// s3ReadETag is S3's ETag of the object a reader reads, or "".
func s3ReadETag(as func(any) bool) string {
	var out s3.GetObjectOutput
	if as(&out) && out.ETag != nil {
		return *out.ETag
	}
	return ""
}

// s3StatETag is S3's ETag of an object's attributes, or "".
func s3StatETag(as func(any) bool) string {
	var out s3.HeadObjectOutput
	if as(&out) && out.ETag != nil {
		return *out.ETag
	}
	return ""
}

// hasS3: this build reads s3 stores.
const hasS3 = true
