// Package localfs implements storage.Writer on a local folder, reading
// with plain system calls so that every read is bounded, cancellable and
// confined to the folder:
//
//   - a read opens the file without blocking (a FIFO in place of a chunk
//     cannot hang it), refuses anything but a regular file, checks the size
//     against the caller's bound before allocating, and returns when its
//     context ends even if the file system does not (the blocked system
//     call is left to finish on its own);
//   - paths are resolved beneath the store's root (openat2 with
//     RESOLVE_BENEATH on Linux, os.Root elsewhere): a symbolic link that
//     leads out of the store is refused unless Options.FollowSymlinks is
//     set, and the refusal names neither the target nor its size;
//   - each object's version comes from the opened file itself (size,
//     modification and status-change times, inode), so a file replaced in
//     place, renamed into place with an old mtime, or reached through a
//     re-pointed link, reads as changed;
//   - a root given as a symbolic link (current -> v2) is re-resolved by
//     Pin, so a server sees the link move.
package localfs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/zvfserve/zvfserve/zvf/storage"
)

// Options configure Open.
type Options struct {
	// FollowSymlinks lets symbolic links lead outside the store's root.
	FollowSymlinks bool
	// Logger receives warnings about folders a Walk skips.
	Logger *slog.Logger
	// MaxWalkEntries bounds the entries (files, folders, links) one Walk
	// visits; 0 means DefaultMaxWalkEntries.
	MaxWalkEntries int
	// MaxWalkTime bounds how long one Walk runs; 0 means
	// DefaultMaxWalkTime.
	MaxWalkTime time.Duration
	// Calls bounds the system calls of this store's reads, stats and
	// listings that have not returned; the stores of one process should
	// share one (NewCalls). Nil gives the store one of its own of
	// DefaultMaxCalls.
	Calls *Calls
}

// DefaultMaxCalls is the Calls bound a store gets of its own: far above
// what a busy server has waiting on a healthy disk (a request reads a few
// chunks at a time), far below Go's limit of 10,000 threads, each call
// blocked in the kernel holding one.
const DefaultMaxCalls = 2048

// Calls counts file system calls that have not returned. A call that
// blocks (a hung network mount) is left to finish on its own goroutine
// when its caller gives up (see async), so without a bound every retry of
// a viewer's tiles would leave another thread behind until the process
// ran out of them; past the bound a read fails at once as the backend
// being unavailable, and the calls that return make room again.
type Calls struct {
	n, max atomic.Int64
}

// NewCalls bounds calls at max (DefaultMaxCalls when max ≤ 0).
func NewCalls(max int) *Calls {
	c := &Calls{}
	if max <= 0 {
		max = DefaultMaxCalls
	}
	c.max.Store(int64(max))
	return c
}

// Pending is the number of calls that have not returned.
func (c *Calls) Pending() int { return int(c.n.Load()) }

func (c *Calls) enter() error {
	if n := c.n.Add(1); n > c.max.Load() {
		c.n.Add(-1)
		return fmt.Errorf("%d file system calls have not returned (a hung mount?)", n-1) // classify: unavailable
	}
	return nil
}

func (c *Calls) leave() { c.n.Add(-1) }

// Store is a local folder.
type Store struct {
	dir string // as given, made absolute
	o   Options
	t   *tree // what dir resolved to when this Store was made
}

// tree is one resolution of the store's root.
type tree struct {
	path string // the resolved folder
	id   string // path + device and inode: changes when the root is re-pointed
	dir  *os.File
	root *os.Root
	// noOpenat2 is set once openat2 is found missing (kernels before 5.6,
	// or a seccomp filter); os.Root then confines paths instead.
	noOpenat2 atomic.Bool
}

// Open opens the folder dir (absolute or relative; it may be a symbolic
// link to the folder).
func Open(dir string, o Options) (*Store, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Calls == nil {
		o.Calls = NewCalls(0)
	}
	t, err := resolve(abs)
	if err != nil {
		return nil, err
	}
	return &Store{dir: abs, o: o, t: t}, nil
}

