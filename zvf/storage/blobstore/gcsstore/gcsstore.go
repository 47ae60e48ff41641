// Package gcsstore opens gs:// buckets (Google Cloud Storage) with
// gocloud's gcsblob driver and its default credentials. Google's client
// library brings gRPC and protobuf with it, whose package initialisation
// is about half of a server's start-up time: a build that reads no GCS
// leaves this package out (cloud's build tag nogcs).
package gcsstore

import (
	"context"
	"net/url"

	"gocloud.dev/blob/gcsblob"

	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore/bucket"
)

// Open opens a gs:// URL (a blobstore.Opener); its query parameters are
// gcsblob's.
func Open(ctx context.Context, u *url.URL) (storage.Writer, error) {
	return bucket.OpenRegistered(ctx, u)
}

// Scheme is the URL scheme Open opens.
const Scheme = gcsblob.Scheme
