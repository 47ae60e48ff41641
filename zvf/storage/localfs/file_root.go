package localfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// The portable half of file access; file_linux.go has the fast path and
// file_other.go the rest for other systems.

// openRoot opens key through os.Root, which confines it to the store the
// portable way (one component at a time).
func (t *tree) openRoot(key string, flags int, follow bool) (*rawFile, error) {
	// O_PATH and friends are Linux-only; os.Root wants plain read flags.
	var f *os.File
	var err error
	if follow {
		f, err = os.OpenFile(t.path+string(os.PathSeparator)+key, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	} else {
		f, err = t.root.OpenFile(key, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	}
	if err != nil {
		return nil, err
	}
	return &rawFile{fd: -1, f: f}, nil
}

func statOS(f *os.File) (fileInfo, error) {
	fi, err := f.Stat()
	if err != nil {
		return fileInfo{}, err
	}
	return infoFrom(fi), nil
}

func infoFrom(fi os.FileInfo) fileInfo {
	out := fileInfo{regular: fi.Mode().IsRegular(), dir: fi.IsDir(), link: fi.Mode()&os.ModeSymlink != 0, size: fi.Size(), mtime: fi.ModTime(), ctime: fi.ModTime()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		out.ino = uint64(st.Ino)
		out.dev = uint64(st.Dev)
		out.ctime = ctimeOf(st)
	}
	return out
}

func preadOS(f *os.File, b []byte, off int64) (int, error) {
	n, err := f.ReadAt(b, off)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return n, err
}

// readDir reads every entry of the folder dir ("" is the root).
func (t *tree) readDir(dir string, follow bool) ([]fs.DirEntry, error) {
	f, err := t.openDir(dir, follow)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}
