package main

import (
	"context"

	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore/cloud"
	"github.com/zvfserve/zvfserve/zvf/storage/localfs"
)

// openStore opens a store named on the command line: a folder, file://,
// mem://, or a bucket URL of a cloud this build has a driver for (cloud's
// build tags leave some out; such a URL then says so).
func openStore(ctx context.Context, target string, lo localfs.Options) (storage.Writer, error) {
	return cloud.Drivers().Open(ctx, target, lo)
}
