package zvf_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// fuzzTarget is one object of a 0.9 fixture that FuzzLayout09 replaces.
type fuzzTarget struct {
	store, key string
	cell       bool // a one-cell vlen-bytes chunk: the input is its cell
}

var fuzzTargets09 = []fuzzTarget{
	{"graph_v09", "0/vertices/zarr.json", false},                   // shape, codecs, nonempty_chunks, chunk_grid_origin
	{"graph_v09", "0/links/0/zarr.json", false},                    // link family: width, store, directed
	{"graph_v09", "0/links/0/0.0.+1/zarr.json", false},             // segment: offsets, has_perm
	{"graph_v09", "0/vertices/c/3/4/5", true},                      // vertex cell
	{"graph_v09", "0/vertex_fragments/c/3/4/5", true},              // fragment index cell
	{"graph_v09", "0/links/0/0.0.0/c/3/4/5", true},                 // flat intra links
	{"graph_v09", "0/links/0/0.0.+1/c/3/4/5", true},                // ragged cross links with perm_idx
	{"graph_v09", "0/links/0/0.0.+1/c/3/4/5", false},               // the vlen-bytes framing itself
	{"mesh_sharded_v09", "0/vertices/c/0/0/0", false},              // a shard: cells and index
	{"mesh_sharded_v09", "0/links/0/0.0.0_0.0.0/zarr.json", false}, // sharded triangle segment
}

// memFixture09 copies a 0.9 fixture into a mem:// bucket.
func memFixture09(tb testing.TB, name string) storage.Writer {
	tb.Helper()
	st := zvftest.Store(tb, "mem://")
	zvftest.Upload(tb, st, filepath.Join(fixtures09, name+".zarrvectors"))
	return st
}

// FuzzLayout09: any bytes in place of a 0.9 family's metadata, a cell, a
// link cell or a shard give a typed *zvf.Error or an answer — from Open,
// a bbox with connectivity over the whole level and an object — never a
// panic or an allocation sized by the hostile bytes (zarr.Limits).
func FuzzLayout09(f *testing.F) {
	ctx := context.Background()
	stores := map[string]storage.Writer{}
	orig := make([][]byte, len(fuzzTargets09))
	for i, tg := range fuzzTargets09 {
		if stores[tg.store] == nil {
			stores[tg.store] = memFixture09(f, tg.store)
		}
		b, err := os.ReadFile(filepath.Join(fixtures09, tg.store+".zarrvectors", tg.key))
		if err != nil {
			f.Fatal(err)
		}
		orig[i] = b
		seed := b
		if tg.cell {
			seed = b[8:] // past the count and the cell's length
		}
		f.Add(uint8(i), seed)
	}
	f.Add(uint8(0), []byte(`{"zarr_format":3,"node_type":"array","shape":[1e300],"data_type":"variable_length_bytes"}`))
	f.Add(uint8(6), []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f})
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		i := int(which) % len(fuzzTargets09)
		tg := fuzzTargets09[i]
		st := stores[tg.store]
		if tg.cell {
			data = withCell(data)
		}
		if err := st.Put(ctx, tg.key, data); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := st.Put(ctx, tg.key, orig[i]); err != nil {
				t.Fatal(err)
			}
		}()
		typed := func(what string, err error) {
			var ze *zvf.Error
			if err != nil && !errors.As(err, &ze) {
				t.Fatalf("%s: %T %v, want a *zvf.Error", what, err, err)
			}
		}
		s, err := zvf.Open(ctx, st, zvf.Options{Name: tg.store})
		typed("open", err)
		if err != nil {
			return
		}
		l, err := s.Level(0)
		if err != nil {
			t.Fatal(err)
		}
		_, err = l.BBox(ctx, zvf.BBoxQuery{Min: []float64{-1e9, -1e9, -1e9}, Max: []float64{1e9, 1e9, 1e9}, Connectivity: true}, func(*zvf.Batch) error { return nil })
		typed("bbox", err)
		_, err = l.Object(ctx, 0, []string{"*"})
		typed("object", err)
	})
}
