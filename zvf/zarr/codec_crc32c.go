package zarr

import (
	"encoding/binary"
	"hash/crc32"
)

func makeCRC32C(*Codecs, CodecSpec, rep) (resolved, error) { return resolved{bb: crc32cCodec{}}, nil }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type crc32cCodec struct{}

func (crc32cCodec) name() string { return "crc32c" }

func (crc32cCodec) decode(b []byte, _ outSize) ([]byte, error) {
	if len(b) < 4 {
		return nil, corrupt("%d bytes cannot hold a crc32c", len(b))
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return nil, ErrChecksum
	}
	return body, nil
}

func (crc32cCodec) encode(b []byte) ([]byte, error) {
	return binary.LittleEndian.AppendUint32(append(make([]byte, 0, len(b)+4), b...), crc32.Checksum(b, castagnoli)), nil
}
