// Package blobstore implements storage.Writer on gocloud.dev/blob, so one
// code path reads s3:// (including S3-compatible servers via
// endpoint=, use_path_style=, region=, and anonymous=true for public
// buckets), gs:// and azblob:// URLs. Open also takes local paths and
// file:// URLs, which it hands to localfs, and mem:// URLs, which it hands
// to memstore (gocloud's in-memory bucket sorts every key it holds on each
// listing).
package blobstore

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/localfs"
	"github.com/zvfserve/zvfserve/zvf/storage/memstore"
)

// Store is a storage.Writer over one gocloud bucket.
type Store struct {
	b *blob.Bucket
	// tick is the granularity of the backend's modification times (0:
	// exact).
	tick time.Duration
}

// Open opens a gocloud URL, or a local path (absolute or relative, or a
// file:// URL), which localfs serves, or mem://, a fresh empty store in
// memory (each call its own; the rest of the URL is ignored), which
// memstore serves. A URL path inside the bucket
// (s3://bucket/a/b.zarrvectors) roots the store at that prefix.
func Open(ctx context.Context, urlOrPath string) (storage.Writer, error) {
	return OpenWith(ctx, urlOrPath, localfs.Options{})
}

// OpenWith is Open with options for local folders.
func OpenWith(ctx context.Context, urlOrPath string, lo localfs.Options) (storage.Writer, error) {
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
	return OpenBucket(ctx, urlOrPath)
}

// OpenBucket opens a cloud bucket's URL (not a local path, nor mem://,
// which Open serves).
func OpenBucket(ctx context.Context, rawURL string) (*Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("store URL %q: %w", redact(rawURL), err)
	}
	if u.Scheme == "mem" || u.Scheme == "file" || u.Scheme == "" {
		return nil, fmt.Errorf("open store %q: not a cloud bucket (blobstore.Open serves it)", redact(rawURL))
	}
	prefix := strings.Trim(u.Path, "/")
	u.Path = ""
	if tag, ok := omittedDrivers()[u.Scheme]; ok {
		return nil, fmt.Errorf("open store %q: %s:// support is not in this build (it was built with -tags %s)", redact(rawURL), u.Scheme, tag)
	}
	var b *blob.Bucket
	if u.Scheme == "s3" {
		b, err = openS3(ctx, u)
	} else {
		b, err = blob.OpenBucket(ctx, u.String())
	}
	if err != nil {
		return nil, fmt.Errorf("open store %q: %w", redact(rawURL), err)
	}
	if prefix != "" {
		b = blob.PrefixedBucket(b, prefix+"/")
	}
	// Cloud stores stamp objects in whole seconds (S3's and Azure's
	// Last-Modified are HTTP dates; GCS's milliseconds are a finer case of
	// the same).
	return &Store{b: b, tick: time.Second}, nil
}

// New wraps an already-open bucket (tests, embedders) whose stamps are
// exact (gocloud's in-memory bucket).
func New(b *blob.Bucket) *Store { return &Store{b: b} }

// redact drops query parameters (which may carry credentials) from errors.
func redact(s string) string {
	if i := strings.IndexByte(s, '?'); i >= 0 {
		return s[:i]
	}
	return s
}

// validKey rejects keys that could escape the store root.
func validKey(key string) error {
	if strings.HasPrefix(key, "/") || strings.Contains(key, "\\") || strings.ContainsRune(key, 0) {
		return fmt.Errorf("invalid key %q", key)
	}
	for _, seg := range strings.Split(key, "/") {
		if seg == ".." || seg == "." {
			return fmt.Errorf("invalid key %q", key)
		}
	}
	return nil
}

// wrap maps a driver's error to the storage kinds. A timeout or a
// cancellation is the caller's only when the caller's ctx has ended; one
// of the client's own (a response that never came) is the backend failing.
func wrap(ctx context.Context, op, key string, err error) error {
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil {
		return &storage.Error{Op: op, Key: key, Err: cerr}
	}
	switch gcerrors.Code(err) {
	case gcerrors.NotFound:
		return &storage.Error{Op: op, Key: key, Err: storage.ErrNotFound}
	case gcerrors.PermissionDenied:
		return &storage.Error{Op: op, Key: key, Err: fmt.Errorf("%w: %v", storage.ErrPermission, err)}
	case gcerrors.InvalidArgument, gcerrors.FailedPrecondition:
		return &storage.Error{Op: op, Key: key, Err: err}
	}
	return &storage.Error{Op: op, Key: key, Err: fmt.Errorf("%w: %v", storage.ErrUnavailable, err)}
}

