//go:build !nos3

package blobstore

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	gcaws "gocloud.dev/aws"
	"gocloud.dev/blob"
	"gocloud.dev/blob/s3blob"
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

// openS3 opens an s3:// URL as gocloud's s3blob opener does (the same
// query parameters), with an HTTP client that has response-header and
// idle-connection timeouts. header_timeout=D (a Go duration) sets the
// first for servers that are slow to answer.
func openS3(ctx context.Context, u *url.URL) (*blob.Bucket, error) {
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
	cfg, err := gcaws.V2ConfigFromURLParams(ctx, q)
	if err != nil {
		return nil, err
	}
	cfg.HTTPClient = awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		tr.ResponseHeaderTimeout = headerTimeout
		tr.IdleConnTimeout = idleConnTimeout
	})
	bo.RequestChecksumCalculation = cfg.RequestChecksumCalculation
	return s3blob.OpenBucket(ctx, s3.NewFromConfig(cfg, so...), u.Host, &bo)
}

// pinS3Read asks S3 to serve only the version etag (If-Match), so a read
// in pieces cannot mix two versions of one object.
func pinS3Read(as func(any) bool, etag string) {
	var in *s3.GetObjectInput
	if as(&in) {
		in.IfMatch = aws.String(etag)
	}
}

// s3ReadETag is S3's ETag of the object a reader reads, or "".
func s3ReadETag(as func(any) bool) string {
	var out s3.GetObjectOutput
	if as(&out) && out.ETag != nil {
		return *out.ETag
	}
	return ""
}

// s3StatETag is S3's ETag of an object's attributes, or "".
func s3StatETag(as func(any) bool) string {
	var out s3.HeadObjectOutput
	if as(&out) && out.ETag != nil {
		return *out.ETag
	}
	return ""
}

// hasS3: this build reads s3 stores.
const hasS3 = true
