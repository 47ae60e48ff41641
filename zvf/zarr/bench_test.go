package zarr

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"

	"github.com/klauspost/compress/gzip"
)

func benchInput() []byte {
	b := make([]byte, 4<<20)
	v := float32(0)
	for i := 0; i+4 <= len(b); i += 4 {
		v += float32(math.Sin(float64(i)))
		binary.LittleEndian.PutUint32(b[i:], math.Float32bits(v))
	}
	return b
}

func BenchmarkZstdDecode(b *testing.B) {
	cs := NewCodecs()
	c := &zstdCodec{cs: cs, level: 3}
	raw := benchInput()
	enc, err := c.encode(raw)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.decode(enc, outSize{exact: int64(len(raw)), max: int64(len(raw))}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGzipDecode(b *testing.B) {
	raw := benchInput()
	var buf bytes.Buffer
	w, _ := gzip.NewWriterLevel(&buf, 6)
	_, _ = w.Write(raw)
	_ = w.Close()
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := (gzipCodec{}).decode(buf.Bytes(), outSize{exact: int64(len(raw)), max: int64(len(raw))}); err != nil {
			b.Fatal(err)
		}
	}
}
