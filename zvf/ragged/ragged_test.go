package ragged

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"

	"github.com/zvfserve/zvfserve/zvf/zvftest/alloctest"
)

func TestBlob(t *testing.T) {
	rows := []int64{0, 0, 1, 0, 2, 0, 3, 0, 4, 0}
	b, err := EncodeBlob(rows, 2)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeBlob(b, 2)
	if err != nil || !reflect.DeepEqual(got, rows) {
		t.Fatalf("%v %v", got, err)
	}
	if got, err := DecodeBlob(nil, 2); err != nil || got != nil {
		t.Fatal("empty blob")
	}
	for name, bb := range map[string][]byte{
		"huge K":      binary.LittleEndian.AppendUint64(nil, 1<<40),
		"ragged data": append(bytes.Clone(b), 1, 2, 3),
		"bad offset":  func() []byte { c := bytes.Clone(b); c[8] = 3; return c }(),
		// Bytes that are not a blob are not an empty one: a cell cut
		// short, and one whose group count was zeroed over its rows.
		"short":              b[:5],
		"K = 0 before bytes": append(make([]byte, 8), b[8:]...),
	} {
		if _, err := DecodeBlob(bb, 2); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestLinks(t *testing.T) {
	links := [][]Endpoint{{{Chunk: []int64{0, 0, 0}, Row: 1}, {Chunk: []int64{1, 0, 0}, Row: 0}, {Chunk: []int64{0, 0, 0}, Row: 2}}}
	b, err := EncodeLinks(links, 3, 3)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeLinks(b, 3, 3, 1)
	if err != nil || !reflect.DeepEqual(got, links) {
		t.Fatalf("%v %v", got, err)
	}
	if _, err := DecodeLinks(b, 3, 3, 2); !errors.Is(err, ErrMalformed) {
		t.Error("count mismatch accepted")
	}
	if _, err := DecodeLinks(b[:len(b)-8], 3, 3, -1); !errors.Is(err, ErrMalformed) {
		t.Error("partial record accepted")
	}
}

func TestGroups(t *testing.T) {
	data, offs := EncodeGroups([][]int64{{0, 2}, {1}, {}})
	g, err := DecodeGroups(data, offs)
	if err != nil {
		t.Fatal(err)
	}
	if g.Len() != 3 || !reflect.DeepEqual(g.Members(0), []int64{0, 2}) || !reflect.DeepEqual(g.Members(1), []int64{1}) || len(g.Members(2)) != 0 {
		t.Fatalf("groups %v %v %v", g.Members(0), g.Members(1), g.Members(2))
	}
	// The digest's observed bytes: offsets [0, 16] for {0:[0,2], 1:[1]}.
	if !bytes.Equal(offs[:16], binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, 0), 16)) {
		t.Fatalf("offsets %x", offs)
	}
	if _, err := DecodeGroups(data, binary.LittleEndian.AppendUint64(nil, 800)); !errors.Is(err, ErrMalformed) {
		t.Fatal("offset past data accepted")
	}
}

// The decoders allocate in proportion to their input, never to a count in
// it: a blob's int64 values 1:1, and a link record of 8·width·(ndim+1)
// bytes one 24-byte slice header plus 32 bytes an endpoint (at most 3.5×),
// so each fuzz target asserts at most 4 × the input plus 64 KiB (what the
// fuzzing worker allocates meanwhile).
func allocBound(in ...[]byte) uint64 {
	n := uint64(0)
	for _, b := range in {
		n += uint64(len(b))
	}
	return 4*n + 64<<10
}

func FuzzDecodeBlob(f *testing.F) {
	b, _ := EncodeBlob([]int64{1, 2, 3, 4}, 2)
	f.Add(b, 2)
	f.Add(binary.LittleEndian.AppendUint64(nil, 1<<62), 1) // K claims 2^62 groups
	f.Fuzz(func(t *testing.T, b []byte, w int) {
		var rows []int64
		var err error
		if n := alloctest.Bytes(func() { rows, err = DecodeBlob(b, w) }); n > allocBound(b) {
			t.Fatalf("%d bytes allocated %d", len(b), n)
		}
		if err == nil && len(rows)%w != 0 {
			t.Fatalf("%d values for width %d", len(rows), w)
		}
	})
}

func FuzzDecodeLinks(f *testing.F) {
	b, _ := EncodeLinks([][]Endpoint{{{Chunk: []int64{0, 1}, Row: 1}, {Chunk: []int64{2, 3}, Row: 0}}}, 2, 2)
	f.Add(b, 2, 2)
	f.Add(make([]byte, 16), 1, 1)
	f.Fuzz(func(t *testing.T, b []byte, w, n int) {
		var links [][]Endpoint
		var err error
		if a := alloctest.Bytes(func() { links, err = DecodeLinks(b, w, n, -1) }); a > allocBound(b) {
			t.Fatalf("%d bytes allocated %d", len(b), a)
		}
		if err != nil {
			return
		}
		enc, err := EncodeLinks(links, w, n)
		if err != nil || !bytes.Equal(enc, b) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

func FuzzDecodeGroups(f *testing.F) {
	d, o := EncodeGroups([][]int64{{0, 2}, {1}})
	f.Add(d, o)
	f.Add(d, binary.LittleEndian.AppendUint64(nil, 1<<50)) // an offset far past the data
	f.Fuzz(func(t *testing.T, d, o []byte) {
		var g *Groups
		var err error
		if n := alloctest.Bytes(func() { g, err = DecodeGroups(d, o) }); n > allocBound(d, o) {
			t.Fatalf("%d+%d bytes allocated %d", len(d), len(o), n)
		}
		if err != nil {
			return
		}
		for i := 0; i < g.Len(); i++ {
			g.Members(i)
		}
	})
}
