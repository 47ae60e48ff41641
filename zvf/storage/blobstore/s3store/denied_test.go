package s3store_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/storage"
)

// TestAccessDenied: an object store that refuses the server's
// credentials (S3 403 AccessDenied) is storage.ErrPermission for every
// call — something the operator must fix, not a blip to retry
// (ErrUnavailable) nor an unknown failure — and the error names the key
// but not the backend's text.
func TestAccessDenied(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusForbidden)
		if r.Method != http.MethodHead {
			_, _ = io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message><RequestId>1</RequestId></Error>`)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	st, err := open(ctx, "s3://bucket/store?endpoint="+srv.URL+"&use_path_style=true&region=us-east-1&anonymous=true")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const key = "0/vertices/1.2.3/c/0"
	_, gerr := st.Get(ctx, key, storage.Whole(100))
	_, serr := st.Stat(ctx, key)
	_, lerr := st.List(ctx, "0/vertices/")
	for op, err := range map[string]error{"get": gerr, "stat": serr, "list": lerr} {
		if !errors.Is(err, storage.ErrPermission) || errors.Is(err, storage.ErrUnavailable) {
			t.Errorf("%s: %v", op, err)
		}
	}
	if !strings.Contains(gerr.Error(), key) {
		t.Errorf("get: %v does not name the key", gerr)
	}
}
