package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"syscall"

	"github.com/zvfserve/zvfserve/cmd/internal/cli"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore/cloud"
	"github.com/zvfserve/zvfserve/zvf/storage/localfs"
)

// openStore opens a store named on the command line: a folder, file://,
// mem://, or a bucket URL of a cloud this build has a driver for (cloud's
// build tags leave some out; such a URL then says so). What the cloud SDKs
// log goes to lo.Logger when it is set. A path that is not there is a
// command-line mistake (exit 2), said in the argument's own words.
func openStore(ctx context.Context, target string, lo localfs.Options) (storage.Writer, error) {
	st, err := cloud.DriversWith(cloud.Options{Logger: lo.Logger}).Open(ctx, target, lo)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%w: %s: no such file or folder", cli.ErrUsage, shownArg(target))
	case errors.Is(err, syscall.ENOTDIR):
		msg := "a file, not a folder: a STORE is the folder that holds a store's zarr.json, or a folder of stores"
		if filepath.Base(target) == "zarr.json" {
			msg += " (here " + filepath.Dir(target) + ")"
		}
		return nil, fmt.Errorf("%w: %s: %s", cli.ErrUsage, shownArg(target), msg)
	}
	return st, err
}
