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

// TestInverseOfRepeatedMentionsIsBounded: the owners map (which object
// names each fragment first; every bbox of a level with objects builds
// it) keeps an entry for every fragment every manifest names, outside the
// cache's budget. A manifest naming 61 fragments 100,000 times (5 KB of
// zstd) made the first bbox take 4.7 s and the process 966 MB; at the
// chunk limit it would be some 17 GB. The entries are bounded like an
// array read whole (zarr Limits.MaxReadBytes): more is refused.
func TestInverseOfRepeatedMentionsIsBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := repeatFirstBlock(t, 40000)
	codecs := zarr.NewCodecs(zarr.Limits{MaxChunkBytes: 4 << 20, MaxReadBytes: 1 << 20})
	st, err := zvf.Open(ctx, zvftest.Store(t, dir), zvf.Options{Name: "p", Codecs: codecs})
	if err != nil {
		t.Fatal(err)
	}
	l, err := st.Level(0)
	if err != nil {
		t.Fatal(err)
	}
	key := l.Keys()[0]
	ids, err := l.ChunkObjects(ctx, key)
	if !errors.Is(err, zvf.ErrUnsupported) {
		t.Fatalf("chunk %s: %d owners, err %v; want the owners map refused as too large", key, len(ids), err)
	}
}

// repeatFirstBlock rewrites polylines object 0's manifest as copies of
// its first block (one fragment), in a copy of the fixture it returns.
func repeatFirstBlock(t *testing.T, copies int) string {
	t.Helper()
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
	big := binary.LittleEndian.AppendUint32(nil, uint32(copies))
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
	return dir
}
