//go:build !linux

package localfs

import (
	"os"
	"syscall"
	"time"
)

type rawFile struct {
	fd int
	f  *os.File
}

func (t *tree) openFile(key string, follow bool) (*rawFile, error) {
	return t.openRoot(key, 0, follow)
}

func (t *tree) openPath(key string, follow bool) (*rawFile, error) {
	return t.openRoot(key, 0, follow)
}

// openDir opens the folder dir ("" is the root) to read its entries.
func (t *tree) openDir(dir string, follow bool) (*os.File, error) {
	if dir == "" {
		dir = "."
	}
	rf, err := t.openRoot(dir, 0, follow)
	if err != nil {
		return nil, err
	}
	return rf.f, nil
}

func (f *rawFile) stat() (fileInfo, error)                { return statOS(f.f) }
func (f *rawFile) pread(b []byte, off int64) (int, error) { return preadOS(f.f, b, off) }
func (f *rawFile) close()                                 { _ = f.f.Close() }

// ctimeOf falls back to the modification time where the status-change
// time is not portable.
func ctimeOf(st *syscall.Stat_t) time.Time { return time.Time{} }

// lstatIn stats rel relative to the open folder d (whose key is dir),
// without following a final link.
func (t *tree) lstatIn(_ *os.File, dir, rel string) (fileInfo, error) {
	fi, err := t.root.Lstat(dir + rel)
	if err != nil {
		return fileInfo{}, err
	}
	return infoFrom(fi), nil
}
