package localfs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/zvfserve/zvfserve/zvf/storage"
)

// Absent implements storage.AbsenceDater: the later of the modification
// and status-change times of the nearest folder above key that still
// exists — a folder's times move when an entry is added to it or removed
// from it, so a key missing from a folder unchanged since a moment was
// missing then too. Folders are tried from key's own upwards; the store's
// root always answers (its open descriptor, even once the folder itself is
// deleted). Zero when a folder cannot be examined.
func (s *Store) Absent(ctx context.Context, key string) (time.Time, error) {
	if err := validKey(key); err != nil {
		return time.Time{}, &storage.Error{Op: "stat", Key: key, Err: err}
	}
	return async(ctx, s.o.Calls, func() (time.Time, error) {
		dir := key
		for {
			i := strings.LastIndexByte(dir, '/')
			if i < 0 {
				break
			}
			dir = dir[:i]
			f, err := s.t.openPath(dir, s.o.FollowSymlinks)
			if err != nil {
				if e := errno(err); errors.Is(e, syscall.ENOENT) || errors.Is(e, syscall.ENOTDIR) {
					continue // gone too: the folder above says when
				}
				return time.Time{}, nil
			}
			fi, err := f.stat()
			f.close()
			if err != nil || !fi.dir {
				return time.Time{}, nil
			}
			return later(fi.mtime, fi.ctime), nil
		}
		fi, err := statOS(s.t.dir)
		if err != nil {
			return time.Time{}, nil
		}
		return later(fi.mtime, fi.ctime), nil
	})
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// missing is the error of a read or stat of key that found nothing (err
// matches storage.ErrNotFound): a *storage.ChangedError instead when the
// store's root is no longer the folder this Store reads — deleted, or its
// link re-pointed (current -> v2, then rm -rf v1) — so that a reader of
// the old version is told the store changed rather than that its objects
// do not exist. The change is dated by the link's own time when the root
// is a link.
func (s *Store) missing(op, key string, err error) error {
	if !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	p, perr := filepath.EvalSymlinks(s.dir)
	if perr == nil && p == s.t.path {
		if fi, serr := os.Stat(p); serr == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && s.t.id == p+"\x00"+strconv.FormatUint(uint64(st.Dev), 36)+"."+strconv.FormatUint(uint64(st.Ino), 36) {
				return err // the same folder: the key is missing from it
			}
		}
	}
	var at time.Time
	if fi, lerr := os.Lstat(s.dir); lerr == nil && fi.Mode()&os.ModeSymlink != 0 {
		at = fi.ModTime()
	}
	return &storage.Error{Op: op, Key: key, Err: &storage.ChangedError{Modified: at}}
}