// Get implements storage.Store. Reads pinned with IfMatch ask S3 to
// serve only that version (If-Match); other backends compare afterwards.
func (s *Store) Get(ctx context.Context, key string, o storage.ReadOptions) (storage.Object, error) {
	if err := ctx.Err(); err != nil {
		return storage.Object{}, &storage.Error{Op: "get", Key: key, Err: err}
	}
	if err := validKey(key); err != nil {
		return storage.Object{}, &storage.Error{Op: "get", Key: key, Err: err}
	}
	if err := storage.CheckBound(o); err != nil {
		return storage.Object{}, &storage.Error{Op: "get", Key: key, Err: err}
	}
	var opts *blob.ReaderOptions
	if o.IfMatch != "" {
		etag := o.IfMatch
		opts = &blob.ReaderOptions{BeforeRead: func(as func(any) bool) error {
			pinS3Read(as, etag)
			return nil
		}}
	}
	length := o.Len
	if length < 0 {
		length = -1
	}
	r, err := s.b.NewRangeReader(ctx, key, o.Off, length, opts)
	if err != nil {
		if o.IfMatch != "" && gcerrors.Code(err) == gcerrors.FailedPrecondition {
			return storage.Object{}, &storage.Error{Op: "get", Key: key, Err: &storage.ChangedError{}}
		}
		return storage.Object{}, wrap(ctx, "get", key, err)
	}
	defer r.Close()
	a := storage.Attrs{Size: r.Size(), Modified: r.ModTime()}
	a.ETag = s3ReadETag(r.As)
	if a.ETag == "" {
		a.ETag = version(a.Modified.UnixNano(), a.Size)
	}
	if o.IfMatch != "" && a.ETag != o.IfMatch {
		return storage.Object{}, &storage.Error{Op: "get", Key: key, Err: &storage.ChangedError{Modified: a.Modified}}
	}
	n, err := storage.Want(o, a.Size)
	if err != nil {
		return storage.Object{}, &storage.Error{Op: "get", Key: key, Err: err}
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			// A body shorter than its own length: the connection was cut (a
			// load balancer's reset, a proxy's timeout). One response is one
			// version of the object, so this says nothing about a change.
			return storage.Object{}, &storage.Error{Op: "get", Key: key, Err: fmt.Errorf("%w: the response ended after fewer bytes than it announced", storage.ErrUnavailable)}
		}
		return storage.Object{}, wrap(ctx, "get", key, err)
	}
	return storage.Object{Data: buf, Attrs: a}, nil
}

// Now implements storage.Store: truncated to the backend's granularity, so
// that an object written in the same second after Now, which the store
// stamps with the start of that second, counts as written after it (an
// exact Now let a reader take such an object for part of the version it
// had opened: new chunks read against old metadata). Clock skew between
// this machine and the store's still shifts the comparison by the skew.
func (s *Store) Now() time.Time {
	if s.tick > 0 {
		return time.Now().Truncate(s.tick)
	}
	return time.Now()
}

// List implements storage.Store.
func (s *Store) List(ctx context.Context, prefix string) (storage.Listing, error) {
	var l storage.Listing
	if err := ctx.Err(); err != nil {
		return l, &storage.Error{Op: "list", Key: prefix, Err: err}
	}
	if prefix != "" {
		if err := validKey(prefix); err != nil || !strings.HasSuffix(prefix, "/") {
			return l, &storage.Error{Op: "list", Key: prefix, Err: fmt.Errorf("invalid prefix %q", prefix)}
		}
	}
	it := s.b.List(&blob.ListOptions{Prefix: prefix, Delimiter: "/"})
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return storage.Listing{}, wrap(ctx, "list", prefix, err)
		}
		switch {
		case obj.IsDir:
			l.Prefixes = append(l.Prefixes, obj.Key)
		case marker(obj.Key):
			// The "folder/" marker of the listed prefix itself.
		default:
			l.Keys = append(l.Keys, obj.Key)
		}
	}
	sort.Strings(l.Keys)
	sort.Strings(l.Prefixes)
	return l, nil
}

