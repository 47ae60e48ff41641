package writer

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"math"
	"strings"
	"testing"
)

func TestPyFloat(t *testing.T) {
	for _, tc := range []struct {
		in   float64
		want string
	}{
		{0, "0.0"},
		{math.Copysign(0, -1), "-0.0"},
		{1, "1.0"},
		{250, "250.0"},
		{-12.5, "-12.5"},
		{0.1, "0.1"},
		{1e-4, "0.0001"},
		{1e-5, "1e-05"},
		{1.5e-7, "1.5e-07"},
		{1e15, "1000000000000000.0"},
		{1e16, "1e+16"},
		{123456789012345680, "1.2345678901234568e+17"},
		{float64(float32(0.1)), "0.10000000149011612"},
		{math.NaN(), "NaN"},
		{math.Inf(-1), "-Infinity"},
	} {
		if got := pyFloat(tc.in); got != tc.want {
			t.Errorf("pyFloat(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestDumps(t *testing.T) {
	v := obj{{"a", 1}, {"b", []float64{1, 2.5}}, {"c", obj{}}, {"d", []any{}}, {"e", jsonNull{}},
		{"f", "é\"\n\x01\u007f"}, {"g", true}, {"h", []string{"x"}}}
	for _, tc := range []struct {
		name, got, want string
	}{
		{"python", pyDumps(v), `{"a": 1, "b": [1.0, 2.5], "c": {}, "d": [], "e": null, "f": "\u00e9\"\n\u0001` + "\u007f" + `", "g": true, "h": ["x"]}`},
		{"compact", compactDumps(obj{{"a", []int64{1, 2}}}), `{"a":[1,2]}`},
		{"pretty", prettyDumps(obj{{"a", []int64{1}}, {"b", obj{}}, {"c", obj{{"d", false}}}}),
			"{\n  \"a\": [\n    1\n  ],\n  \"b\": {},\n  \"c\": {\n    \"d\": false\n  }\n}"},
		{"astral", pyDumps("\U0001F600"), `"\ud83d\ude00"`},
	} {
		if tc.got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, tc.got, tc.want)
		}
	}
}

// TestFragmentIndexExample is the observed blob of zvf-format.md §3.2.
func TestFragmentIndexExample(t *testing.T) {
	hexs := "4746565a" + "0100" + "0000" + "08000000" + "08000000" + // magic, v1, flags, F, R
		"ff00000000000000" + // bitmap + padding
		"00000000000000000200000000000000" + "02000000000000000000000000000000" +
		"02000000000000000000000000000000" + "02000000000000000000000000000000" +
		"02000000000000000100000000000000" + "03000000000000000000000000000000" +
		"03000000000000000100000000000000" + "04000000000000000000000000000000" +
		"00000000" // explicit_offsets[0]
	want, err := hex.DecodeString(hexs)
	if err != nil || len(want) != 156 {
		t.Fatalf("bad fixture: %v, %d bytes", err, len(want))
	}
	got, err := rangeFragments([]int64{2, 0, 0, 0, 1, 0, 1, 0})
	if err != nil || len(got) != 156 {
		t.Fatalf("size %d (%v), want 156", len(got), err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("got\n%x\nwant\n%x", got, want)
	}
	if empty, err := rangeFragments(nil); err != nil || len(empty) != 16 {
		t.Fatalf("empty index is %d bytes (%v)", len(empty), err)
	}
}

// TestManifestExample is the 70-byte level-1 manifest of zvf-format.md §4.2.
func TestManifestExample(t *testing.T) {
	got, err := manifestBlob(3, []blockRef{{frag: 0}, {frag: 1}})
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 70)
	want[0] = 2
	want[4+24+1] = 0
	want[4+33+24+1] = 1
	if !bytes.Equal(got, want) {
		t.Fatalf("got %x\nwant %x", got, want)
	}
}

func TestInputErrors(t *testing.T) {
	pos := []float32{1, 2, 3, 4, 5, 6}
	cs := []float64{10, 10, 10}
	ok := Options{ChunkShape: cs}
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		field string
		run   func() error
	}{
		{"no chunk shape", "Options.ChunkShape", func() error {
			_, err := WritePoints(ctx, newMemStore(), "", &PointCloud{Positions: pos}, Options{})
			return err
		}},
		{"negative chunk", "Options.ChunkShape", func() error {
			_, err := WritePoints(ctx, newMemStore(), "", &PointCloud{Positions: pos}, Options{ChunkShape: []float64{10, -1, 10}})
			return err
		}},
		{"bin not dividing", "Options.BinShape", func() error {
			_, err := WritePoints(ctx, newMemStore(), "", &PointCloud{Positions: pos}, Options{ChunkShape: cs, BinShape: []float64{3, 3, 3}})
			return err
		}},
		{"too many bins", "Options.BinShape", func() error {
			_, err := WritePoints(ctx, newMemStore(), "", &PointCloud{Positions: pos}, Options{ChunkShape: cs, BinShape: []float64{0.01, 0.01, 0.01}})
			return err
		}},
		{"ragged positions", "positions", func() error {
			_, err := WritePoints(ctx, newMemStore(), "", &PointCloud{Positions: pos[:5]}, ok)
			return err
		}},
		{"nan", "positions", func() error {
			_, err := WritePoints(ctx, newMemStore(), "", &PointCloud{Positions: []float32{1, float32(math.NaN()), 1}}, ok)
			return err
		}},
		{"huge coordinate", "positions", func() error {
			_, err := WritePoints(ctx, newMemStore(), "", &PointCloud{Positions: []float32{1, 3e38, 1}}, Options{ChunkShape: []float64{1e-30, 1, 1}})
			return err
		}},
		{"outside bounds", "positions", func() error {
			o := ok
			o.Bounds = &[2][]float64{{0, 0, 0}, {3, 3, 3}}
			_, err := WritePoints(ctx, newMemStore(), "", &PointCloud{Positions: pos}, o)
			return err
		}},
		{"reversed bounds", "Options.Bounds", func() error {
			o := ok
			o.Bounds = &[2][]float64{{0, 5, 0}, {3, 3, 3}}
			_, err := WritePoints(ctx, newMemStore(), "", &PointCloud{}, o)
			return err
		}},
		{"non-finite bounds", "Options.Bounds", func() error {
			o := ok
			o.Bounds = &[2][]float64{{0, 0, 0}, {3, math.Inf(1), 3}}
			_, err := WritePoints(ctx, newMemStore(), "", &PointCloud{}, o)
			return err
		}},
		{"NaN bounds", "Options.Bounds", func() error {
			o := ok
			o.Bounds = &[2][]float64{{math.NaN(), 0, 0}, {3, 3, 3}}
			_, err := WritePoints(ctx, newMemStore(), "", &PointCloud{Positions: pos}, o)
			return err
		}},
		{"attribute length", "PointCloud.Attributes", func() error {
			_, err := WritePoints(ctx, newMemStore(), "", &PointCloud{Positions: pos,
				Attributes: []Attribute{Float32Attribute("a", 1, []float32{1})}}, ok)
			return err
		}},
		{"attribute name", "PointCloud.Attributes", func() error {
			_, err := WritePoints(ctx, newMemStore(), "", &PointCloud{Positions: pos,
				Attributes: []Attribute{Float32Attribute("a/b", 1, []float32{1, 2})}}, ok)
			return err
		}},
		{"attribute dtype", "PointCloud.Attributes", func() error {
			_, err := WritePoints(ctx, newMemStore(), "", &PointCloud{Positions: pos,
				Attributes: []Attribute{{Name: "a", DType: "complex64", Channels: 1, Data: make([]byte, 16)}}}, ok)
			return err
		}},
		{"attribute channels", "PointCloud.Attributes", func() error {
			_, err := WritePoints(ctx, newMemStore(), "", &PointCloud{Positions: pos,
				Attributes: []Attribute{{Name: "a", DType: "float64", Channels: 1 << 61}}}, ok)
			return err
		}},
		{"duplicate attribute", "PointCloud.Attributes", func() error {
			a := Float32Attribute("a", 1, []float32{1, 2})
			_, err := WritePoints(ctx, newMemStore(), "", &PointCloud{Positions: pos, Attributes: []Attribute{a, a}}, ok)
			return err
		}},
		{"negative object id", "PointCloud.ObjectIDs", func() error {
			_, err := WritePoints(ctx, newMemStore(), "", &PointCloud{Positions: pos, ObjectIDs: []int64{0, -1}}, ok)
			return err
		}},
		{"huge object id", "PointCloud.ObjectIDs", func() error {
			_, err := WritePoints(ctx, newMemStore(), "", &PointCloud{Positions: pos, ObjectIDs: []int64{0, 1 << 40}}, ok)
			return err
		}},
		{"object attribute rows", "ObjectAttributes", func() error {
			_, err := WritePoints(ctx, newMemStore(), "", &PointCloud{Positions: pos, ObjectIDs: []int64{0, 1},
				ObjectAttributes: []Attribute{Float32Attribute("v", 1, []float32{1})}}, ok)
			return err
		}},
		{"group member", "Groups", func() error {
			_, err := WritePoints(ctx, newMemStore(), "", &PointCloud{Positions: pos, Groups: [][]int64{{5}}}, ok)
			return err
		}},
		{"pyramid factor", "Options.Pyramid", func() error {
			o := ok
			o.Pyramid = []PyramidLevel{{Coarsen: 0.5}}
			_, err := WritePoints(ctx, newMemStore(), "", &PointCloud{Positions: pos}, o)
			return err
		}},
		{"pyramid of nothing", "Options.Pyramid", func() error {
			o := ok
			o.Pyramid = []PyramidLevel{{Coarsen: 2}}
			_, err := WritePoints(ctx, newMemStore(), "", &PointCloud{}, o)
			return err
		}},
		{"codec", "Options.Codec", func() error {
			o := ok
			o.Codec = 42
			_, err := WritePoints(ctx, newMemStore(), "", &PointCloud{Positions: pos}, o)
			return err
		}},
		{"offsets", "Polylines.Offsets", func() error {
			_, err := WritePolylines(ctx, newMemStore(), "", &Polylines{Positions: pos, Offsets: []int{0, 3}}, ok)
			return err
		}},
		{"offsets decrease", "Polylines.Offsets", func() error {
			_, err := WritePolylines(ctx, newMemStore(), "", &Polylines{Positions: pos, Offsets: []int{0, 2, 1, 2}}, ok)
			return err
		}},
		{"edge range", "Graph.Edges", func() error {
			_, err := WriteGraph(ctx, newMemStore(), "", &Graph{Positions: pos, Edges: []int64{0, 2}}, ok)
			return err
		}},
		{"odd edges", "Graph.Edges", func() error {
			_, err := WriteGraph(ctx, newMemStore(), "", &Graph{Positions: pos, Edges: []int64{0}}, ok)
			return err
		}},
		{"link attribute rows", "Graph.LinkAttributes", func() error {
			_, err := WriteGraph(ctx, newMemStore(), "", &Graph{Positions: pos, Edges: []int64{1, 0},
				LinkAttributes: []Attribute{Float32Attribute("w", 1, nil)}}, ok)
			return err
		}},
		{"face width", "Mesh.FaceWidth", func() error {
			_, err := WriteMesh(ctx, newMemStore(), "", &Mesh{Positions: pos, Faces: []int64{0, 1}, FaceWidth: 2}, ok)
			return err
		}},
		{"face range", "Mesh.Faces", func() error {
			_, err := WriteMesh(ctx, newMemStore(), "", &Mesh{Positions: pos, Faces: []int64{0, 1, 7}, FaceWidth: 3}, ok)
			return err
		}},
		{"mesh ids", "Mesh.ObjectIDs", func() error {
			_, err := WriteMesh(ctx, newMemStore(), "", &Mesh{Positions: pos, FaceWidth: 3, ObjectIDs: []int64{1}}, ok)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			var ie *InputError
			if !errors.As(err, &ie) {
				t.Fatalf("got %v, want *InputError", err)
			}
			if ie.Field != tc.field {
				t.Fatalf("field %q, want %q (%v)", ie.Field, tc.field, err)
			}
		})
	}
}

