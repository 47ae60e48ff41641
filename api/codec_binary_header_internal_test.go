package api

import (
	"encoding/json"
	"testing"

	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/zvftest/alloctest"
)

// metaCases are binary headers appendMeta must write as encoding/json
// does: no attributes (nil and empty), several, categories, and names
// encoding/json escapes (which appendMeta leaves to it).
var metaCases = []payloadMeta{
	{Kind: "bbox", Store: "points", Level: 0, Dims: 3, VertexDType: "float32"},
	{Kind: "bbox", Store: "points", Level: 2, Dims: 3, VertexDType: "float32", Attributes: []zvf.AttrInfo{}, ObjectIDs: true},
	{Kind: "object", Store: "demo.v1_a-b", Level: 12, Dims: 2, VertexDType: "float64", Attributes: []zvf.AttrInfo{
		{Name: "intensity", DType: "float32", Channels: 1},
		{Name: "label", DType: "uint8", Channels: 1, Categories: []string{"axon", "", "dendrite"}},
		{Name: "rgb", DType: "uint8", Channels: 3, Categories: []string{}},
	}},
	{Kind: "chunk", Store: "s", Level: -1, Dims: 4, VertexDType: "int64", Attributes: []zvf.AttrInfo{{Name: "a b<c>&\"d\"", DType: "float32", Channels: 1}}},
	{Kind: "bbox", Store: "s", Dims: 3, VertexDType: "float32", Attributes: []zvf.AttrInfo{{Name: "x", DType: "uint8", Channels: 1, Categories: []string{"é\u2028"}}}},
}

func TestAppendMetaIsJSON(t *testing.T) {
	for _, m := range metaCases {
		want, err := json.Marshal(&m)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := appendMeta(nil, &m); err != nil || string(got) != string(want) {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	}
}

// TestAppendMetaAllocs: a usual header is written into the buffer it is
// given, without reflection or an allocation.
func TestAppendMetaAllocs(t *testing.T) {
	alloctest.SkipUnderRace(t)
	m := metaCases[2]
	buf := make([]byte, 0, 512)
	if a := testing.AllocsPerRun(100, func() { buf, _ = appendMeta(buf[:0], &m) }); a > 0 {
		t.Errorf("appendMeta allocates %.0f times", a)
	}
}

func FuzzAppendMeta(f *testing.F) {
	f.Add("bbox", "points", "float32", "intensity", "cat", 3, 1)
	f.Add("o", "a<b", "f", "a\"b\\", "\xff", -1, 0)
	f.Fuzz(func(t *testing.T, kind, store, dtype, name, category string, level, channels int) {
		m := payloadMeta{Kind: kind, Store: store, Level: level, Dims: 3, VertexDType: dtype,
			Attributes: []zvf.AttrInfo{{Name: name, DType: dtype, Channels: channels, Categories: []string{category}}}}
		want, err := json.Marshal(&m)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := appendMeta(nil, &m); err != nil || string(got) != string(want) {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	})
}