func resolve(abs string) (*tree, error) {
	p, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	d, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	fi, err := d.Stat()
	if err != nil || !fi.IsDir() {
		_ = d.Close()
		if err == nil {
			// ENOTDIR, as os.Open would say, so that a caller can tell a
			// file given for a store from a failure.
			err = &fs.PathError{Op: "open", Path: abs, Err: syscall.ENOTDIR}
		}
		return nil, fmt.Errorf("open store: %w", err)
	}
	r, err := os.OpenRoot(p)
	if err != nil {
		_ = d.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}
	id := p
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id += "\x00" + strconv.FormatUint(uint64(st.Dev), 36) + "." + strconv.FormatUint(uint64(st.Ino), 36)
	}
	return &tree{path: p, id: id, dir: d, root: r}, nil
}

// Pin returns the store as its root resolves now (the same Store when the
// root has not been re-pointed) and an identity of that root that changes
// when it is.
func (s *Store) Pin(context.Context) (storage.Store, string, error) {
	p, err := filepath.EvalSymlinks(s.dir)
	if err != nil {
		return nil, "", &storage.Error{Op: "pin", Key: "", Err: fmt.Errorf("%w: store folder: %v", storage.ErrUnavailable, errno(err))}
	}
	if p == s.t.path {
		fi, err := os.Stat(p)
		if err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && s.t.id == p+"\x00"+strconv.FormatUint(uint64(st.Dev), 36)+"."+strconv.FormatUint(uint64(st.Ino), 36) {
				return s, s.t.id, nil
			}
		}
	}
	t, err := resolve(s.dir)
	if err != nil {
		return nil, "", &storage.Error{Op: "pin", Key: "", Err: fmt.Errorf("%w: store folder: %v", storage.ErrUnavailable, errno(err))}
	}
	// The previous tree stays open for whoever still reads it; its files
	// close when it becomes unreachable.
	return &Store{dir: s.dir, o: s.o, t: t}, t.id, nil
}

