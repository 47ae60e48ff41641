package zarr

import (
	"encoding/json"
	"errors"
	"math"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/zvftest/alloctest"
)

func mustType(t testing.TB, name string) DataType {
	dt, err := ParseDataType(name)
	if err != nil {
		t.Fatal(err)
	}
	return dt
}

func TestCastRounding(t *testing.T) {
	i8 := mustType(t, "int8")
	for _, tc := range []struct {
		in      float64
		mode    string
		oor     string
		want    int64
		wantErr bool
	}{
		{2.5, "nearest-even", "", 2, false}, {3.5, "nearest-even", "", 4, false}, {-2.5, "nearest-even", "", -2, false},
		{2.5, "nearest-away", "", 3, false}, {-2.5, "nearest-away", "", -3, false},
		{2.7, "towards-zero", "", 2, false}, {-2.7, "towards-zero", "", -2, false},
		{2.1, "towards-positive", "", 3, false}, {-2.1, "towards-positive", "", -2, false},
		{2.9, "towards-negative", "", 2, false}, {-2.1, "towards-negative", "", -3, false},
		{200, "", "clamp", 127, false}, {-200, "", "clamp", -128, false},
		{200, "", "wrap", -56, false}, {-129, "", "wrap", 127, false},
		{200, "", "", 0, true}, {math.NaN(), "", "clamp", 0, true}, {math.Inf(1), "", "clamp", 0, true},
	} {
		got, err := cast(num{Kind: KindFloat, F: tc.in}, i8, castRules{rounding: tc.mode, oor: tc.oor})
		if tc.wantErr {
			if err == nil || !errors.Is(err, ErrCorrupt) {
				t.Errorf("cast(%v, %s, %s) = %v, want an error", tc.in, tc.mode, tc.oor, got.I)
			}
			continue
		}
		if err != nil || got.I != tc.want {
			t.Errorf("cast(%v, %s, %s) = %d, %v; want %d", tc.in, tc.mode, tc.oor, got.I, err, tc.want)
		}
	}
	f32 := mustType(t, "float32")
	for _, tc := range []struct {
		mode string
		want float32
	}{{"towards-zero", 0.099999994}, {"nearest-even", 0.1}, {"towards-positive", 0.1}, {"towards-negative", 0.099999994}} {
		got, err := cast(num{Kind: KindFloat, F: 0.1}, f32, castRules{rounding: tc.mode})
		if err != nil || float32(got.F) != tc.want {
			t.Errorf("0.1 → float32 %s = %v, want %v", tc.mode, float32(got.F), tc.want)
		}
	}
	if got, _ := cast(num{Kind: KindFloat, F: math.Copysign(0, -1)}, f32, castRules{}); !math.Signbit(got.F) {
		t.Error("-0 lost its sign")
	}
}

func TestScalarMapAndFill(t *testing.T) {
	f64 := mustType(t, "float64")
	cfg := json.RawMessage(`{"data_type":"uint8","out_of_range":"clamp","scalar_map":{"encode":[["NaN",255]],"decode":[[255,"NaN"]]}}`)
	nanFill := make([]byte, 8)
	putFloat(nanFill, math.NaN())
	cv, err := newCastValue(cfg, rep{shape: []int64{3}, typ: f64, fill: nanFill})
	if err != nil {
		t.Fatal(err)
	}
	r, err := cv.out(rep{shape: []int64{3}, typ: f64, fill: nanFill})
	if err != nil || r.fill[0] != 255 || r.typ.Name != "uint8" {
		t.Fatalf("fill through cast_value: %v %v", r.fill, err)
	}
	in := make([]byte, 24)
	putFloat(in[0:8], math.NaN())
	putFloat(in[8:16], 300)
	putFloat(in[16:24], 1.5)
	enc, err := cv.encode(&Chunk{Shape: []int64{3}, Type: f64, Data: in})
	if err != nil || enc.Data[0] != 255 || enc.Data[1] != 255 || enc.Data[2] != 2 {
		t.Fatalf("encode %v %v", enc, err)
	}
	dec, err := cv.decode(enc, rep{shape: []int64{3}, typ: f64})
	if err != nil || !math.IsNaN(f64.At(dec.Data, 0).F) || f64.At(dec.Data[16:], 0).F != 2 {
		t.Fatalf("decode %v", err)
	}
	so, err := newScaleOffset(json.RawMessage(`{"offset":1000,"scale":10}`), rep{typ: f64})
	if err != nil {
		t.Fatal(err)
	}
	zero := make([]byte, 8)
	r, _ = so.out(rep{shape: []int64{1}, typ: f64, fill: zero})
	if f64.At(r.fill, 0).F != -10000 {
		t.Fatalf("scale_offset fill = %v", f64.At(r.fill, 0).F)
	}
	for _, bad := range []string{`{"scale":0}`, `{"scale":"x"}`, `{"offset":[1]}`} {
		if _, err := newScaleOffset(json.RawMessage(bad), rep{typ: f64}); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	for _, bad := range []string{`{"data_type":"complex64"}`, `{"data_type":"float32","out_of_range":"wrap"}`, `{"data_type":"int8","rounding":"up"}`} {
		if _, err := newCastValue(json.RawMessage(bad), rep{typ: f64, fill: zero}); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

// FuzzCastValue: any configuration, types and bytes fail cleanly or
// decode; nothing panics; decoding and encoding allocate their outputs
// (at most 16 × the data: uint8 ↔ complex128) plus a few KiB for the
// configuration, nothing sized from it.
func FuzzCastValue(f *testing.F) {
	f.Add(`{"data_type":"uint8","out_of_range":"clamp","scalar_map":{"encode":[["NaN",255]],"decode":[[255,"NaN"]]}}`, uint8(11), []byte{1, 2, 255, 0})
	f.Add(`{"data_type":"int16","rounding":"towards-zero"}`, uint8(10), []byte{0, 0, 0, 0, 0, 0, 0xf0, 0x7f})
	f.Add(`{"data_type":"float16","rounding":"nearest-away"}`, uint8(9), []byte{0x00, 0x7c, 0x01, 0x7c})
	names := []string{"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32", "float64", "bool"}
	f.Fuzz(func(t *testing.T, cfg string, which uint8, data []byte) {
		in, _ := ParseDataType(names[int(which)%len(names)])
		fill := make([]byte, in.Size)
		cv, err := newCastValue(json.RawMessage(cfg), rep{shape: []int64{1}, typ: in, fill: fill})
		if err != nil {
			return
		}
		a := alloctest.Bytes(func() {
			n := len(data) / cv.to.Size
			_, _ = cv.decode(&Chunk{Shape: []int64{int64(n)}, Type: cv.to, Data: data[:n*cv.to.Size]}, rep{shape: []int64{int64(n)}, typ: in})
			m := len(data) / in.Size
			_, _ = cv.encode(&Chunk{Shape: []int64{int64(m)}, Type: in, Data: data[:m*in.Size]})
		})
		if bound := 2*16*uint64(len(data)) + 16<<10; a > bound {
			t.Fatalf("%d bytes allocated %d, bound %d", len(data), a, bound)
		}
	})
}
