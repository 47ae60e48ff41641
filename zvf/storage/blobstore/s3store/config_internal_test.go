package s3store

import (
	"bytes"
	"context"
	"log/slog"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/smithy-go/logging"
)

// TestLoadConfig: the URL parameters loadConfig reads in place of
// gocloud's V2ConfigFromURLParams (which takes no logger) are refused as
// it refuses them, and the SDK's logger writes through the one given, at
// the SDK's level.
func TestLoadConfig(t *testing.T) {
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	ctx := context.Background()
	for q, want := range map[string]string{
		"nope=1":                             `unknown query parameter "nope"`,
		"anonymous=maybe":                    `anonymous="maybe"`,
		"role=admin":                         `role="admin"`,
		"rate_limiter_capacity=x":            `rate_limiter_capacity="x"`,
		"request_checksum_calculation=never": `request_checksum_calculation="never"`,
		"response_checksum_validation=":      `response_checksum_validation=""`,
	} {
		v, _ := url.ParseQuery(q)
		if _, err := loadConfig(ctx, v, nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error with %s", q, err, want)
		}
	}
	for q, want := range map[string][2]int{
		"request_checksum_calculation=WHEN_REQUIRED&response_checksum_validation=when_supported": {
			int(aws.RequestChecksumCalculationWhenRequired), int(aws.ResponseChecksumValidationWhenSupported)},
		"request_checksum_calculation=when_supported&response_checksum_validation=When_Required": {
			int(aws.RequestChecksumCalculationWhenSupported), int(aws.ResponseChecksumValidationWhenRequired)},
	} {
		v, _ := url.ParseQuery(q)
		cfg, err := loadConfig(ctx, v, nil)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if got := [2]int{int(cfg.RequestChecksumCalculation), int(cfg.ResponseChecksumValidation)}; got != want {
			t.Errorf("%s: request, response %v; want %v", q, got, want)
		}
	}
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	v, _ := url.ParseQuery("region=eu-west-1&anonymous=true&endpoint=http://127.0.0.1:9&hostname_immutable=true&awssdk=v2")
	cfg, err := loadConfig(ctx, v, log)
	if err != nil {
		t.Fatal(err)
	}
	//lint:ignore SA1019 loadConfig sets this resolver on purpose (config.go)
	if resolver := cfg.EndpointResolverWithOptions; cfg.Region != "eu-west-1" || resolver == nil {
		t.Errorf("region %q, endpoint resolver %v", cfg.Region, resolver)
	}
	cfg.Logger.Logf(logging.Debug, "below the level")
	cfg.Logger.Logf(logging.Warn, "falling back to %s", "IMDSv1")
	if got := buf.String(); strings.Count(got, "\n") != 1 || !strings.Contains(got, `"level":"WARN","msg":"falling back to IMDSv1","from":"aws-sdk"`) {
		t.Errorf("SDK log lines: %q", got)
	}
}

// TestURLParamsInStep: every parameter the refusal of an unknown one lists
// is taken (it may still refuse the value), so the list cannot name one
// that is not.
func TestURLParamsInStep(t *testing.T) {
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	for _, p := range urlParams {
		u, err := url.Parse("s3://b/x?region=us-east-1&" + p + "=x")
		if err != nil {
			t.Fatal(err)
		}
		b, err := openBucket(context.Background(), u, Options{})
		if err != nil && strings.Contains(err.Error(), "unknown query parameter") {
			t.Errorf("%s: %v", p, err)
		}
		if b != nil {
			_ = b.Close()
		}
	}
}
