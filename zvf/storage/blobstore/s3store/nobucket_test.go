package s3store_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/storage"
)

// TestNoSuchBucket: a store URL whose bucket does not exist (a typo in
// its name, another region's or account's) was read as a store with no
// objects: "storage list \"\": not found", and the store then refused as
// "no root zarr.json: not a ZVF store", which sends the operator looking
// at the path. A listing and a read now say the bucket does not exist,
// as the operator's to fix (ErrPermission, like missing credentials).
func TestNoSuchBucket(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusNotFound)
		if r.Method != http.MethodHead {
			_, _ = io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchBucket</Code><Message>The specified bucket does not exist</Message><BucketName>b</BucketName></Error>`)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	st, err := open(ctx, "s3://b/x?region=us-east-1&use_path_style=true&anonymous=true&endpoint="+srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, lerr := st.List(ctx, "")
	_, gerr := st.Get(ctx, "zarr.json", storage.Whole(100))
	for op, tc := range map[string]struct {
		err  error
		want string
	}{
		"list": {lerr, `storage list "": the bucket does not exist (NoSuchBucket): check its name in the store URL, and its region= or endpoint=`},
		"get":  {gerr, `storage get "zarr.json": the bucket does not exist (NoSuchBucket): check its name in the store URL, and its region= or endpoint=`},
	} {
		if !errors.Is(tc.err, storage.ErrPermission) || errors.Is(tc.err, storage.ErrNotFound) || tc.err.Error() != tc.want {
			t.Errorf("%s: %v; want %q", op, tc.err, tc.want)
		}
	}
}
