// Package azurestore opens azblob:// containers (Azure Blob Storage) with
// gocloud's azureblob driver and its credentials from the environment.
package azurestore

import (
	"context"
	"net/url"

	"gocloud.dev/blob/azureblob"

	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore/bucket"
)

// Open opens an azblob:// URL (a blobstore.Opener); its query parameters
// are azureblob's.
func Open(ctx context.Context, u *url.URL) (storage.Writer, error) {
	return bucket.OpenRegistered(ctx, u)
}

// Scheme is the URL scheme Open opens.
const Scheme = azureblob.Scheme
