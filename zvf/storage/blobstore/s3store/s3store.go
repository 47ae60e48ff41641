// Package s3store opens s3:// buckets (AWS and S3-compatible servers via
// endpoint=, use_path_style=, region=, and anonymous=true for public
// buckets) with the AWS SDK, and pins ranged reads to one version with
// S3's ETag and If-Match.
package s3store

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"gocloud.dev/blob"
	"gocloud.dev/blob/s3blob"

	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore/bucket"
)

// S3 client timeouts. The SDK's client has none for a server that
// accepts a request and never answers (a hung gateway, a stalled proxy):
// such a read would wait for its caller's deadline, and a check with no
// deadline forever. headerTimeout bounds the wait for a response's
// headers after the request is sent (the SDK then retries, with
// backoff); a body that stalls is bounded by the caller's deadline.
// Idle connections are closed before a load balancer's idle timeout
// (commonly 60 s or more) would reset them under a request.
const (
	defaultHeaderTimeout = 15 * time.Second
	idleConnTimeout      = 50 * time.Second
)

// Open opens an s3:// URL (a blobstore.Opener) as gocloud's s3blob opener
// does (the same query parameters), with an HTTP client that has
// response-header and idle-connection timeouts. header_timeout=D (a Go
// duration) sets the first for servers that are slow to answer.
func Open(ctx context.Context, u *url.URL) (storage.Writer, error) {
	return OpenWith(Options{})(ctx, u)
}

// Options are what Open cannot be told by the URL.
type Options struct {
	// Logger receives the AWS SDK's log lines (its credential chain's
	// warnings among them); nil leaves the SDK's own, which writes text
	// to standard error.
	Logger *slog.Logger
}

// OpenWith is Open with o: a blobstore.Opener.
func OpenWith(o Options) func(context.Context, *url.URL) (storage.Writer, error) {
	return func(ctx context.Context, u *url.URL) (storage.Writer, error) {
		st, err := bucket.Open(ctx, u, func(ctx context.Context, u *url.URL) (*blob.Bucket, error) {
			return openBucket(ctx, u, o)
		}, Versions{})
		if err != nil {
			return nil, err
		}
		return st, nil
	}
}

// Wrap is a store over a bucket already opened with s3blob (tests that
// count requests with their own client).
func Wrap(b *blob.Bucket) *bucket.Store { return bucket.New(b, Versions{}) }

func openBucket(ctx context.Context, u *url.URL, o Options) (*blob.Bucket, error) {
	q := u.Query()
	take := func(k string) string {
		v := q.Get(k)
		q.Del(k)
		return v
	}
	headerTimeout := defaultHeaderTimeout
	if v := take("header_timeout"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("header_timeout=%q: want a positive duration such as 15s", v)
		}
		headerTimeout = d
	}
	var bo s3blob.Options
	if v := take("ssetype"); v != "" {
		ok := false
		for _, t := range types.ServerSideEncryptionAes256.Values() {
			if strings.EqualFold(string(t), v) {
				bo.EncryptionType, ok = t, true
			}
		}
		if !ok {
			return nil, fmt.Errorf("ssetype=%q is not a server-side encryption type", v)
		}
	}
	bo.KMSEncryptionID = take("kmskeyid")
	var so []func(*s3.Options)
	for _, k := range []string{"accelerate", "disable_https", "use_path_style", "s3ForcePathStyle"} {
		v := take(k)
		if v == "" {
			continue
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("%s=%q: %w", k, v, err)
		}
		switch k {
		case "accelerate":
			so = append(so, func(o *s3.Options) { o.UseAccelerate = b })
		case "disable_https":
			so = append(so, func(o *s3.Options) { o.EndpointOptions.DisableHTTPS = b })
		default:
			so = append(so, func(o *s3.Options) { o.UsePathStyle = b })
		}
	}
	endpoint := q.Get("endpoint")
	cfg, err := loadConfig(ctx, q, o.Logger)
	if err != nil {
		return nil, err
	}
	if cfg.Region == "" && endpoint == "" && cfg.BaseEndpoint == nil {
		// AWS cannot be reached without a region (nor an endpoint, here or
		// in AWS_ENDPOINT_URL): every request would
		// fail ("Invalid region"), which a server would take for a
		// backend that is down and retry for ever.
		return nil, fmt.Errorf("no region for bucket %q: add region= to the URL (or set AWS_REGION, or a region in the AWS profile), or endpoint= for an S3-compatible server", u.Host)
	}
	cfg.HTTPClient = awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		tr.ResponseHeaderTimeout = headerTimeout
		tr.IdleConnTimeout = idleConnTimeout
	})
	bo.RequestChecksumCalculation = cfg.RequestChecksumCalculation
	return s3blob.OpenBucket(ctx, s3.NewFromConfig(cfg, so...), u.Host, &bo)
}

// Versions reads S3's ETags and pins reads with If-Match.
type Versions struct{}

var _ bucket.Versions = Versions{}

// PinRead asks S3 to serve only the version etag (If-Match), so a read in
// pieces cannot mix two versions of one object.
func (Versions) PinRead(as func(any) bool, etag string) {
	var in *s3.GetObjectInput
	if as(&in) {
		in.IfMatch = aws.String(etag)
	}
}

// ReadETag is S3's ETag of the object a reader reads, or "".
func (Versions) ReadETag(as func(any) bool) string {
	var out s3.GetObjectOutput
	if as(&out) && out.ETag != nil {
		return *out.ETag
	}
	return ""
}

// StatETag is S3's ETag of an object's attributes, or "".
func (Versions) StatETag(as func(any) bool) string {
	var out s3.HeadObjectOutput
	if as(&out) && out.ETag != nil {
		return *out.ETag
	}
	return ""
}

// Scheme is the URL scheme Open opens.
const Scheme = s3blob.Scheme