// marker reports whether key is a "folder/" marker: an empty object that
// consoles and some sync tools create so that a folder shows; it holds
// nothing and is never a store object.
func marker(key string) bool { return strings.HasSuffix(key, "/") }

// FoldersHolding implements storage.FolderLister with one flat listing of
// prefix: a LIST per thousand objects below it, however many folders (a
// Stat per folder would be a HEAD each). A prefix holding only a marker
// is not a folder that holds name.
func (s *Store) FoldersHolding(ctx context.Context, prefix, name string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, &storage.Error{Op: "list", Key: prefix, Err: err}
	}
	if prefix != "" {
		if err := validKey(prefix); err != nil || !strings.HasSuffix(prefix, "/") {
			return nil, &storage.Error{Op: "list", Key: prefix, Err: fmt.Errorf("invalid prefix %q", prefix)}
		}
	}
	var out []string
	it := s.b.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, wrap(ctx, "list", prefix, err)
		}
		dir, base, ok := strings.Cut(strings.TrimPrefix(obj.Key, prefix), "/")
		if ok && dir != "" && base == name {
			out = append(out, prefix+dir+"/")
		}
	}
	sort.Strings(out)
	return out, nil
}

// Stat implements storage.Store.
func (s *Store) Stat(ctx context.Context, key string) (storage.Attrs, error) {
	if err := ctx.Err(); err != nil {
		return storage.Attrs{}, &storage.Error{Op: "stat", Key: key, Err: err}
	}
	if err := validKey(key); err != nil {
		return storage.Attrs{}, &storage.Error{Op: "stat", Key: key, Err: err}
	}
	a, err := s.b.Attributes(ctx, key)
	if err != nil {
		return storage.Attrs{}, wrap(ctx, "stat", key, err)
	}
	// The same version a Get reports: S3's ETag, else time and size.
	etag := s3StatETag(a.As)
	if etag == "" {
		etag = version(a.ModTime.UnixNano(), a.Size)
	}
	return storage.Attrs{Size: a.Size, ETag: etag, Modified: a.ModTime}, nil
}

// Walk implements storage.Store. An object's version is its content MD5
// where the backend lists one (S3 and MinIO for single-part uploads, GCS,
// Azure, mem), so rewriting identical bytes is not a change; otherwise it
// is derived from modification time and size.
func (s *Store) Walk(ctx context.Context, prefix string, fn func(string, storage.Attrs) error) error {
	if prefix != "" {
		if err := validKey(prefix); err != nil || !strings.HasSuffix(prefix, "/") {
			return &storage.Error{Op: "walk", Key: prefix, Err: fmt.Errorf("invalid prefix %q", prefix)}
		}
	}
	it := s.b.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return wrap(ctx, "walk", prefix, err)
		}
		if obj.IsDir || marker(obj.Key) {
			continue
		}
		v := hex.EncodeToString(obj.MD5)
		if v == "" {
			v = version(obj.ModTime.UnixNano(), obj.Size)
		}
		if err := fn(obj.Key, storage.Attrs{Size: obj.Size, ETag: v, Modified: obj.ModTime}); err != nil {
			return err
		}
	}
}

func version(mtime, size int64) string {
	return strconv.FormatInt(mtime, 36) + "-" + strconv.FormatInt(size, 36)
}

// Put implements storage.Writer.
func (s *Store) Put(ctx context.Context, key string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return &storage.Error{Op: "put", Key: key, Err: err}
	}
	if err := validKey(key); err != nil {
		return &storage.Error{Op: "put", Key: key, Err: err}
	}
	return wrap(ctx, "put", key, s.b.WriteAll(ctx, key, data, nil))
}

// Delete implements storage.Writer.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return &storage.Error{Op: "delete", Key: key, Err: err}
	}
	if err := validKey(key); err != nil {
		return &storage.Error{Op: "delete", Key: key, Err: err}
	}
	return wrap(ctx, "delete", key, s.b.Delete(ctx, key))
}

// Close implements storage.Store.
func (s *Store) Close() error { return s.b.Close() }

var _ storage.Writer = (*Store)(nil)

var _ storage.FolderLister = (*Store)(nil)
