//go:build linux

package localfs

import (
	"errors"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// rawFile is an open descriptor; reads use pread on it directly.
type rawFile struct {
	fd int
	f  *os.File // the fallback's file, when os.Root opened it
}

func (t *tree) open(key string, flags int, follow bool) (*rawFile, error) {
	if t.noOpenat2.Load() {
		return t.openRoot(key, flags, follow)
	}
	fd := -1
	var err error
	cerr := rawControl(t.dir, func(dfd int) {
		for {
			if follow {
				fd, err = unix.Openat(dfd, key, flags|unix.O_CLOEXEC, 0)
			} else {
				fd, err = unix.Openat2(dfd, key, &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC),
					Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS})
			}
			if err != unix.EINTR && err != unix.EAGAIN {
				return
			}
		}
	})
	if cerr != nil {
		return nil, cerr
	}
	if errors.Is(err, unix.ENOSYS) {
		t.noOpenat2.Store(true)
		return t.openRoot(key, flags, follow)
	}
	if err != nil {
		return nil, err
	}
	return &rawFile{fd: fd}, nil
}

func rawControl(d *os.File, f func(fd int)) error {
	rc, err := d.SyscallConn()
	if err != nil {
		return err
	}
	return rc.Control(func(fd uintptr) { f(int(fd)) })
}

// openFile opens key for reading without blocking on FIFOs or devices.
func (t *tree) openFile(key string, follow bool) (*rawFile, error) {
	return t.open(key, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, follow)
}

// openPath opens key only to stat it.
func (t *tree) openPath(key string, follow bool) (*rawFile, error) {
	return t.open(key, unix.O_PATH, follow)
}

// openDir opens the folder dir ("" is the root) to read its entries.
func (t *tree) openDir(dir string, follow bool) (*os.File, error) {
	if dir == "" {
		dir = "."
	}
	rf, err := t.open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NONBLOCK, follow)
	if err != nil {
		return nil, err
	}
	if rf.f != nil {
		return rf.f, nil
	}
	return os.NewFile(uintptr(rf.fd), dir), nil
}

func (f *rawFile) stat() (fileInfo, error) {
	if f.f != nil {
		return statOS(f.f)
	}
	var st unix.Stat_t
	for {
		err := unix.Fstat(f.fd, &st)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fileInfo{}, err
		}
		break
	}
	return infoOf(&st), nil
}

func infoOf(st *unix.Stat_t) fileInfo {
	mode := st.Mode & unix.S_IFMT
	return fileInfo{regular: mode == unix.S_IFREG, dir: mode == unix.S_IFDIR, link: mode == unix.S_IFLNK, size: st.Size,
		mtime: time.Unix(st.Mtim.Unix()), ctime: time.Unix(st.Ctim.Unix()), ino: st.Ino, dev: st.Dev}
}

// lstatIn stats rel relative to the open folder d (whose key is dir),
// without following a final link, in one system call. rel is an entry
// of d, or an entry of a subfolder d listed as a folder (not a link).
func (t *tree) lstatIn(d *os.File, dir, rel string) (fileInfo, error) {
	var st unix.Stat_t
	var err error
	if cerr := rawControl(d, func(fd int) {
		for {
			if err = unix.Fstatat(fd, rel, &st, unix.AT_SYMLINK_NOFOLLOW); err != unix.EINTR {
				return
			}
		}
	}); cerr != nil {
		return fileInfo{}, cerr
	}
	if err != nil {
		return fileInfo{}, err
	}
	return infoOf(&st), nil
}

func (f *rawFile) pread(b []byte, off int64) (int, error) {
	if f.f != nil {
		return preadOS(f.f, b, off)
	}
	for {
		n, err := unix.Pread(f.fd, b, off)
		if err == unix.EINTR {
			continue
		}
		return n, err
	}
}

func (f *rawFile) close() {
	if f.f != nil {
		_ = f.f.Close()
		return
	}
	_ = unix.Close(f.fd)
}

func ctimeOf(st *syscall.Stat_t) time.Time { return time.Unix(st.Ctim.Unix()) }
