package cloud_test

import (
	"context"
	"errors"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore/cloud"
	"github.com/zvfserve/zvfserve/zvf/storage/localfs"
)

// TestDrivers: every cloud scheme is opened by its driver, or, where a
// build tag left the driver out, answered with a *NoDriverError naming
// the tag; a scheme no driver knows is one too.
func TestDrivers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := cloud.Drivers()
	for _, tc := range []struct{ scheme, tag string }{{"s3", "nos3"}, {"gs", "nogcs"}, {"azblob", "noazblob"}} {
		if d[tc.scheme] == nil {
			t.Errorf("no opener for %s://", tc.scheme)
			continue
		}
		omitted := strings.Contains(buildTags(), tc.tag)
		// A query parameter no driver takes: the driver refuses it before
		// it looks for credentials or reaches the network.
		_, err := d.Open(ctx, tc.scheme+"://bucket/store?no_such_parameter=1", localfs.Options{})
		var nd *blobstore.NoDriverError
		switch {
		case err == nil:
			t.Errorf("%s://: an unknown parameter was accepted", tc.scheme)
		case omitted != errors.As(err, &nd):
			t.Errorf("%s:// (built with %q): %v", tc.scheme, buildTags(), err)
		case omitted && !strings.Contains(err.Error(), "-tags "+tc.tag):
			t.Errorf("%s://: %v does not name the tag", tc.scheme, err)
		}
	}
	_, err := d.Open(ctx, "ftp://host/x", localfs.Options{})
	if !errors.As(err, new(*blobstore.NoDriverError)) {
		t.Errorf("ftp:// = %v", err)
	}
}

// buildTags is the -tags this test binary was built with.
func buildTags() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "-tags" {
				return s.Value
			}
		}
	}
	return ""
}
