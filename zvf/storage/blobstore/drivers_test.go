package blobstore_test

import (
	"context"
	"errors"
	"net/url"
	"os/exec"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/storage/localfs"
)

// TestOpenWithoutDriver: a bucket URL whose scheme no driver opens is a
// *NoDriverError naming the scheme (or the build tag that left its driver
// out), with the URL's query (which may hold credentials) left out — never a panic,
// never gocloud's "no driver registered".
func TestOpenWithoutDriver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		url    string
		d      blobstore.Drivers
		scheme string
		want   string
	}{
		{"s3://bucket/store?secret_access_key=s3cret", nil, "s3", "no driver opens s3:// URLs in this program"},
		{"gs://bucket/store", nil, "gs", "no driver opens gs://"},
		{"azblob://container?sas=s3cret", nil, "azblob", "no driver opens azblob://"},
		{"ftp://host/x", blobstore.Drivers{"s3": blobstore.Omitted("s3", "nos3"), "gs": nil}, "ftp", "no driver opens ftp:// URLs in this program"},
		{"s3://bucket/store?secret_access_key=s3cret", blobstore.Drivers{"s3": blobstore.Omitted("s3", "nos3")}, "s3", "s3:// support is not in this build (it was built with -tags nos3)"},
	} {
		st, err := tc.d.Open(ctx, tc.url, localfs.Options{})
		var nd *blobstore.NoDriverError
		if st != nil || !errors.As(err, &nd) || nd.Scheme != tc.scheme {
			t.Errorf("%s: %v, %v; want a *NoDriverError for %s", tc.url, st, err, tc.scheme)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, tc.want) || strings.Contains(msg, "s3cret") || !strings.Contains(msg, strings.SplitN(tc.url, "?", 2)[0]) {
			t.Errorf("%s: %q; want the URL without its query and %q", tc.url, msg, tc.want)
		}
	}
	if _, err := blobstore.Open(ctx, "s3://bucket"); !errors.As(err, new(*blobstore.NoDriverError)) {
		t.Errorf("blobstore.Open(s3://bucket) = %v, want a *NoDriverError", err)
	}
}

// TestDriversOpen: a scheme's Opener gets the whole URL (the path is the
// root inside the bucket; the driver reads its query), and its error
// comes back naming the store without the query.
func TestDriversOpen(t *testing.T) {
	t.Parallel()
	var got *url.URL
	refuse := errors.New("refused")
	d := blobstore.Drivers{"x": func(_ context.Context, u *url.URL) (storage.Writer, error) {
		got = u
		return nil, refuse
	}}
	_, err := d.Open(context.Background(), "x://bucket/a/b.zarrvectors?key=s3cret", localfs.Options{})
	if got == nil || got.Host != "bucket" || got.Path != "/a/b.zarrvectors" || got.Query().Get("key") != "s3cret" {
		t.Errorf("the opener got %v", got)
	}
	if !errors.Is(err, refuse) || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), `"x://bucket/a/b.zarrvectors"`) {
		t.Errorf("error = %v", err)
	}
	// Local paths and mem:// need no driver, whatever d holds.
	for _, target := range []string{t.TempDir(), "file://" + t.TempDir(), "mem://"} {
		st, err := d.Open(context.Background(), target, localfs.Options{})
		if err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	}
}

// TestStoreHelpersLinkNoCloudSDK: the packages almost every test reaches
// (the store opener, the test helpers, the demo and synthetic stores) do
// not import a cloud SDK. When blobstore held the drivers, 18 test binaries
// linked AWS, GCS and Azure (about half of the suite's link time).
func TestStoreHelpersLinkNoCloudSDK(t *testing.T) {
	t.Parallel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list imports with")
	}
	const mod = "github.com/zvfserve/zvfserve/"
	pkgs := []string{"zvf/storage/blobstore", "zvf/zvftest", "api/apitest", "zvf/demo", "zvf/synth", "zvf", "api", "api/neuroglancer"}
	args := []string{"list", "-deps"}
	for _, p := range pkgs {
		args = append(args, mod+p)
	}
	out, err := exec.Command(goTool, args...).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, sdk := range []string{"github.com/aws/", "cloud.google.com/go/storage", "github.com/Azure/", "gocloud.dev/blob/"} {
			if strings.HasPrefix(dep, sdk) {
				t.Errorf("%s is among the imports of %v", dep, pkgs)
			}
		}
	}
}
