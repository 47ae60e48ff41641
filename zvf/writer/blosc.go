package writer

import "github.com/zvfserve/zvfserve/zvf/zarr/blosc"

// bloscCodec is the reference's "blosc" preset: zstd at clevel 5 with bit
// shuffle on 4-byte items, configuration keys in the order zarr writes them.
// Like the reference (zarr's encoder path), all-zero blobs get no c/0.
func bloscCodec() (*blobCodec, error) {
	// One encoder for the store: it keeps its zstd tables between blobs.
	enc, err := blosc.NewEncoder(blosc.Options{Codec: "zstd", Level: 5, Shuffle: blosc.BitShuffle, TypeSize: 4})
	if err != nil {
		return nil, err
	}
	return &blobCodec{
		codecs: []any{obj{{"name", "bytes"}}, obj{{"name", "blosc"}, {"configuration", obj{
			{"typesize", 4}, {"cname", "zstd"}, {"clevel", 5}, {"shuffle", "bitshuffle"}, {"blocksize", 0}}}}},
		skipZero: true,
		encode:   func(src []byte) ([]byte, error) { return enc.Encode(nil, src) },
	}, nil
}