// errno strips an error down to its system error, dropping paths.
func errno(err error) error {
	var en syscall.Errno
	if errors.As(err, &en) {
		return en
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// validKey rejects keys that could escape the store root by their text.
func validKey(key string) error {
	if key == "" || strings.HasPrefix(key, "/") || strings.Contains(key, "\\") || strings.ContainsRune(key, 0) {
		return fmt.Errorf("invalid key %q", key)
	}
	for _, seg := range strings.Split(key, "/") {
		if seg == ".." || seg == "." || seg == "" {
			return fmt.Errorf("invalid key %q", key)
		}
	}
	return nil
}

// classify maps a system error to the storage kinds, never keeping the
// local path it came with.
func classify(op, key string, err error) error {
	e := errno(err)
	switch {
	case errors.Is(e, syscall.ENOENT), errors.Is(e, syscall.ENOTDIR), errors.Is(e, syscall.ENAMETOOLONG):
		return &storage.Error{Op: op, Key: key, Err: storage.ErrNotFound}
	case errors.Is(e, syscall.EXDEV), isEscape(err):
		return &storage.Error{Op: op, Key: key, Err: storage.ErrOutside}
	case errors.Is(e, syscall.ELOOP):
		return &storage.Error{Op: op, Key: key, Err: fmt.Errorf("%w: too many symbolic links", storage.ErrOutside)}
	case errors.Is(e, context.Canceled), errors.Is(e, context.DeadlineExceeded):
		return &storage.Error{Op: op, Key: key, Err: e}
	case errors.Is(e, storage.ErrNotRegular), errors.Is(e, storage.ErrTooLarge), errors.Is(e, storage.ErrChanged):
		return &storage.Error{Op: op, Key: key, Err: e}
	case errors.Is(e, syscall.EACCES), errors.Is(e, syscall.EPERM):
		return &storage.Error{Op: op, Key: key, Err: storage.ErrPermission}
	}
	return &storage.Error{Op: op, Key: key, Err: fmt.Errorf("%w: %v", storage.ErrUnavailable, e)}
}

// isEscape recognises os.Root's refusal of a path that leaves the root.
func isEscape(err error) bool {
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}

// version is an object's ETag: it changes when the file is rewritten,
// replaced or re-linked.
func version(size int64, mtime, ctime time.Time, ino uint64) string {
	return strconv.FormatInt(mtime.UnixNano(), 36) + "-" + strconv.FormatInt(ctime.UnixNano(), 36) + "-" +
		strconv.FormatInt(size, 36) + "-" + strconv.FormatUint(ino, 36)
}

func attrsOf(fi *fileInfo) storage.Attrs {
	mod := fi.mtime
	if fi.ctime.After(mod) {
		mod = fi.ctime
	}
	return storage.Attrs{Size: fi.size, ETag: version(fi.size, fi.mtime, fi.ctime, fi.ino), Modified: mod}
}

// fileInfo is what a read needs of fstat.
type fileInfo struct {
	regular, dir bool
	link         bool // only from lstatIn
	size         int64
	mtime, ctime time.Time
	ino, dev     uint64
}

func (a fileInfo) same(b fileInfo) bool {
	return a.size == b.size && a.mtime.Equal(b.mtime) && a.ctime.Equal(b.ctime) && a.ino == b.ino
}

// async runs f in its own goroutine and returns its result, or ctx's error
// as soon as ctx ends: a system call that blocks (a hung network file
// system) then holds only that goroutine, never the caller.
func async[T any](ctx context.Context, c *Calls, f func() (T, error)) (T, error) {
	return start(ctx, c, f)()
}

// start runs f in its own goroutine at once and returns a wait for its
// result (or ctx's error as soon as ctx ends), as async does; f counts
// among c's calls until it returns.
func start[T any](ctx context.Context, c *Calls, f func() (T, error)) (wait func() (T, error)) {
	err := ctx.Err()
	if err == nil {
		err = c.enter()
	}
	if err != nil {
		return func() (T, error) {
			var zero T
			return zero, err
		}
	}
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer c.leave()
		v, err := f()
		done <- result{v, err}
	}()
	return func() (T, error) {
		select {
		case r := <-done:
			return r.v, r.err
		case <-ctx.Done():
			var zero T
			return zero, ctx.Err()
		}
	}
}

// readPiece bounds one read system call so a long read notices its
// context between pieces.
const readPiece = 8 << 20

// Get implements storage.Store.
func (s *Store) Get(ctx context.Context, key string, o storage.ReadOptions) (storage.Object, error) {
	return s.Start(ctx, key, o)()
}

// Start implements storage.Starter: the read's system calls run on their
// own goroutine (see async) from the call on, so a caller that starts two
// reads at once gives neither a goroutine of its own.
func (s *Store) Start(ctx context.Context, key string, o storage.ReadOptions) (wait func() (storage.Object, error)) {
	if err := validKey(key); err != nil {
		return failed(&storage.Error{Op: "get", Key: key, Err: err})
	}
	if err := storage.CheckBound(o); err != nil {
		return failed(&storage.Error{Op: "get", Key: key, Err: err})
	}
	w := start(ctx, s.o.Calls, func() (storage.Object, error) { return s.read(ctx, key, o) })
	return func() (storage.Object, error) {
		obj, err := w()
		if err != nil {
			return storage.Object{}, s.missing("get", key, classify("get", key, err))
		}
		return obj, nil
	}
}

// StartAll implements storage.BatchStarter: the reads run one after the
// other on one goroutine of their own (a chunk's zarr.json and its bytes:
// one goroutine, not two), each collected as soon as it is done.
func (s *Store) StartAll(ctx context.Context, rs []storage.Read) []func() (storage.Object, error) {
	waits := make([]func() (storage.Object, error), len(rs))
	type result struct {
		obj storage.Object
		err error
	}
	cs := make([]chan result, len(rs))
	started := false
	for i, r := range rs {
		if err := validKey(r.Key); err != nil {
			waits[i] = failed(&storage.Error{Op: "get", Key: r.Key, Err: err})
			continue
		}
		if err := storage.CheckBound(r.Opt); err != nil {
			waits[i] = failed(&storage.Error{Op: "get", Key: r.Key, Err: err})
			continue
		}
		if err := ctx.Err(); err != nil {
			waits[i] = failed(s.missing("get", r.Key, classify("get", r.Key, err)))
			continue
		}
		cs[i] = make(chan result, 1)
		started = true
		key, c := r.Key, cs[i]
		waits[i] = func() (storage.Object, error) {
			var r result
			select {
			case r = <-c:
			case <-ctx.Done():
				r.err = ctx.Err()
			}
			if r.err != nil {
				return storage.Object{}, s.missing("get", key, classify("get", key, r.err))
			}
			return r.obj, nil
		}
	}
	if !started {
		return waits
	}
	if err := s.o.Calls.enter(); err != nil {
		for i, r := range rs {
			if cs[i] != nil {
				waits[i] = failed(classify("get", r.Key, err))
			}
		}
		return waits
	}
	go func() {
		defer s.o.Calls.leave()
		for i, r := range rs {
			if cs[i] == nil {
				continue
			}
			var res result
			if res.err = ctx.Err(); res.err == nil {
				res.obj, res.err = s.read(ctx, r.Key, r.Opt)
			}
			cs[i] <- res
		}
	}()
	return waits
}

func failed(err error) func() (storage.Object, error) {
	return func() (storage.Object, error) { return storage.Object{}, err }
}

// regularStat is f's fstat, or ErrNotRegular when f is not a regular
// file (a folder, a device, a socket: no object to read).
func regularStat(f *rawFile) (fileInfo, error) {
	fi, err := f.stat()
	if err == nil && !fi.regular {
		err = storage.ErrNotRegular
	}
	return fi, err
}

func (s *Store) read(ctx context.Context, key string, o storage.ReadOptions) (storage.Object, error) {
	f, err := s.t.openFile(key, s.o.FollowSymlinks)
	if err != nil {
		return storage.Object{}, err
	}
	defer f.close()
	fi, err := regularStat(f)
	if err != nil {
		return storage.Object{}, err
	}
	a := attrsOf(&fi)
	if o.IfMatch != "" && o.IfMatch != a.ETag {
		return storage.Object{}, &storage.ChangedError{Modified: a.Modified}
	}
	n, err := storage.Want(o, fi.size)
	if err != nil {
		return storage.Object{}, err
	}
	// Exactly what fstat said, in one read call for a file below
	// readPiece: a file that grew, shrank or was rewritten under the read
	// has another size or time in the fstat after it, so a read that
	// would meet the end of the file tells nothing more (and costs a
	// system call a file, two a cold chunk).
	buf := make([]byte, n)
	got := int64(0)
	for got < int64(len(buf)) {
		if err := ctx.Err(); err != nil {
			return storage.Object{}, err
		}
		end := min(int64(len(buf)), got+readPiece)
		k, err := f.pread(buf[got:end], o.Off+got)
		if err != nil {
			return storage.Object{}, err
		}
		if k == 0 {
			break
		}
		got += int64(k)
	}
	after, err := f.stat()
	if err != nil {
		return storage.Object{}, err
	}
	if got != n || !after.same(fi) {
		// Written while we read it: whatever we hold belongs to no version.
		return storage.Object{}, &storage.ChangedError{Modified: attrsOf(&after).Modified}
	}
	return storage.Object{Data: buf[:n:n], Attrs: a}, nil
}

// Stat implements storage.Store.
func (s *Store) Stat(ctx context.Context, key string) (storage.Attrs, error) {
	if err := validKey(key); err != nil {
		return storage.Attrs{}, &storage.Error{Op: "stat", Key: key, Err: err}
	}
	a, err := async(ctx, s.o.Calls, func() (storage.Attrs, error) {
		f, err := s.t.openPath(key, s.o.FollowSymlinks)
		if err != nil {
			return storage.Attrs{}, err
		}
		defer f.close()
		fi, err := regularStat(f)
		if err != nil {
			return storage.Attrs{}, err
		}
		return attrsOf(&fi), nil
	})
	if err != nil {
		return storage.Attrs{}, s.missing("stat", key, classify("stat", key, err))
	}
	return a, nil
}

// List implements storage.Store. Hidden entries (a leading dot) and the
// .attrs sidecars of gocloud's file driver are not keys.
func (s *Store) List(ctx context.Context, prefix string) (storage.Listing, error) {
	if prefix != "" {
		if err := validKey(strings.TrimSuffix(prefix, "/")); err != nil || !strings.HasSuffix(prefix, "/") {
			return storage.Listing{}, &storage.Error{Op: "list", Key: prefix, Err: fmt.Errorf("invalid prefix %q", prefix)}
		}
	}
	l, err := async(ctx, s.o.Calls, func() (storage.Listing, error) { return s.list(prefix) })
	if err != nil {
		if errors.Is(errno(err), syscall.ENOENT) || errors.Is(errno(err), syscall.ENOTDIR) {
			return storage.Listing{}, nil
		}
		return storage.Listing{}, classify("list", prefix, err)
	}
	return l, nil
}

func (s *Store) list(prefix string) (storage.Listing, error) {
	var l storage.Listing
	ents, err := s.t.readDir(strings.TrimSuffix(prefix, "/"), s.o.FollowSymlinks)
	if err != nil {
		return l, err
	}
	for _, e := range ents {
		name := e.Name()
		if skipName(name) {
			continue
		}
		dir := e.IsDir()
		if e.Type()&fs.ModeSymlink != 0 {
			// A link is a folder if it leads to one inside the store; any
			// other link is listed as a key, and reading it says why not.
			if f, err := s.t.openPath(prefix+name, s.o.FollowSymlinks); err == nil {
				fi, err := f.stat()
				f.close()
				dir = err == nil && fi.dir
			}
		}
		if dir {
			l.Prefixes = append(l.Prefixes, prefix+name+"/")
		} else {
			l.Keys = append(l.Keys, prefix+name)
		}
	}
	sort.Strings(l.Keys)
	sort.Strings(l.Prefixes)
	return l, nil
}

// FoldersHolding implements storage.FolderLister: one listing of prefix
// and an lstat of <folder>/<name> beside each folder entry, without a
// goroutine or a listing per folder. Links to folders are resolved as
// reads resolve them.
func (s *Store) FoldersHolding(ctx context.Context, prefix, name string) ([]string, error) {
	if prefix != "" {
		if err := validKey(strings.TrimSuffix(prefix, "/")); err != nil || !strings.HasSuffix(prefix, "/") {
			return nil, &storage.Error{Op: "list", Key: prefix, Err: fmt.Errorf("invalid prefix %q", prefix)}
		}
	}
	if err := validKey(name); err != nil || strings.Contains(name, "/") {
		return nil, &storage.Error{Op: "list", Key: prefix, Err: fmt.Errorf("invalid name %q", name)}
	}
	out, err := async(ctx, s.o.Calls, func() ([]string, error) {
		d, err := s.t.openDir(strings.TrimSuffix(prefix, "/"), s.o.FollowSymlinks)
		if err != nil {
			return nil, err
		}
		defer d.Close()
		ents, err := d.ReadDir(-1)
		if err != nil {
			return nil, err
		}
		var out []string
		for _, e := range ents {
			link := e.Type()&fs.ModeSymlink != 0
			if skipName(e.Name()) || !e.IsDir() && !link {
				continue
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if !link {
				// A folder (not a link): its entry, beside d, in one call.
				_, err = s.t.lstatIn(d, prefix, e.Name()+"/"+name)
			} else if f, ferr := s.t.openPath(prefix+e.Name()+"/"+name, s.o.FollowSymlinks); ferr != nil {
				err = ferr
			} else {
				f.close()
				err = nil
			}
			// Absent (or not a folder at all): not one; any other failure
			// is kept for the read to report.
			if en := errno(err); !errors.Is(en, syscall.ENOENT) && !errors.Is(en, syscall.ENOTDIR) {
				out = append(out, prefix+e.Name()+"/")
			}
		}
		sort.Strings(out)
		return out, nil
	})
	if err != nil {
		if errors.Is(errno(err), syscall.ENOENT) || errors.Is(errno(err), syscall.ENOTDIR) {
			return nil, nil
		}
		return nil, classify("list", prefix, err)
	}
	return out, nil
}

// FolderID names the folder at prefix ("" or ending in "/") by what it
// is, device and inode, the same through any link to it: a search that
// follows links can tell a loop.
func (s *Store) FolderID(ctx context.Context, prefix string) (string, error) {
	if prefix != "" {
		if err := validKey(strings.TrimSuffix(prefix, "/")); err != nil || !strings.HasSuffix(prefix, "/") {
			return "", &storage.Error{Op: "stat", Key: prefix, Err: fmt.Errorf("invalid prefix %q", prefix)}
		}
	}
	fi, err := async(ctx, s.o.Calls, func() (fileInfo, error) {
		p := strings.TrimSuffix(prefix, "/")
		if p == "" {
			p = "."
		}
		f, err := s.t.openPath(p, s.o.FollowSymlinks)
		if err != nil {
			return fileInfo{}, err
		}
		defer f.close()
		return f.stat()
	})
	if err != nil {
		return "", classify("stat", prefix, err)
	}
	if !fi.dir {
		return "", &storage.Error{Op: "stat", Key: prefix, Err: storage.ErrNotRegular}
	}
	return strconv.FormatUint(fi.dev, 36) + "." + strconv.FormatUint(fi.ino, 36), nil
}

func skipName(name string) bool {
	return strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".attrs")
}

// Now implements storage.Store. File systems stamp writes with the
// kernel's clock: finely (to the nanosecond) or from its coarse clock,
// which lags by up to a tick (a few milliseconds). A file written before
// Now therefore never carries a later time; one written within a tick
// after it may carry an earlier one, which is the limit of what times can
// tell (later writes of the same rewrite are seen).
func (s *Store) Now() time.Time { return time.Now() }

// Put implements storage.Writer: the object is written to a hidden
// temporary file beside it and renamed into place, so a reader sees the
// old bytes or the new, never a partial file.
func (s *Store) Put(ctx context.Context, key string, data []byte) error {
	if err := validKey(key); err != nil {
		return &storage.Error{Op: "put", Key: key, Err: err}
	}
	if err := ctx.Err(); err != nil {
		return &storage.Error{Op: "put", Key: key, Err: err}
	}
	r := s.t.root
	dir, base := "", key
	if i := strings.LastIndexByte(key, '/'); i >= 0 {
		dir, base = key[:i], key[i+1:]
		if err := r.MkdirAll(dir, 0o755); err != nil {
			return classify("put", key, err)
		}
	}
	tmp := "." + base + ".tmp-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if dir != "" {
		tmp = dir + "/" + tmp
	}
	f, err := r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return classify("put", key, err)
	}
	_, werr := f.Write(data)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = r.Remove(tmp)
		return classify("put", key, err)
	}
	if err := r.Rename(tmp, key); err != nil {
		_ = r.Remove(tmp)
		return classify("put", key, err)
	}
	return nil
}

// Delete implements storage.Writer.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := validKey(key); err != nil {
		return &storage.Error{Op: "delete", Key: key, Err: err}
	}
	if err := ctx.Err(); err != nil {
		return &storage.Error{Op: "delete", Key: key, Err: err}
	}
	if err := s.t.root.Remove(key); err != nil {
		return classify("delete", key, err)
	}
	return nil
}

// Close implements storage.Store.
func (s *Store) Close() error {
	return errors.Join(s.t.root.Close(), s.t.dir.Close())
}

var (
	_ storage.Writer       = (*Store)(nil)
	_ storage.BatchStarter = (*Store)(nil)
	_ storage.FolderLister = (*Store)(nil)
)
