// Package bucket implements storage.Writer on a gocloud.dev/blob bucket:
// the code path every cloud driver (s3store, gcsstore, azurestore) shares.
// A driver opens its bucket and says how its backend names an object's
// version (Versions); this package does the rest: bounded reads, pinned
// ranges, listings without folder markers, the storage error kinds.
package bucket

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/zvfserve/zvfserve/zvf/storage"
)

// Versions reads a backend's own object versions through gocloud's As
// escape hatch (S3's ETag and If-Match). A backend without them compares
// modification time and size instead.
type Versions interface {
	// PinRead asks the backend to serve a read only if the object is still
	// version etag, so a read in pieces cannot mix two versions.
	PinRead(as func(any) bool, etag string)
	// ReadETag is the version of the object a reader reads, or "".
	ReadETag(as func(any) bool) string
	// StatETag is the version in an object's attributes, or "".
	StatETag(as func(any) bool) string
}

// Store is a storage.Writer over one gocloud bucket.
type Store struct {
	b *blob.Bucket
	v Versions // nil: versions from modification time and size
	// tick is the granularity of the backend's modification times (0:
	// exact).
	tick time.Duration
}

// Open opens the bucket of a cloud URL with open, which sees the URL
// without its path; a path inside the bucket (s3://bucket/a/b.zarrvectors)
// roots the store at that prefix. v may be nil.
func Open(ctx context.Context, u *url.URL, open func(context.Context, *url.URL) (*blob.Bucket, error), v Versions) (*Store, error) {
	bu := *u
	prefix := strings.Trim(bu.Path, "/")
	bu.Path, bu.RawPath = "", ""
	b, err := open(ctx, &bu)
	if err != nil {
		return nil, err
	}
	if prefix != "" {
		b = blob.PrefixedBucket(b, prefix+"/")
	}
	// Cloud stores stamp objects in whole seconds (S3's and Azure's
	// Last-Modified are HTTP dates; GCS's milliseconds are a finer case of
	// the same).
	return &Store{b: b, v: v, tick: time.Second}, nil
}

// OpenRegistered opens a cloud URL with the gocloud driver registered for
// its scheme (the driver package's import registers it), as a
// storage.Writer: a nil *Store never becomes a non-nil interface.
func OpenRegistered(ctx context.Context, u *url.URL) (storage.Writer, error) {
	st, err := Open(ctx, u, blob.DefaultURLMux().OpenBucketURL, nil)
	if err != nil {
		return nil, err
	}
	return st, nil
}

// New wraps an already-open bucket (tests, embedders) whose stamps are
// exact (gocloud's in-memory bucket); v may be nil.
func New(b *blob.Bucket, v Versions) *Store { return &Store{b: b, v: v} }

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
	// A driver's sentence for its operator is kept as it is, not under
	// gocloud's and the SDK's layers.
	var setup *storage.SetupError
	if errors.As(err, &setup) {
		return &storage.Error{Op: op, Key: key, Err: setup}
	}
	// A bucket that does not exist is not an empty store: every key would
	// read as missing, and the store as "not a ZVF store".
	var coded interface{ ErrorCode() string }
	if errors.As(err, &coded) && coded.ErrorCode() == "NoSuchBucket" {
		return &storage.Error{Op: op, Key: key, Err: &storage.SetupError{
			Msg: "the bucket does not exist (NoSuchBucket): check its name in the store URL, and its region= or endpoint=", Err: err}}
	}
	switch gcerrors.Code(err) {
	case gcerrors.NotFound:
		return &storage.Error{Op: op, Key: key, Err: storage.ErrNotFound}
	case gcerrors.PermissionDenied:
		return &storage.Error{Op: op, Key: key, Err: fmt.Errorf("%w: %v", storage.ErrPermission, err)}
	case gcerrors.InvalidArgument, gcerrors.FailedPrecondition:
		return &storage.Error{Op: op, Key: key, Err: err}
	}
	// A backend that could not be reached is said as the socket says it
	// ("dial tcp host:port: connect: connection refused"), without the
	// SDK's and gocloud's layers around it (attempts, empty request ids).
	var nerr *net.OpError
	if errors.As(err, &nerr) {
		return &storage.Error{Op: op, Key: key, Err: fmt.Errorf("%w: %v", storage.ErrUnavailable, nerr)}
	}
	return &storage.Error{Op: op, Key: key, Err: fmt.Errorf("%w: %v", storage.ErrUnavailable, err)}
}

// Get implements storage.Store. A read pinned with IfMatch asks the
// backend to serve only that version where its Versions can (S3's
// If-Match); the version read is compared afterwards in any case.
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
	if o.IfMatch != "" && s.v != nil {
		etag := o.IfMatch
		opts = &blob.ReaderOptions{BeforeRead: func(as func(any) bool) error {
			s.v.PinRead(as, etag)
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
	if s.v != nil {
		a.ETag = s.v.ReadETag(r.As)
	}
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
	// The same version a Get reports: the backend's own, else time and size.
	var etag string
	if s.v != nil {
		etag = s.v.StatETag(a.As)
	}
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
