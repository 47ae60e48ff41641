package zarr

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
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

// BenchmarkCastValueDecode: a chunk of 262,144 float32 values stored as
// uint16 through cast_value (as a scale_offset + cast_value pair stores
// quantized floats), decoded, without and with a scalar map (NaN stored as
// 65535); and int32 values stored as int16. MB/s is of the stored bytes.
func BenchmarkCastValueDecode(b *testing.B) {
	const n = 1 << 18
	for _, c := range []struct{ name, in, to, more string }{{"uint16-to-float32", "float32", "uint16", ""},
		{"int16-to-int32", "int32", "int16", ""},
		{"uint16-to-float32-nan-map", "float32", "uint16", `,"scalar_map":{"encode":[["NaN",65535]],"decode":[[65535,"NaN"]]}`}} {
		b.Run(c.name, func(b *testing.B) {
			in, to := mustType(b, c.in), mustType(b, c.to)
			cv, err := newCastValue(json.RawMessage(`{"data_type":"`+c.to+`"`+c.more+`}`), rep{shape: []int64{n}, typ: in, fill: make([]byte, in.Size)})
			if err != nil {
				b.Fatal(err)
			}
			data := make([]byte, n*to.Size)
			for i := range n {
				binary.LittleEndian.PutUint16(data[2*i:], uint16(uint32(i)*2654435761>>7))
			}
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := cv.decode(&Chunk{Shape: []int64{n}, Type: to, Data: data}, rep{shape: []int64{n}, typ: in}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkScaleOffsetDecode: a chunk of 262,144 float32 values through
// scale_offset's decoding (x / scale + offset), the stage after
// cast_value's in a store of quantized floats.
func BenchmarkScaleOffsetDecode(b *testing.B) {
	const n = 1 << 18
	f := mustType(b, "float32")
	so, err := newScaleOffset(json.RawMessage(`{"offset":100,"scale":64}`), rep{typ: f})
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, 4*n)
	for i := range n {
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(float32(i%65536)))
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := so.decode(&Chunk{Shape: []int64{n}, Type: f, Data: data}, rep{shape: []int64{n}, typ: f}); err != nil {
			b.Fatal(err)
		}
	}
}
