package localfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/zvfserve/zvfserve/zvf/storage"
)

// Bounds of one Walk, whatever the folder holds (Options override them).
const (
	DefaultMaxWalkEntries = 10_000_000
	DefaultMaxWalkTime    = 10 * time.Minute
)

const (
	// walkWarnings is how many skipped folders or entries one walk logs
	// one by one; the rest are counted in one warning at its end.
	walkWarnings = 5
	// walkBatch is how many entries of a folder are read (and stat'ed)
	// at a time, so a huge folder is never held whole.
	walkBatch = 1024
)

// errWalkTime is the cause of a walk's own deadline.
var errWalkTime = errors.New("walk ran past its time bound")

// fileID is a folder's identity: two paths to one folder (a link, a bind
// mount) have the same.
type fileID struct{ dev, ino uint64 }

// Walk implements storage.Store. It ends, whatever links the folder
// holds:
//
//   - each folder is walked once, known by device and inode: a link to a
//     folder already walked (x -> ., a link back to a parent, two links
//     to one folder) is skipped with a warning. Folders are walked before
//     the links to folders, so a folder reachable both ways is reported
//     under its own path;
//   - it visits at most Options.MaxWalkEntries entries and runs at most
//     Options.MaxWalkTime; past either it fails with storage.ErrTooLarge;
//   - folders and entries that cannot be read (permissions, paths too
//     long for the system, links leading nowhere) are skipped: a stray
//     lost+found must not make a whole store unreadable (the folders a
//     store's data lives in are read by List and Get, which report such
//     errors). The first few are logged one by one, the rest counted in
//     one warning at the end.
func (s *Store) Walk(ctx context.Context, prefix string, fn func(string, storage.Attrs) error) error {
	if prefix != "" {
		if err := validKey(strings.TrimSuffix(prefix, "/")); err != nil || !strings.HasSuffix(prefix, "/") {
			return &storage.Error{Op: "walk", Key: prefix, Err: fmt.Errorf("invalid prefix %q", prefix)}
		}
	}
	w := &walker{s: s, fn: fn, prefix: prefix, limit: s.o.MaxWalkTime, max: s.o.MaxWalkEntries, seen: map[fileID]bool{}}
	if w.limit <= 0 {
		w.limit = DefaultMaxWalkTime
	}
	if w.max <= 0 {
		w.max = DefaultMaxWalkEntries
	}
	var cancel context.CancelFunc
	w.ctx, cancel = context.WithTimeoutCause(ctx, w.limit, errWalkTime)
	defer cancel()
	err := w.run()
	if w.skipped > walkWarnings {
		s.o.Logger.Warn("a walk skipped more folders or entries than it logged", "prefix", prefix, "more", w.skipped-walkWarnings)
	}
	return err
}

type walker struct {
	s       *Store
	ctx     context.Context
	fn      func(string, storage.Attrs) error
	prefix  string
	limit   time.Duration
	max     int
	entries int
	seen    map[fileID]bool
	// links are the links to folders met so far, followed once every
	// folder reachable without them has been walked.
	links   []string
	skipped int
}

func (w *walker) run() error {
	stack := []string{w.prefix}
	for len(stack) > 0 {
		dir := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		subs, err := w.folder(dir)
		if err != nil {
			return err
		}
		sort.Sort(sort.Reverse(sort.StringSlice(subs))) // popped in name order
		stack = append(stack, subs...)
		if len(stack) == 0 && len(w.links) > 0 {
			sort.Sort(sort.Reverse(sort.StringSlice(w.links)))
			stack, w.links = w.links, nil
		}
	}
	return nil
}

