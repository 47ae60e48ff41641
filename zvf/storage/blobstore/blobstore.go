// Package blobstore implements storage.Writer on gocloud.dev/blob, so one
// code path reads local folders, file://, mem://, s3:// (including
// S3-compatible servers via endpoint=, use_path_style=, region=, and
// anonymous=true for public buckets), gs:// and azblob:// URLs.
package blobstore

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/gcerrors"

	// URL openers for the object stores named in the package doc.
	_ "gocloud.dev/blob/azureblob"
	_ "gocloud.dev/blob/gcsblob"
	_ "gocloud.dev/blob/memblob"
	_ "gocloud.dev/blob/s3blob"

	"github.com/zvfserve/zvfserve/zvf/storage"
)

// Store is a storage.Writer over one gocloud bucket.
type Store struct {
	b *blob.Bucket
	// dir is set for local folders: List reads one directory level itself,
	// because fileblob's delimited listing walks the whole subtree (seconds
	// on a store with thousands of chunks).
	dir string
}

// Open opens a local path (absolute or relative) or a gocloud URL. A URL
// path inside the bucket (s3://bucket/a/b.zarrvectors) roots the store at
// that prefix.
func Open(ctx context.Context, urlOrPath string) (*Store, error) {
	if !strings.Contains(urlOrPath, "://") {
		return openDir(urlOrPath)
	}
	u, err := url.Parse(urlOrPath)
	if err != nil {
		return nil, fmt.Errorf("store URL %q: %w", urlOrPath, err)
	}
	if u.Scheme == "file" {
		return openDir(u.Path)
	}
	prefix := strings.Trim(u.Path, "/")
	if u.Scheme == "mem" {
		// mem://name has no bucket to address; the host is part of the prefix
		// so distinct mem URLs stay distinct within one bucket.
		prefix = strings.Trim(u.Host+"/"+prefix, "/")
	}
	u.Path = ""
	b, err := blob.OpenBucket(ctx, u.String())
	if err != nil {
		return nil, fmt.Errorf("open store %q: %w", redact(urlOrPath), err)
	}
	if prefix != "" {
		b = blob.PrefixedBucket(b, prefix+"/")
	}
	return &Store{b: b}, nil
}

// New wraps an already-open bucket (tests, embedders).
func New(b *blob.Bucket) *Store { return &Store{b: b} }

func openDir(dir string) (*Store, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(abs); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("open store: %s is not a directory", dir)
	}
	b, err := fileblob.OpenBucket(abs, &fileblob.Options{Metadata: fileblob.MetadataDontWrite, NoTempDir: true})
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	return &Store{b: b, dir: abs}, nil
}

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

func wrap(op, key string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return &storage.Error{Op: op, Key: key, Err: err}
	}
	switch gcerrors.Code(err) {
	case gcerrors.NotFound:
		return &storage.Error{Op: op, Key: key, Err: storage.ErrNotFound}
	case gcerrors.Canceled:
		return &storage.Error{Op: op, Key: key, Err: context.Canceled}
	case gcerrors.DeadlineExceeded:
		return &storage.Error{Op: op, Key: key, Err: context.DeadlineExceeded}
	case gcerrors.InvalidArgument, gcerrors.PermissionDenied, gcerrors.FailedPrecondition:
		return &storage.Error{Op: op, Key: key, Err: err}
	}
	return &storage.Error{Op: op, Key: key, Err: fmt.Errorf("%w: %v", storage.ErrUnavailable, err)}
}

// Get implements storage.Store.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, &storage.Error{Op: "get", Key: key, Err: err}
	}
	if err := validKey(key); err != nil {
		return nil, &storage.Error{Op: "get", Key: key, Err: err}
	}
	b, err := s.b.ReadAll(ctx, key)
	return b, wrap("get", key, err)
}

