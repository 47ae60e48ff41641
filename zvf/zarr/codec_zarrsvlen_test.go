package zarr

import (
	"context"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/memstore"
)

// A string array through zarrs.vlen with zstd on the data and crc32c on
// the index, index at the end: written and read back through the pipeline.
func TestZarrsVlenArray(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	defer st.Close()
	meta := []byte(`{"zarr_format":3,"node_type":"array","shape":[5],"data_type":"string",
	 "chunk_grid":{"name":"regular","configuration":{"chunk_shape":[3]}},
	 "chunk_key_encoding":{"name":"default","configuration":{"separator":"/"}},"fill_value":"",
	 "codecs":[{"name":"https://codec.zarrs.dev/array_to_bytes/vlen","configuration":{
	   "data_codecs":[{"name":"bytes"},{"name":"zstd","configuration":{"level":3}}],
	   "index_codecs":[{"name":"bytes","configuration":{"endian":"little"}},{"name":"crc32c"}],
	   "index_data_type":"uint32","index_location":"end"}}]}`)
	n, err := ParseNode(meta)
	if err != nil {
		t.Fatal(err)
	}
	a, err := CreateArray(ctx, st, "s", n.Array, nil)
	if err != nil {
		t.Fatal(err)
	}
	vals := [][]byte{[]byte("alpha"), []byte(""), []byte("γάμμα"), []byte("delta"), []byte("e")}
	if err := a.WriteChunk(ctx, st, []int64{0}, &Chunk{Shape: []int64{3}, Type: n.Array.DataType, Elems: vals[:3]}); err != nil {
		t.Fatal(err)
	}
	if err := a.WriteChunk(ctx, st, []int64{1}, &Chunk{Shape: []int64{3}, Type: n.Array.DataType, Elems: append(vals[3:5:5], []byte{})}); err != nil {
		t.Fatal(err)
	}
	b, err := OpenArray(ctx, st, "s", nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range vals {
		if string(got.Elems[i]) != string(vals[i]) {
			t.Fatalf("element %d = %q", i, got.Elems[i])
		}
	}
	// A flipped index byte fails the crc32c, not the process.
	raw, _ := storage.ReadAll(ctx, st, "s/c/0", 1<<20)
	raw[len(raw)-10] ^= 0xff
	_ = st.Put(ctx, "s/c/0", raw)
	if _, err := b.ReadChunk(ctx, []int64{0}); err == nil {
		t.Fatal("corrupted index accepted")
	}
}