// TestWriteFailure: a failing Put surfaces as *WriteError wrapping the
// storage error, and the root zarr.json (written last) is never written.
func TestWriteFailure(t *testing.T) {
	for _, after := range []int{1, 5, 40} {
		ms := newMemStore()
		ms.failAfter = after
		pos := make([]float32, 3*500)
		for i := range pos {
			pos[i] = float32(i % 97)
		}
		_, err := WritePoints(context.Background(), ms, "s", &PointCloud{Positions: pos},
			Options{ChunkShape: []float64{10, 10, 10}, Pyramid: []PyramidLevel{{Coarsen: 2}}, Concurrency: 2})
		var we *WriteError
		if !errors.As(err, &we) || !errors.Is(err, errInjected) {
			t.Fatalf("failAfter %d: got %v, want *WriteError wrapping the put error", after, err)
		}
		if _, ok := ms.m["s/zarr.json"]; ok {
			t.Fatalf("failAfter %d: root zarr.json written despite failure", after)
		}
	}
}

func TestCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ms := &ctxStore{memStore: newMemStore()}
	_, err := WritePoints(ctx, ms, "", &PointCloud{Positions: []float32{1, 2, 3}}, Options{ChunkShape: []float64{10, 10, 10}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

// ctxStore honours cancellation like real backends do.
type ctxStore struct{ *memStore }

func (s *ctxStore) Put(ctx context.Context, key string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.memStore.Put(ctx, key, data)
}

// TestZstdFramesCarrySize: numcodecs (the reference's zstd) refuses frames
// without a content size, which klauspost omits for small inputs unless
// frames are single-segment. Every zstd frame the writer emits must set
// Single_Segment (FHD bit 5), which implies a content size field.
func TestZstdFramesCarrySize(t *testing.T) {
	ms := newMemStore()
	_, err := WritePoints(context.Background(), ms, "", &PointCloud{Positions: []float32{1, 1, 1, 50, 50, 50, 51, 51, 51}},
		Options{ChunkShape: []float64{10, 10, 10}, Codec: CodecZstd, Pyramid: []PyramidLevel{{Coarsen: 3}}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for k, v := range ms.m {
		if strings.HasSuffix(k, "/c/0") || strings.Contains(k, "/manifests/c/") {
			if len(v) < 5 || v[4]&0x20 == 0 {
				t.Errorf("%s: frame header % x lacks Single_Segment", k, v[:min(len(v), 6)])
			}
			n++
		}
	}
	if n < 5 {
		t.Fatalf("only %d compressed chunks checked", n)
	}
}

func TestPrefixNormalised(t *testing.T) {
	for _, prefix := range []string{"a/b", "/a/b/", "a/b/"} {
		ms := newMemStore()
		if _, err := WritePoints(context.Background(), ms, prefix, &PointCloud{Positions: []float32{1, 2, 3}},
			Options{ChunkShape: []float64{10, 10, 10}}); err != nil {
			t.Fatal(err)
		}
		for k := range ms.m {
			if !strings.HasPrefix(k, "a/b/") || strings.Contains(k, "//") {
				t.Fatalf("prefix %q: key %q", prefix, k)
			}
		}
		if _, ok := ms.m["a/b/zarr.json"]; !ok {
			t.Fatalf("prefix %q: no root at a/b/zarr.json", prefix)
		}
	}
}
