//go:build linux

package localfs

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/storage"
)

// readCalls is the process's count of read system calls so far (syscr of
// /proc/self/io: read, pread64 and their kin, on every thread), or -1
// where the kernel does not account for them.
func readCalls(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return -1
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "syscr: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("/proc/self/io: %q", line)
			}
			return n
		}
	}
	return -1
}

// TestWholeReadIsOneReadCall: a whole file is read with one read system
// call once its size is known from fstat — not a second that meets its
// end to tell whether it grew (the fstat after the read tells that, and a
// cold query reads two files a chunk). What is read is the file.
// Not parallel: the count is the process's.
func TestWholeReadIsOneReadCall(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	want := bytes.Repeat([]byte("0123456789abc"), 3600) // a 0.7 chunk's size
	if err := os.WriteFile(filepath.Join(dir, "c0"), want, 0o644); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(dir, "empty"), "")
	st := open(t, dir, Options{})
	if readCalls(t) < 0 {
		t.Skip("no read accounting in /proc/self/io")
	}
	const n = 50
	for _, tc := range []struct {
		key  string
		want []byte
	}{{"c0", want}, {"empty", nil}} {
		before := readCalls(t)
		for range n {
			obj, err := st.Get(ctx, tc.key, storage.Whole(1<<20))
			if err != nil || !bytes.Equal(obj.Data, tc.want) {
				t.Fatalf("%s: %d bytes, %v", tc.key, len(obj.Data), err)
			}
		}
		// The two reads of /proc/self/io count themselves (one or two
		// calls each).
		if got := readCalls(t) - before; got > n+4 {
			t.Errorf("%s: %d whole reads made %d read calls, want %d", tc.key, n, got, n)
		}
	}
}
