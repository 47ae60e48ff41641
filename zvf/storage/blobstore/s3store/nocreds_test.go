package s3store_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/storage"
)

// TestNoCredentials: a server started where the AWS SDK finds no
// credentials (no AWS_ACCESS_KEY_ID, no profile, no instance role) and
// pointed at a private bucket without anonymous=true. The operator used
// to read, in every store error logged, the SDK's chain of seven wrapped
// messages ("get identity: get credentials: failed to refresh cached
// credentials, no EC2 IMDS role found, operation error ec2imds: …"),
// classed as the backend being unreachable (and so retried as a blip).
// Now it is one sentence saying what to set, of the kind the operator
// must fix (storage.ErrPermission).
func TestNoCredentials(t *testing.T) {
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "",
		"AWS_PROFILE": "", "AWS_WEB_IDENTITY_TOKEN_FILE": "", "AWS_CONTAINER_CREDENTIALS_FULL_URI": "",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "", "AWS_EC2_METADATA_DISABLED": "true",
		"AWS_CONFIG_FILE": dir + "/none", "AWS_SHARED_CREDENTIALS_FILE": dir + "/none",
	} {
		t.Setenv(k, v)
	}
	srv := fakeS3(t, map[string]string{"b/zarr.json": "{}"})
	for _, tc := range []struct {
		name, q string
		want    []string
	}{
		{"no role", "", []string{"no AWS credentials found", "AWS_ACCESS_KEY_ID", "AWS_PROFILE", "anonymous=true"}},
		{"role", "&role=arn:aws:iam::123456789012:role/reader", []string{"no AWS credentials to assume role=arn:aws:iam::123456789012:role/reader", "AWS_ACCESS_KEY_ID"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			st, err := open(ctx, "s3://b?region=us-east-1&use_path_style=true&endpoint="+srv+tc.q)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			_, err = st.Stat(ctx, "zarr.json")
			if err == nil {
				t.Fatal("a stat without credentials succeeded")
			}
			if !errors.Is(err, storage.ErrPermission) || errors.Is(err, storage.ErrUnavailable) {
				t.Errorf("not a permission error (the operator's to fix): %v", err)
			}
			msg := err.Error()
			for _, want := range append([]string{`storage stat "zarr.json": `}, tc.want...) {
				if !strings.Contains(msg, want) {
					t.Errorf("%q does not say %q", msg, want)
				}
			}
			for _, chain := range []string{"get identity", "failed to refresh", "operation error"} {
				if strings.Contains(msg, chain) {
					t.Errorf("%q still carries the SDK's chain (%q)", msg, chain)
				}
			}
		})
	}
}

// TestUnknownParameterListsTheKnown: a misspelt parameter of an s3:// URL
// (regoin=) was refused as `unknown query parameter "regoin"`, leaving the
// user to guess the spelling; the refusal now lists what s3:// URLs take.
func TestUnknownParameterListsTheKnown(t *testing.T) {
	t.Parallel()
	_, err := open(context.Background(), "s3://b/x?regoin=us-east-1")
	want := `unknown query parameter "regoin"; s3:// URLs take accelerate, anonymous, awssdk, disable_https, dualstack, endpoint, fips, header_timeout, hostname_immutable, kmskeyid, profile, rate_limiter_capacity, region, request_checksum_calculation, response_checksum_validation, role, s3ForcePathStyle, ssetype, use_path_style`
	if err == nil || err.Error() != want {
		t.Errorf("%v\nwant %s", err, want)
	}
}
