// Package blobstore opens a store by its URL or path: a local path or
// file:// URL, which localfs serves; mem://, which memstore serves; and a
// cloud bucket's URL (s3://, gs://, azblob://), which the caller's Drivers
// open. The drivers are subpackages (s3store, gcsstore, azurestore, each
// over bucket, the gocloud.dev/blob adapter they share; cloud gathers
// those a build has), so that a program or a test that reads no cloud
// store links none of the cloud SDKs.
package blobstore

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/localfs"
	"github.com/zvfserve/zvfserve/zvf/storage/memstore"
)

// An Opener opens a cloud bucket's URL; the URL's path, if any, is the
// store's root inside the bucket.
type Opener func(ctx context.Context, u *url.URL) (storage.Writer, error)

// Drivers maps a URL scheme ("s3") to the Opener of its buckets.
type Drivers map[string]Opener

// NoDriverError is the answer to a URL whose scheme no driver opens.
type NoDriverError struct {
	Scheme string
	// Tag is the build tag that left the scheme's driver out ("nos3"), if
	// that is why.
	Tag string
}

func (e *NoDriverError) Error() string {
	if e.Tag != "" {
		return fmt.Sprintf("%s:// support is not in this build (it was built with -tags %s)", e.Scheme, e.Tag)
	}
	return fmt.Sprintf("no driver opens %s:// URLs in this program", e.Scheme)
}

// Omitted is the Opener of a scheme whose driver the build tag tag left
// out: it says so.
func Omitted(scheme, tag string) Opener {
	return func(context.Context, *url.URL) (storage.Writer, error) {
		return nil, &NoDriverError{Scheme: scheme, Tag: tag}
	}
}

// Open opens a local path (absolute or relative, or a file:// URL), or
// mem://, a fresh empty store in memory (each call its own; the rest of
// the URL is ignored). Any other URL is a *NoDriverError: cloud buckets
// take Drivers.Open.
func Open(ctx context.Context, urlOrPath string) (storage.Writer, error) {
	return Drivers(nil).Open(ctx, urlOrPath, localfs.Options{})
}

// OpenWith is Open with options for local folders.
func OpenWith(ctx context.Context, urlOrPath string, lo localfs.Options) (storage.Writer, error) {
	return Drivers(nil).Open(ctx, urlOrPath, lo)
}

// Open opens what blobstore.Open opens, and the URLs of d's schemes with
// their Openers. lo applies to local folders.
func (d Drivers) Open(ctx context.Context, urlOrPath string, lo localfs.Options) (storage.Writer, error) {
	if !strings.Contains(urlOrPath, "://") {
		return localfs.Open(urlOrPath, lo)
	}
	u, err := url.Parse(urlOrPath)
	if err != nil {
		return nil, fmt.Errorf("store URL %q: %w", redact(urlOrPath), err)
	}
	switch u.Scheme {
	case "file":
		return localfs.Open(u.Path, lo)
	case "mem":
		return memstore.New(), nil
	}
	open := d[u.Scheme]
	if open == nil {
		return nil, fmt.Errorf("open store %q: %w", redact(urlOrPath), &NoDriverError{Scheme: u.Scheme})
	}
	st, err := open(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("open store %q: %w", redact(urlOrPath), err)
	}
	return st, nil
}

// redact drops query parameters (which may carry credentials) from errors.
func redact(s string) string {
	if i := strings.IndexByte(s, '?'); i >= 0 {
		return s[:i]
	}
	return s
}
