package zarr

import (
	"bytes"
	"encoding/json"
	"io"

	"github.com/klauspost/compress/gzip"
)

func makeGzip(_ *Codecs, s CodecSpec, _ rep) (resolved, error) {
	var cfg struct {
		Level int `json:"level"`
	}
	if len(s.Configuration) > 0 {
		if err := json.Unmarshal(s.Configuration, &cfg); err != nil {
			return resolved{}, metaErr("gzip configuration: %v", err)
		}
	}
	if cfg.Level < 0 || cfg.Level > 9 {
		return resolved{}, metaErr("gzip level %d", cfg.Level)
	}
	return resolved{bb: gzipCodec{level: cfg.Level}}, nil
}

type gzipCodec struct{ level int }

func (gzipCodec) name() string { return "gzip" }

func (gzipCodec) decode(b []byte, size outSize) ([]byte, error) {
	r, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, corrupt("gzip: %v", err)
	}
	defer r.Close()
	if size.exact >= 0 {
		// Straight into the one buffer: a bytes.Buffer would double it
		// when the last read fills it.
		out := make([]byte, size.exact)
		if _, err := io.ReadFull(r, out); err != nil {
			return nil, corrupt("gzip: %v (want %d bytes)", err, size.exact)
		}
		// Reading on to the end checks the CRC and length trailer.
		var one [1]byte
		switch n, err := r.Read(one[:]); {
		case n > 0:
			return nil, corrupt("gzip output exceeds %d bytes", size.exact)
		case err != io.EOF:
			return nil, corrupt("gzip: %v", err)
		}
		return out, nil
	}
	// The buffer grows (doubling) with what is inflated.
	var buf bytes.Buffer
	n, err := io.Copy(&buf, io.LimitReader(r, size.max+1))
	if err != nil {
		return nil, corrupt("gzip: %v", err)
	}
	if n > size.max {
		return nil, corrupt("gzip output exceeds %d bytes", size.max)
	}
	return buf.Bytes(), nil
}

func (c gzipCodec) encode(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	w, err := gzip.NewWriterLevel(&buf, c.level)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(b); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
