package zvf_test

import (
	"context"
	"errors"
	"testing"

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
	dir := repeatFirstBlock(t, 20000)
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
