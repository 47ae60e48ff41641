package s3store

//lint:file-ignore SA1019 endpoint= and hostname_immutable= mean the global endpoint resolver gocloud installs (loadConfig)

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go/logging"

	"github.com/zvfserve/zvfserve/zvf/storage"
)

// sdkLogger writes the AWS SDK's log lines (a credential chain falling
// back to IMDSv1, a shared config file ignored, retries when asked for)
// through log, at the level the SDK classifies them, so they follow
// --log-format and --log-level rather than going to stderr as text.
func sdkLogger(log *slog.Logger) logging.Logger {
	return logging.LoggerFunc(func(c logging.Classification, format string, v ...any) {
		level := slog.LevelInfo
		switch c {
		case logging.Warn:
			level = slog.LevelWarn
		case logging.Debug:
			level = slog.LevelDebug
		}
		ctx := context.Background()
		if log.Enabled(ctx, level) {
			log.Log(ctx, level, fmt.Sprintf(format, v...), "from", "aws-sdk")
		}
	})
}

// loadConfig is the SDK's configuration for a bucket URL's remaining
// query parameters, the ones gocloud's s3blob URLs take — region,
// endpoint, hostname_immutable, profile, anonymous, role, dualstack, fips,
// rate_limiter_capacity, request_checksum_calculation,
// response_checksum_validation (awssdk is ignored) — with the SDK's logger
// (and that of every client it makes, the credential chain's included)
// writing through log when log is not nil. An unknown parameter is an
// error. (gocloud.dev/aws.V2ConfigFromURLParams reads the same parameters
// but cannot be given a logger.)
// whenSupported reads a checksum parameter's value: when_supported (true)
// or when_required (false), in any case.
func whenSupported(k, v string) (bool, error) {
	switch strings.ToLower(v) {
	case "when_supported":
		return true, nil
	case "when_required":
		return false, nil
	}
	return false, fmt.Errorf("%s=%q: when_supported or when_required", k, v)
}

// urlParams are the query parameters an s3:// URL may carry: openBucket's
// and loadConfig's (keep it in step with both), as a refusal lists them.
var urlParams = []string{"accelerate", "anonymous", "awssdk", "disable_https", "dualstack", "endpoint", "fips",
	"header_timeout", "hostname_immutable", "kmskeyid", "profile", "rate_limiter_capacity", "region",
	"request_checksum_calculation", "response_checksum_validation", "role", "s3ForcePathStyle", "ssetype", "use_path_style"}