// folder reports the objects directly in dir and returns its subfolders.
func (w *walker) folder(dir string) ([]string, error) {
	type opened struct {
		f  *os.File
		fi fileInfo
	}
	o, err := async(w.ctx, w.s.o.Calls, func() (opened, error) {
		f, err := w.s.t.openDir(strings.TrimSuffix(dir, "/"), w.s.o.FollowSymlinks)
		if err != nil {
			return opened{}, err
		}
		fi, err := statOS(f)
		if err != nil {
			_ = f.Close()
			return opened{}, err
		}
		return opened{f, fi}, nil
	})
	if err != nil {
		if e := w.stopped(err); e != nil {
			return nil, e
		}
		if dir == w.prefix && errors.Is(errno(err), syscall.ENOENT) {
			return nil, nil
		}
		w.warn("skipping a folder that cannot be read", "folder", dir, "err", errno(err))
		return nil, nil
	}
	f := o.f
	// Reads of f run off the caller and may outlive the walk (it returns
	// when its context ends): each holds fmu, and f is closed under it,
	// so a close never lands in a read in progress (os.File's ReadDir is
	// not safe against a concurrent Close: a data race, then a nil
	// dereference that took the process down when a check's deadline
	// ended a walk), and a read after the close finds it closed.
	var fmu sync.Mutex
	closed := false
	use := func(read func() error) error {
		fmu.Lock()
		defer fmu.Unlock()
		if closed {
			return os.ErrClosed
		}
		return read()
	}
	defer func() {
		closeF := func() {
			fmu.Lock()
			closed = true
			_ = f.Close()
			fmu.Unlock()
		}
		if w.ctx.Err() != nil {
			// A read of f may still be blocked in the file system: the
			// close waits for it, off the caller.
			go closeF()
			return
		}
		closeF()
	}()
	id := fileID{o.fi.dev, o.fi.ino}
	if w.seen[id] {
		w.warn("skipping a folder walked already (a link to it, or a loop)", "folder", dir)
		return nil, nil
	}
	w.seen[id] = true
	var subs []string
	for {
		ents, rerr := async(w.ctx, w.s.o.Calls, func() (ents []fs.DirEntry, err error) {
			if uerr := use(func() error { ents, err = f.ReadDir(walkBatch); return nil }); uerr != nil {
				return nil, uerr
			}
			return ents, err // io.EOF itself at the end
		})
		if e := w.stopped(rerr); e != nil {
			return nil, e
		}
		var files []string
		var links []bool
		for _, e := range ents {
			name := e.Name()
			if skipName(name) {
				continue
			}
			if w.entries++; w.entries > w.max {
				return nil, &storage.Error{Op: "walk", Key: w.prefix, Err: fmt.Errorf("%w: more than %d entries (files, folders, links) below it", storage.ErrTooLarge, w.max)}
			}
			if e.IsDir() {
				subs = append(subs, dir+name+"/")
			} else {
				files = append(files, dir+name)
				links = append(links, e.Type()&fs.ModeSymlink != 0)
			}
		}
		infos, err := w.stat(f, use, dir, files, links)
		if err != nil {
			return nil, err
		}
		for i, in := range infos {
			switch {
			case in.err != nil:
				w.warn("skipping an entry that cannot be read", "key", files[i], "err", errno(in.err))
			case in.dir: // a link to a folder
				w.links = append(w.links, files[i]+"/")
			default:
				if err := w.fn(files[i], in.attrs); err != nil {
					return nil, err
				}
			}
		}
		switch {
		case rerr == io.EOF:
			return subs, nil
		case rerr != nil:
			w.warn("skipping the rest of a folder that cannot be read", "folder", dir, "err", errno(rerr))
			return subs, nil
		}
	}
}

type entryInfo struct {
	attrs storage.Attrs
	dir   bool
	err   error
}

// stat reads the versions of one batch of the entries of folder d (at
// key dir): an entry that is not a link in one system call beside d, a
// link resolved as reads resolve it.
func (w *walker) stat(d *os.File, use func(func() error) error, dir string, keys []string, links []bool) ([]entryInfo, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	out, err := async(w.ctx, w.s.o.Calls, func() (out []entryInfo, err error) {
		err = use(func() error { out, err = w.statBatch(d, dir, keys, links); return err })
		return out, err
	})
	if err != nil {
		return nil, w.stopped(err)
	}
	return out, nil
}

// statBatch is stat's work, with d held open.
func (w *walker) statBatch(d *os.File, dir string, keys []string, links []bool) ([]entryInfo, error) {
	out := make([]entryInfo, len(keys))
	for i, k := range keys {
		if err := w.ctx.Err(); err != nil {
			return nil, err
		}
		var fi fileInfo
		var err error
		if !links[i] {
			fi, err = w.s.t.lstatIn(d, dir, k[len(dir):])
		}
		if links[i] || err == nil && fi.link {
			fi, err = w.resolve(k)
		}
		switch {
		case err != nil:
			out[i].err = err
		case fi.dir:
			out[i].dir = true
		default:
			out[i].attrs = attrsOf(&fi)
		}
	}
	return out, nil
}

// resolve stats what the link at key leads to.
func (w *walker) resolve(key string) (fileInfo, error) {
	f, err := w.s.t.openPath(key, w.s.o.FollowSymlinks)
	if err != nil {
		return fileInfo{}, err
	}
	defer f.close()
	return f.stat()
}

// stopped is the walk's error when err is its context ending (its own
// time bound or the caller's), else nil.
func (w *walker) stopped(err error) error {
	if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	if context.Cause(w.ctx) == errWalkTime {
		return &storage.Error{Op: "walk", Key: w.prefix, Err: fmt.Errorf("%w: still walking after %s", storage.ErrTooLarge, w.limit)}
	}
	return &storage.Error{Op: "walk", Key: w.prefix, Err: err}
}

func (w *walker) warn(msg string, args ...any) {
	if w.skipped++; w.skipped <= walkWarnings {
		w.s.o.Logger.Warn(msg, args...)
	}
}