// GetRange implements storage.Store.
func (s *Store) GetRange(ctx context.Context, key string, off, length int64) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, &storage.Error{Op: "range", Key: key, Err: err}
	}
	if err := validKey(key); err != nil {
		return nil, &storage.Error{Op: "range", Key: key, Err: err}
	}
	if off < 0 {
		return nil, &storage.Error{Op: "range", Key: key, Err: fmt.Errorf("negative offset %d", off)}
	}
	r, err := s.b.NewRangeReader(ctx, key, off, length, nil)
	if err != nil {
		return nil, wrap("range", key, err)
	}
	defer r.Close()
	var buf []byte
	if length >= 0 && length < 1<<26 {
		buf = make([]byte, 0, length)
	}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, wrap("range", key, err)
		}
	}
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
	if s.dir != "" {
		return s.listDir(prefix)
	}
	it := s.b.List(&blob.ListOptions{Prefix: prefix, Delimiter: "/"})
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return storage.Listing{}, wrap("list", prefix, err)
		}
		if obj.IsDir {
			l.Prefixes = append(l.Prefixes, obj.Key)
		} else {
			l.Keys = append(l.Keys, obj.Key)
		}
	}
	sort.Strings(l.Keys)
	sort.Strings(l.Prefixes)
	return l, nil
}

func (s *Store) listDir(prefix string) (storage.Listing, error) {
	var l storage.Listing
	ents, err := os.ReadDir(filepath.Join(s.dir, filepath.FromSlash(prefix)))
	if errors.Is(err, os.ErrNotExist) {
		return l, nil
	}
	if err != nil {
		return l, &storage.Error{Op: "list", Key: prefix, Err: fmt.Errorf("%w: %v", storage.ErrUnavailable, err)}
	}
	for _, e := range ents {
		name := e.Name()
		if strings.HasSuffix(name, ".attrs") || strings.HasPrefix(name, ".") {
			continue // fileblob sidecars and hidden files are not keys
		}
		if e.IsDir() {
			l.Prefixes = append(l.Prefixes, prefix+name+"/")
		} else {
			l.Keys = append(l.Keys, prefix+name)
		}
	}
	return l, nil
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
		return storage.Attrs{}, wrap("stat", key, err)
	}
	etag := a.ETag
	if etag == "" {
		etag = version(a.ModTime.UnixNano(), a.Size)
	}
	return storage.Attrs{Size: a.Size, ETag: etag}, nil
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
	if s.dir != "" {
		return s.walkDir(ctx, prefix, fn)
	}
	it := s.b.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return wrap("walk", prefix, err)
		}
		if obj.IsDir {
			continue
		}
		v := hex.EncodeToString(obj.MD5)
		if v == "" {
			v = version(obj.ModTime.UnixNano(), obj.Size)
		}
		if err := fn(obj.Key, storage.Attrs{Size: obj.Size, ETag: v}); err != nil {
			return err
		}
	}
}

func version(mtime, size int64) string {
	return strconv.FormatInt(mtime, 36) + "-" + strconv.FormatInt(size, 36)
}

// walkDir lists a local folder itself, for the same reason as listDir.
func (s *Store) walkDir(ctx context.Context, prefix string, fn func(string, storage.Attrs) error) error {
	root := filepath.Join(s.dir, filepath.FromSlash(prefix))
	var fnErr error
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, os.ErrNotExist) && p == root {
				return fs.SkipAll
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		name := d.Name()
		if p != root && strings.HasPrefix(name, ".") {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() || strings.HasSuffix(name, ".attrs") {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(s.dir, p)
		if err != nil {
			return err
		}
		if fnErr = fn(filepath.ToSlash(rel), storage.Attrs{Size: fi.Size(), ETag: version(fi.ModTime().UnixNano(), fi.Size())}); fnErr != nil {
			return fs.SkipAll
		}
		return nil
	})
	switch {
	case fnErr != nil:
		return fnErr
	case err != nil && ctx.Err() != nil:
		return &storage.Error{Op: "walk", Key: prefix, Err: ctx.Err()}
	case err != nil:
		return &storage.Error{Op: "walk", Key: prefix, Err: fmt.Errorf("%w: %v", storage.ErrUnavailable, err)}
	}
	return nil
}

// Put implements storage.Writer.
func (s *Store) Put(ctx context.Context, key string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return &storage.Error{Op: "put", Key: key, Err: err}
	}
	if err := validKey(key); err != nil {
		return &storage.Error{Op: "put", Key: key, Err: err}
	}
	return wrap("put", key, s.b.WriteAll(ctx, key, data, nil))
}

// Delete implements storage.Writer.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return &storage.Error{Op: "delete", Key: key, Err: err}
	}
	if err := validKey(key); err != nil {
		return &storage.Error{Op: "delete", Key: key, Err: err}
	}
	return wrap("delete", key, s.b.Delete(ctx, key))
}

// Close implements storage.Store.
func (s *Store) Close() error { return s.b.Close() }

var _ storage.Writer = (*Store)(nil)