func loadConfig(ctx context.Context, q url.Values, log *slog.Logger) (aws.Config, error) {
	var opts []func(*config.LoadOptions) error
	if log != nil {
		opts = append(opts, config.WithLogger(sdkLogger(log)))
	}
	boolParam := func(k, v string) (bool, error) {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return false, fmt.Errorf("%s=%q: %w", k, v, err)
		}
		return b, nil
	}
	var endpoint, role string
	var immutable, anonymous bool
	var capacity int64
	for k, vs := range q {
		v := vs[0]
		var err error
		switch k {
		case "region":
			opts = append(opts, config.WithRegion(v))
		case "endpoint":
			endpoint = v
		case "hostname_immutable":
			immutable, err = boolParam(k, v)
		case "profile":
			opts = append(opts, config.WithSharedConfigProfile(v))
		case "anonymous":
			if anonymous, err = boolParam(k, v); anonymous {
				opts = append(opts, config.WithCredentialsProvider(aws.AnonymousCredentials{}))
			}
		case "role":
			if !strings.HasPrefix(v, "arn:") {
				return aws.Config{}, fmt.Errorf("role=%q: want an IAM role ARN (arn:…)", v)
			}
			role = v
		case "dualstack":
			var on bool
			if on, err = boolParam(k, v); on {
				opts = append(opts, config.WithUseDualStackEndpoint(aws.DualStackEndpointStateEnabled))
			}
		case "fips":
			var on bool
			if on, err = boolParam(k, v); on {
				opts = append(opts, config.WithUseFIPSEndpoint(aws.FIPSEndpointStateEnabled))
			}
		case "rate_limiter_capacity":
			if capacity, err = strconv.ParseInt(v, 10, 32); err != nil {
				err = fmt.Errorf("rate_limiter_capacity=%q: %w", v, err)
			}
		case "request_checksum_calculation":
			var supported bool
			if supported, err = whenSupported(k, v); err == nil {
				c := aws.RequestChecksumCalculationWhenRequired
				if supported {
					c = aws.RequestChecksumCalculationWhenSupported
				}
				opts = append(opts, config.WithRequestChecksumCalculation(c))
			}
		case "response_checksum_validation":
			var supported bool
			if supported, err = whenSupported(k, v); err == nil {
				c := aws.ResponseChecksumValidationWhenRequired
				if supported {
					c = aws.ResponseChecksumValidationWhenSupported
				}
				opts = append(opts, config.WithResponseChecksumValidation(c))
			}
		case "awssdk":
		default:
			return aws.Config{}, fmt.Errorf("unknown query parameter %q; s3:// URLs take %s", k, strings.Join(urlParams, ", "))
		}
		if err != nil {
			return aws.Config{}, err
		}
	}
	if role != "" {
		// The role is assumed with the credentials the rest of the
		// configuration finds.
		base, err := config.LoadDefaultConfig(ctx, opts...)
		if err != nil {
			return aws.Config{}, fmt.Errorf("load the AWS configuration: %w", err)
		}
		if base.Region == "" {
			return aws.Config{}, fmt.Errorf("role=%s: assuming a role needs a region (region=, AWS_REGION or the profile's)", role)
		}
		opts = append(opts, config.WithRegion(base.Region),
			config.WithCredentialsProvider(stscreds.NewAssumeRoleProvider(sts.NewFromConfig(base), role)))
	}
	var limiter retry.RateLimiter = ratelimit.None
	if capacity > 0 {
		limiter = ratelimit.NewTokenRateLimit(uint(capacity))
	}
	opts = append(opts, config.WithRetryer(func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) { o.RateLimiter = limiter })
	}))
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, err
	}
	if !anonymous && cfg.Credentials != nil {
		cfg.Credentials = sayingCredentials{cfg.Credentials, role}
	}
	if endpoint != "" {
		// The resolver gocloud's URL opener installs for endpoint= (with
		// hostname_immutable=), kept so that the same URLs reach the same
		// hosts; BaseEndpoint cannot say HostnameImmutable.
		cfg.EndpointResolverWithOptions = aws.EndpointResolverWithOptionsFunc(func(_, region string, _ ...any) (aws.Endpoint, error) {
			return aws.Endpoint{PartitionID: "aws", URL: endpoint, SigningRegion: region, HostnameImmutable: immutable}, nil
		})
	}
	return cfg, nil
}

// sayingCredentials turns the credential chain's failure, which reached
// the operator as seven wrapped messages ending in the instance metadata
// service's, into a sentence saying what to set.
type sayingCredentials struct {
	aws.CredentialsProvider
	role string
}

func (c sayingCredentials) Retrieve(ctx context.Context) (aws.Credentials, error) {
	cr, err := c.CredentialsProvider.Retrieve(ctx)
	if err == nil || ctx.Err() != nil {
		return cr, err
	}
	const where = "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE (or profile= in the URL), or an instance or pod role"
	msg := "no AWS credentials found: set " + where + "; a public bucket needs none: add anonymous=true to the URL"
	if c.role != "" {
		msg = fmt.Sprintf("no AWS credentials to assume role=%s with, or the role refused them: the server needs credentials allowed to assume it (%s)", c.role, where)
	}
	return cr, &storage.SetupError{Msg: msg, Err: err}
}
