//go:build !linux

package localfs

import (
	"io/fs"
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

func (t *tree) readDir(dir string, follow bool) ([]fs.DirEntry, error) {
	if dir == "" {
		dir = "."
	}
	rf, err := t.openRoot(dir, 0, follow)
	if err != nil {
		return nil, err
	}
	defer rf.f.Close()
	return rf.f.ReadDir(-1)
}

func (f *rawFile) stat() (fileInfo, error)                { return statOS(f.f) }
func (f *rawFile) pread(b []byte, off int64) (int, error) { return preadOS(f.f, b, off) }
func (f *rawFile) close()                                 { _ = f.f.Close() }

// ctimeOf falls back to the modification time where the status-change
// time is not portable.
func ctimeOf(st *syscall.Stat_t) time.Time { return time.Time{} }
