package zarr_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/zarr"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

const corpus = "../../testdata/zarr-codecs"

type corpusCase struct {
	Category string `json:"category"`
	Name     string `json:"name"`
	Path     string `json:"path"`
	Expected string `json:"expected"`
	Optional bool   `json:"optional"`
}

type expectation struct {
	Shape            []int64           `json:"shape"`
	DataType         string            `json:"data_type"`
	ValueEncoding    string            `json:"value_encoding"`
	Values           []json.RawMessage `json:"values"`
	ValuesSHA256LE   string            `json:"values_sha256_le"`
	ValuesSHA256JSON string            `json:"values_sha256_json"`
	FillLEHex        *string           `json:"fill_value_decoded_le_hex"`
}

func TestCorpus(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(corpus, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var idx struct {
		Cases []corpusCase `json:"cases"`
	}
	if err := json.Unmarshal(raw, &idx); err != nil {
		t.Fatal(err)
	}
	if len(idx.Cases) < 100 {
		t.Fatalf("index lists %d cases", len(idx.Cases))
	}
	ctx := context.Background()
	cs := zarr.NewCodecs()
	for _, c := range idx.Cases {
		t.Run(c.Category+"/"+c.Name, func(t *testing.T) {
			var exp expectation
			eb, err := os.ReadFile(filepath.Join(corpus, c.Expected))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(eb, &exp); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(corpus, c.Path)
			st := zvftest.Store(t, dir)
			a, err := zarr.OpenArray(ctx, st, "", cs)
			if err == nil {
				var got *zarr.Chunk
				got, err = a.Read(ctx)
				if err == nil {
					checkValues(t, &exp, got)
					if exp.FillLEHex != nil && !a.Meta().DataType.Variable() {
						if h := hex.EncodeToString(a.Meta().Fill); h != *exp.FillLEHex {
							t.Errorf("fill bytes %s, want %s", h, *exp.FillLEHex)
						}
					}
					return
				}
			}
			t.Fatal(err)
		})
	}
}

func checkValues(t *testing.T, exp *expectation, got *zarr.Chunk) {
	t.Helper()
	if len(got.Shape) != len(exp.Shape) {
		t.Fatalf("shape %v, want %v", got.Shape, exp.Shape)
	}
	for i := range got.Shape {
		if got.Shape[i] != exp.Shape[i] {
			t.Fatalf("shape %v, want %v", got.Shape, exp.Shape)
		}
	}
	if got.Type.Variable() {
		vals := make([]any, len(got.Elems))
		for i, e := range got.Elems {
			if exp.ValueEncoding == "hex" {
				vals[i] = hex.EncodeToString(e)
			} else {
				vals[i] = string(e)
			}
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(vals); err != nil {
			t.Fatal(err)
		}
		js := pyJSON(bytes.TrimSpace(buf.Bytes()))
		if sum := sha(js); sum != exp.ValuesSHA256JSON {
			t.Fatalf("values sha %s, want %s (json %.200s)", sum, exp.ValuesSHA256JSON, js)
		}
		return
	}
	data := canonicalNaN(got.Data, got.Type)
	if sum := sha(data); sum != exp.ValuesSHA256LE {
		t.Fatalf("values sha %s, want %s", sum, exp.ValuesSHA256LE)
	}
}

// pyJSON undoes the escapes Go adds that Python's json.dumps
// (ensure_ascii=False) does not: U+2028 and U+2029.
func pyJSON(b []byte) []byte {
	b = bytes.ReplaceAll(b, []byte(`\u2028`), []byte("\u2028"))
	return bytes.ReplaceAll(b, []byte(`\u2029`), []byte("\u2029"))
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func canonicalNaN(b []byte, dt zarr.DataType) []byte {
	if dt.Kind != zarr.KindFloat && dt.Kind != zarr.KindComplex {
		return b
	}
	out := bytes.Clone(b)
	w := dt.Size
	if dt.Kind == zarr.KindComplex {
		w /= 2
	}
	for i := 0; i+w <= len(out); i += w {
		switch w {
		case 2:
			v := binary.LittleEndian.Uint16(out[i:])
			if v&0x7c00 == 0x7c00 && v&0x3ff != 0 {
				binary.LittleEndian.PutUint16(out[i:], 0x7e00)
			}
		case 4:
			if math.IsNaN(float64(math.Float32frombits(binary.LittleEndian.Uint32(out[i:])))) {
				binary.LittleEndian.PutUint32(out[i:], 0x7fc00000)
			}
		case 8:
			if math.IsNaN(math.Float64frombits(binary.LittleEndian.Uint64(out[i:]))) {
				binary.LittleEndian.PutUint64(out[i:], 0x7ff8000000000000)
			}
		}
	}
	return out
}
