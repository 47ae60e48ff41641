package s3store_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/storage"
)

// TestUnreachableSaysWhere: an endpoint nothing listens on (a typo'd port,
// MinIO not started) is ErrUnavailable saying which address refused, not
// the SDK's and gocloud's chain around it. The operator read "storage
// unavailable: blob (code=Unknown): operation error S3: ListObjectsV2,
// exceeded maximum number of attempts, 3, https response error StatusCode:
// 0, RequestID: , HostID: , request send failed, Get \"…\": dial tcp …:
// connect: connection refused" in every log line.
func TestUnreachableSaysWhere(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	ctx := context.Background()
	st, err := open(ctx, "s3://b/x?region=us-east-1&use_path_style=true&anonymous=true&endpoint=http://"+addr)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, err = st.Stat(ctx, "zarr.json")
	if !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("not unavailable: %v", err)
	}
	want := `storage stat "zarr.json": storage unavailable: dial tcp ` + addr + `: connect: connection refused`
	if err.Error() != want {
		t.Errorf("%q, want %q", err, want)
	}
	if strings.Contains(err.Error(), "RequestID") {
		t.Errorf("%q still carries the SDK's chain", err)
	}
}
