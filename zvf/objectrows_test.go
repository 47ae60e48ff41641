package zvf_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/zarr"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// TestRepeatedManifestBlocksAreBounded: a manifest may name the same
// fragments again and again (200,000 copies of one block are 6.6 MB, a
// few KB once zstd has them), and an object's rows were all gathered —
// 56 bytes of reference and a vertex row each — before anyone compared
// their count with a limit: 5 KB of store made one request hold 1.1 GB
// for 8.2 million rows, then answer 413. An object whose rows would take
// more than one decoded chunk may hold (zarr Limits.MaxChunkBytes) is
// refused before they are gathered. Here: 20,000 copies of object 0's
// first block under a 1 MiB limit.
func TestRepeatedManifestBlocksAreBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := zvftest.CopyTree(t, filepath.Join(fixtures, "polylines.zarrvectors"))
	p := filepath.Join(dir, "0", "object_index", "manifests", "c", "0")
	z, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	dec, _ := zstd.NewReader(nil)
	raw, err := dec.DecodeAll(z, nil)
	dec.Close()
	if err != nil {
		t.Fatal(err)
	}
	// vlen-bytes: u32 count, then u32 length + bytes per element.
	n := binary.LittleEndian.Uint32(raw)
	elems := make([][]byte, n)
	for i, q := 0, 4; i < int(n); i++ {
		l := int(binary.LittleEndian.Uint32(raw[q:]))
		elems[i], q = raw[q+4:q+4+l], q+4+l
	}
	m := elems[0]
	first := m[4 : 4+24+1+8] // chunk key, mode, …
	if m[4+24] != 0 {
		t.Fatalf("object 0's first block has mode %d, want 0 (one fragment)", m[4+24])
	}
	const copies = 20000
	big := binary.LittleEndian.AppendUint32(nil, copies)
	big = append(big, bytes.Repeat(first, copies)...)
	elems[0] = big
	out := binary.LittleEndian.AppendUint32(nil, n)
	for _, e := range elems {
		out = binary.LittleEndian.AppendUint32(out, uint32(len(e)))
		out = append(out, e...)
	}
	enc, _ := zstd.NewWriter(nil)
	z = enc.EncodeAll(out, nil)
	enc.Close()
	if err := os.WriteFile(p, z, 0o644); err != nil {
		t.Fatal(err)
	}
	codecs := zarr.NewCodecs(zarr.Limits{MaxChunkBytes: 1 << 20})
	st, err := zvf.Open(ctx, zvftest.Store(t, dir), zvf.Options{Name: "p", Codecs: codecs})
	if err != nil {
		t.Fatal(err)
	}
	l, err := st.Level(0)
	if err != nil {
		t.Fatal(err)
	}
	o, err := l.Object(ctx, 0, nil)
	if !errors.Is(err, zvf.ErrUnsupported) {
		n := int64(-1)
		if o != nil {
			n = o.Count
		}
		t.Fatalf("object 0: %d rows, err %v; want it refused as too large", n, err)
	}
	// Another object of the level is read as before.
	if _, err := l.Object(ctx, 1, nil); err != nil {
		t.Fatalf("object 1: %v", err)
	}
}
