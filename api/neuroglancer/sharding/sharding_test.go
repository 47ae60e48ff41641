package sharding

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/api/neuroglancer/sharding/shardingtest"
	"github.com/zvfserve/zvfserve/zvf/zvftest/golden"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestMurmurVerification is SMHasher's published check of
// MurmurHash3_x86_128: hash the keys {}, {0}, {0,1}, … {0..254} with seed
// 256−length, hash the 256 concatenated 16-byte results with seed 0, and
// the first 4 bytes, little-endian, are 0xB3ECE62A.
func TestMurmurVerification(t *testing.T) {
	key := make([]byte, 256)
	all := make([]byte, 0, 16*256)
	for i := range 256 {
		key[i] = byte(i)
		h1, h2, h3, h4 := murmur3x86128(key[:i], uint32(256-i))
		for _, h := range []uint32{h1, h2, h3, h4} {
			all = binary.LittleEndian.AppendUint32(all, h)
		}
	}
	h1, _, _, _ := murmur3x86128(all, 0)
	if h1 != 0xB3ECE62A {
		t.Fatalf("verification value %#08x, want 0xb3ece62a", h1)
	}
	if h1, h2, h3, h4 := murmur3x86128(nil, 0); h1|h2|h3|h4 != 0 {
		t.Fatalf("empty input with seed 0: %x %x %x %x, want zeros", h1, h2, h3, h4)
	}
}

// TestHashKeyGolden: the hashed ids of 8-byte keys, as Neuroglancer 2.41.2
// computes them (murmurHash3_x86_128Hash64Bits_Bigint(0, key) in
// src/util/hash.ts; TestHashMatchesNeuroglancer reruns it when installed).
func TestHashKeyGolden(t *testing.T) {
	s := Spec{Hash: Murmur, MinishardIndexEncoding: Raw, DataEncoding: Raw}
	for _, v := range []struct{ key, want uint64 }{
		{0, 0x4772b084e028ae41},
		{1, 0xe8bd67d616d4ce9a},
		{2, 0xd62f9cd21b013f5a},
		{42, 0xc20b94f95119f47a},
		{0xffffffff, 0x007260ffc08751be},
		{1 << 32, 0xbbb12d133b78fd64},
		{0x0123456789abcdef, 0x708036264c109d93},
		{math.MaxUint64, 0x574f66bd212b5d1a},
		{1_000_000_000_000, 0x962eecabd13d89ac},
	} {
		if got := s.HashKey(v.key); got != v.want {
			t.Errorf("HashKey(%#x) = %#016x, want %#016x", v.key, got, v.want)
		}
		if got := shardingtest.Murmur8(v.key); got != v.want {
			t.Errorf("the independent Murmur8(%#x) = %#016x, want %#016x", v.key, got, v.want)
		}
	}
}

func TestSpecJSON(t *testing.T) {
	s := Spec{PreshiftBits: 3, Hash: Murmur, MinishardBits: 6, ShardBits: 2, MinishardIndexEncoding: Gzip, DataEncoding: Raw}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"@type":"neuroglancer_uint64_sharded_v1","preshift_bits":3,"hash":"murmurhash3_x86_128","minishard_bits":6,"shard_bits":2,"minishard_index_encoding":"gzip","data_encoding":"raw"}`
	if string(b) != want {
		t.Fatalf("marshal:\n got %s\nwant %s", b, want)
	}
	var back Spec
	if err := json.Unmarshal(b, &back); err != nil || back != s {
		t.Fatalf("round trip: %+v, %v", back, err)
	}

	for _, tc := range []struct {
		name, json string
		want       Spec
		err        bool
	}{
		{"encodings default to raw", `{"@type":"neuroglancer_uint64_sharded_v1","preshift_bits":0,"hash":"identity","minishard_bits":0,"shard_bits":0}`,
			Spec{Hash: Identity, MinishardIndexEncoding: Raw, DataEncoding: Raw}, false},
		{"no @type", `{"preshift_bits":0,"hash":"identity","minishard_bits":0,"shard_bits":0}`, Spec{}, true},
		{"other @type", `{"@type":"neuroglancer_uint64_sharded_v2","preshift_bits":0,"hash":"identity","minishard_bits":0,"shard_bits":0}`, Spec{}, true},
		{"unknown hash", `{"@type":"neuroglancer_uint64_sharded_v1","preshift_bits":0,"hash":"sha1","minishard_bits":0,"shard_bits":0}`, Spec{}, true},
		{"minishard bits above 20", `{"@type":"neuroglancer_uint64_sharded_v1","preshift_bits":0,"hash":"identity","minishard_bits":21,"shard_bits":0}`, Spec{}, true},
		{"shard bits above 10", `{"@type":"neuroglancer_uint64_sharded_v1","preshift_bits":0,"hash":"identity","minishard_bits":0,"shard_bits":11}`, Spec{}, true},
		{"preshift above 64", `{"@type":"neuroglancer_uint64_sharded_v1","preshift_bits":65,"hash":"identity","minishard_bits":0,"shard_bits":0}`, Spec{}, true},
		{"negative bits", `{"@type":"neuroglancer_uint64_sharded_v1","preshift_bits":0,"hash":"identity","minishard_bits":-1,"shard_bits":0}`, Spec{}, true},
		{"unknown encoding", `{"@type":"neuroglancer_uint64_sharded_v1","preshift_bits":0,"hash":"identity","minishard_bits":0,"shard_bits":0,"data_encoding":"zstd"}`, Spec{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s Spec
			err := json.Unmarshal([]byte(tc.json), &s)
			if tc.err {
				if !errors.Is(err, ErrInvalidSpec) {
					t.Fatalf("error %v, want ErrInvalidSpec", err)
				}
				return
			}
			if err != nil || s != tc.want {
				t.Fatalf("got %+v, %v; want %+v", s, err, tc.want)
			}
		})
	}
}

func TestShardFile(t *testing.T) {
	for _, tc := range []struct {
		bits  int
		shard uint64
		name  string
	}{
		{0, 0, "0.shard"},
		{1, 1, "1.shard"},
		{4, 0, "0.shard"},
		{4, 15, "f.shard"},
		{5, 0, "00.shard"},
		{5, 31, "1f.shard"},
		{8, 171, "ab.shard"},
		{9, 10, "00a.shard"},
		{10, 1023, "3ff.shard"},
	} {
		s := Spec{ShardBits: tc.bits}
		if got := s.ShardFile(tc.shard); got != tc.name {
			t.Errorf("shard_bits %d: ShardFile(%d) = %q, want %q", tc.bits, tc.shard, got, tc.name)
		}
		if n, err := s.ParseShardFile(tc.name); err != nil || n != tc.shard {
			t.Errorf("shard_bits %d: ParseShardFile(%q) = %d, %v", tc.bits, tc.name, n, err)
		}
	}
	for _, tc := range []struct {
		bits int
		name string
	}{
		{0, "1.shard"},  // only shard 0 exists
		{0, "00.shard"}, // not the canonical spelling
		{5, "0.shard"},  // two digits needed
		{5, "1F.shard"}, // uppercase
		{5, "20.shard"}, // shard 32 of 32
		{4, "a.index"},  // not a shard file
		{4, ".shard"},   // no number
		{4, "+a.shard"}, // sign
		{10, "0x1.shard"},
	} {
		if n, err := (Spec{ShardBits: tc.bits}).ParseShardFile(tc.name); err == nil {
			t.Errorf("shard_bits %d: ParseShardFile(%q) = %d, want an error", tc.bits, tc.name, n)
		}
	}
}

// TestLocate: with the identity hash the bits are visible: preshift drops
// the low bits, then minishard bits, then shard bits.
func TestLocate(t *testing.T) {
	s := Spec{PreshiftBits: 2, Hash: Identity, MinishardBits: 3, ShardBits: 2}
	for _, tc := range []struct {
		key              uint64
		shard, minishard uint64
	}{
		{0b0_00_000_11, 0, 0},
		{0b0_00_101_00, 0, 5},
		{0b0_10_011_01, 2, 3},
		{0b1_11_111_11, 3, 7}, // bit 7 is above the shard bits
		{math.MaxUint64, 3, 7},
	} {
		sh, m := s.Locate(tc.key)
		if sh != tc.shard || m != tc.minishard {
			t.Errorf("Locate(%#b) = shard %d minishard %d, want %d %d", tc.key, sh, m, tc.shard, tc.minishard)
		}
	}
	if h := (Spec{PreshiftBits: 64, Hash: Identity}).HashKey(math.MaxUint64); h != 0 {
		t.Errorf("a 64-bit preshift leaves %d", h)
	}
}

func TestChooseBits(t *testing.T) {
	for _, tc := range []struct {
		keys                int
		bytes               int64
		shardBits, miniBits int
	}{
		{0, 0, 0, 0},
		{1, 10, 0, 0},
		{128, 1 << 20, 0, 0},
		{129, 1 << 20, 0, 1},
		{1000, 32 << 20, 0, 3},       // 8 minishards of 125
		{1000, 32<<20 + 1, 1, 2},     // 2 shards of 500 keys, 4 minishards of 125
		{1_000_000, 60 << 20, 1, 12}, // 500k keys a shard, 4096 minishards of 122
		{1_000_000, 10 << 30, 9, 4},  // 320 shards → 512, 1954 keys a shard, 16 of 122
		{100_000_000, 1 << 40, 10, 10},
		{1 << 40, 1 << 50, 10, 20}, // both at their limits
		{5, -1, 0, 0},
	} {
		sb, mb := ChooseBits(tc.keys, tc.bytes)
		if sb != tc.shardBits || mb != tc.miniBits {
			t.Errorf("ChooseBits(%d, %d) = %d, %d; want %d, %d", tc.keys, tc.bytes, sb, mb, tc.shardBits, tc.miniBits)
		}
	}
}

// randomChunks makes n distinct keys (with 0 and MaxUint64 among them) and
// data of 0 to 300 bytes, half of it compressible.
func randomChunks(rng *rand.Rand, n int) map[uint64][]byte {
	chunks := map[uint64][]byte{0: {}, math.MaxUint64: []byte("last")}
	for len(chunks) < n {
		var k uint64
		switch rng.IntN(3) {
		case 0:
			k = rng.Uint64()
		case 1:
			k = rng.Uint64N(4096) // dense small ids, as Morton codes and annotation ids are
		default:
			k = rng.Uint64N(1 << 40)
		}
		d := make([]byte, rng.IntN(301))
		if rng.IntN(2) == 0 {
			for i := range d {
				d[i] = byte(rng.Uint32())
			}
		} else {
			copy(d, bytes.Repeat([]byte(fmt.Sprint(k)), len(d)))
		}
		chunks[k] = d
	}
	return chunks
}

func buildAll(t testing.TB, spec Spec, chunks map[uint64][]byte) map[string][]byte {
	t.Helper()
	b, err := NewBuilder(spec)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range slices.Sorted(maps.Keys(chunks)) { // any order: shuffle below
		b.Add(k, chunks[k])
	}
	files := map[string][]byte{}
	err = b.WriteAll(func(name string, data []byte) error {
		if _, dup := files[name]; dup {
			return fmt.Errorf("%s written twice", name)
		}
		files[name] = data
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

var specs = []Spec{
	{Hash: Identity, MinishardIndexEncoding: Raw, DataEncoding: Raw},
	{Hash: Identity, MinishardBits: 3, MinishardIndexEncoding: Raw, DataEncoding: Raw},
	{Hash: Identity, MinishardBits: 2, ShardBits: 3, MinishardIndexEncoding: Gzip, DataEncoding: Gzip},
	{Hash: Identity, PreshiftBits: 5, MinishardBits: 4, ShardBits: 2, MinishardIndexEncoding: Raw, DataEncoding: Gzip},
	{Hash: Murmur, MinishardIndexEncoding: Gzip, DataEncoding: Raw},
	{Hash: Murmur, MinishardBits: 6, ShardBits: 5, MinishardIndexEncoding: Gzip, DataEncoding: Gzip},
	{Hash: Murmur, PreshiftBits: 9, MinishardBits: 1, ShardBits: 10, MinishardIndexEncoding: Raw, DataEncoding: Raw},
	{Hash: Murmur, PreshiftBits: 64, MinishardBits: 2, ShardBits: 1, MinishardIndexEncoding: Raw, DataEncoding: Raw},
}

func specName(s Spec) string {
	return fmt.Sprintf("%s-pre%d-mini%d-shard%d-%s-%s", s.Hash, s.PreshiftBits, s.MinishardBits, s.ShardBits, s.MinishardIndexEncoding, s.DataEncoding)
}

// TestShardsDecode builds the shards of random chunks under every kind of
// spec and reads every key back twice: through the independent reader
// (shardingtest.Get, from the spec alone) and through Reader. Keys not added are
// found by neither; every file written is a shard some key is placed in.
func TestShardsDecode(t *testing.T) {
	rng := rand.New(rand.NewPCG(28, 2))
	for _, spec := range specs {
		t.Run(specName(spec), func(t *testing.T) {
			// Each lookup reads its whole minishard index, so a spec with
			// one minishard (or, with a 64-bit preshift, one used
			// minishard) gets fewer keys.
			n := 2000
			if spec.MinishardBits == 0 || spec.PreshiftBits == 64 {
				n = 300
			}
			chunks := randomChunks(rng, n)
			files := buildAll(t, spec, chunks)
			sj, err := json.Marshal(spec)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]bool{}
			for k := range chunks {
				sh, _ := spec.Locate(k)
				want[spec.ShardFile(sh)] = true
			}
			if got := slices.Sorted(maps.Keys(files)); !slices.Equal(got, slices.Sorted(maps.Keys(want))) {
				t.Fatalf("files %v, want %v", got, slices.Sorted(maps.Keys(want)))
			}

			readers := map[string]*Reader{}
			seen := 0
			for name, data := range files {
				n, err := spec.ParseShardFile(name)
				if err != nil {
					t.Fatal(err)
				}
				r, err := NewReader(spec, n, bytes.NewReader(data), int64(len(data)))
				if err != nil {
					t.Fatal(err)
				}
				readers[name] = r
				es, err := r.Entries()
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				for _, e := range es {
					d, err := r.Data(e)
					if err != nil || !bytes.Equal(d, chunks[e.Key]) {
						t.Fatalf("%s: entry %d: %q, %v", name, e.Key, d, err)
					}
				}
				seen += len(es)
			}
			if seen != len(chunks) {
				t.Fatalf("the shards list %d entries, %d were added", seen, len(chunks))
			}

			for k, data := range chunks {
				got, ok, err := shardingtest.Get(sj, files, k)
				if err != nil || !ok || !bytes.Equal(got, data) {
					t.Fatalf("independent reader, key %d: %q, %v, %v; want %q", k, got, ok, err, data)
				}
				sh, _ := spec.Locate(k)
				got, err = readers[spec.ShardFile(sh)].Get(k)
				if err != nil || !bytes.Equal(got, data) {
					t.Fatalf("Reader, key %d: %q, %v; want %q", k, got, err, data)
				}
			}
			for range 200 {
				k := rng.Uint64N(1 << 41)
				if _, added := chunks[k]; added {
					continue
				}
				if got, ok, err := shardingtest.Get(sj, files, k); ok || err != nil {
					t.Fatalf("independent reader finds absent key %d: %q, %v", k, got, err)
				}
				sh, _ := spec.Locate(k)
				if r := readers[spec.ShardFile(sh)]; r != nil {
					if _, err := r.Get(k); !errors.Is(err, ErrNotFound) {
						t.Fatalf("Reader, absent key %d: %v, want ErrNotFound", k, err)
					}
				}
			}
		})
	}
}

// TestShardOnDemand: AppendShard(n) gives the bytes WriteAll gives for n,
// and a Builder holding only shard n's keys (what a lazy server adds)
// gives the same bytes again; a shard without keys is ErrEmptyShard.
func TestShardOnDemand(t *testing.T) {
	spec := Spec{Hash: Murmur, MinishardBits: 4, ShardBits: 3, MinishardIndexEncoding: Gzip, DataEncoding: Gzip}
	chunks := randomChunks(rand.New(rand.NewPCG(28, 3)), 500)
	files := buildAll(t, spec, chunks)

	all, err := NewBuilder(spec)
	if err != nil {
		t.Fatal(err)
	}
	keys := slices.Collect(maps.Keys(chunks))
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	for _, k := range keys {
		all.Add(k, chunks[k])
	}
	for n := range spec.NumShards() {
		one, err := NewBuilder(spec)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if sh, _ := spec.Locate(k); sh == n {
				one.Add(k, chunks[k])
			}
		}
		want, exists := files[spec.ShardFile(n)]
		for _, b := range []*Builder{all, one} {
			got, err := b.AppendShard([]byte("prefix"), n)
			if !exists {
				if !errors.Is(err, ErrEmptyShard) || string(got) != "prefix" {
					t.Fatalf("shard %d: %v, %q; want ErrEmptyShard", n, err, got)
				}
				continue
			}
			if err != nil || !bytes.Equal(got, append([]byte("prefix"), want...)) {
				t.Fatalf("shard %d: %v; bytes differ from WriteAll's", n, err)
			}
		}
	}
}

func TestDuplicateKey(t *testing.T) {
	b, err := NewBuilder(Spec{Hash: Murmur, MinishardBits: 2, MinishardIndexEncoding: Raw, DataEncoding: Raw})
	if err != nil {
		t.Fatal(err)
	}
	b.Add(7, []byte("a"))
	b.Add(9, []byte("b"))
	b.Add(7, []byte("c"))
	if _, err := b.Shards(); !errors.Is(err, ErrDuplicateKey) || !strings.Contains(err.Error(), "7") {
		t.Fatalf("Shards: %v, want ErrDuplicateKey naming 7", err)
	}
	if _, err := b.AppendShard(nil, 0); !errors.Is(err, ErrDuplicateKey) {
		t.Fatalf("AppendShard: %v, want ErrDuplicateKey", err)
	}
	if _, err := NewBuilder(Spec{Hash: "md5"}); !errors.Is(err, ErrInvalidSpec) {
		t.Fatalf("NewBuilder with a bad spec: %v", err)
	}
}

// TestGoldenShard pins the layout of one small shard: identity hash, 2
// minishards, raw; keys 1, 2, 3, 10 (minishard = key & 1).
//
//	shard index (32 bytes): minishard 0 [19, 67), minishard 1 [67, 115)
//	data (19 bytes):         2 "bb", 10 "ten", then 1 "a", 3 thirteen "c"s
//	minishard 0 index (48):  keys 2, +8; starts +0, +0; sizes 2, 3
//	minishard 1 index (48):  keys 1, +2; starts +5, +0; sizes 1, 13
//
// go test -run TestGoldenShard -update rewrites it.
func TestGoldenShard(t *testing.T) {
	spec := Spec{Hash: Identity, MinishardBits: 1, MinishardIndexEncoding: Raw, DataEncoding: Raw}
	b, err := NewBuilder(spec)
	if err != nil {
		t.Fatal(err)
	}
	b.Add(10, []byte("ten"))
	b.Add(3, []byte("ccccccccccccc"))
	b.Add(1, []byte("a"))
	b.Add(2, []byte("bb"))
	got, err := b.AppendShard(nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "identity-2minishards-raw.shard"), got, *update)
	u := func(v ...uint64) []byte {
		var out []byte
		for _, x := range v {
			out = binary.LittleEndian.AppendUint64(out, x)
		}
		return out
	}
	var spelled []byte
	spelled = append(spelled, u(19, 67, 67, 115)...)
	spelled = append(spelled, "bbtenaccccccccccccc"...)
	spelled = append(spelled, u(2, 8, 0, 0, 2, 3)...)
	spelled = append(spelled, u(1, 2, 5, 0, 1, 13)...)
	if !bytes.Equal(got, spelled) {
		t.Fatalf("the shard (the golden file) is not the layout spelled out above:\n file % x\n text % x", got, spelled)
	}
}

// TestReaderRejects damages a valid shard in each way the format can be
// broken and checks the Reader says so (ErrMalformed), never panics.
func TestReaderRejects(t *testing.T) {
	spec := Spec{Hash: Identity, MinishardBits: 1, MinishardIndexEncoding: Raw, DataEncoding: Raw}
	good, err := os.ReadFile(filepath.Join("testdata", "identity-2minishards-raw.shard"))
	if err != nil {
		t.Fatal(err)
	}
	put := func(b []byte, off int, v uint64) []byte {
		b = bytes.Clone(b)
		binary.LittleEndian.PutUint64(b[off:], v)
		return b
	}
	gz := func(b []byte) []byte {
		var buf bytes.Buffer
		w := gzip.NewWriter(&buf)
		w.Write(b)
		w.Close()
		return buf.Bytes()
	}
	// A gzip shard whose one chunk inflates to 2 MiB, past a 1 MiB cap.
	bomb := func() []byte {
		b, _ := NewBuilder(Spec{Hash: Identity, MinishardIndexEncoding: Raw, DataEncoding: Gzip})
		b.Add(5, make([]byte, 2<<20))
		s, _ := b.AppendShard(nil, 0)
		return s
	}()
	for _, tc := range []struct {
		name string
		spec Spec
		file []byte
		key  uint64
	}{
		{"shorter than the shard index", spec, good[:20], 2},
		{"index end past the file", spec, put(good, 8, 1000), 2},
		{"index start after its end", spec, put(good, 0, 100), 2},
		{"index not a multiple of 24", spec, put(good, 8, 66), 2},
		{"chunk past the file", spec, put(good, 32+19+48+40, 1<<40), 1},
		{"chunk start overflows", spec, put(good, 32+19+24, math.MaxUint64-1), 2},
		{"key in the wrong minishard", spec, put(good, 32+19, 3), 2},
		{"key overflows", spec, put(good, 32+19+8, math.MaxUint64), 2},
		{"corrupt gzip index", Spec{Hash: Identity, MinishardIndexEncoding: Gzip, DataEncoding: Raw}, append(u128(0, 5), "xxxxx"...), 0},
		{"gzip index not a multiple of 24", Spec{Hash: Identity, MinishardIndexEncoding: Gzip, DataEncoding: Raw},
			append(u128(0, uint64(len(gz(make([]byte, 23))))), gz(make([]byte, 23))...), 0},
		{"chunk inflating past the cap", Spec{Hash: Identity, MinishardIndexEncoding: Raw, DataEncoding: Gzip}, bomb, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sh, _ := tc.spec.Locate(tc.key)
			r, err := NewReader(tc.spec, sh, bytes.NewReader(tc.file), int64(len(tc.file)))
			if err == nil {
				r.MaxDecoded = 1 << 20
				_, err = r.Get(tc.key)
			}
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v, want ErrMalformed", err)
			}
		})
	}
}

func u128(a, b uint64) []byte {
	return binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, a), b)
}

// FuzzReader reads hostile shard bytes under a spec taken from the input:
// every entry, every entry's data and a few keys; errors are fine, panics
// and allocations beyond the file or the decode cap are not.
func FuzzReader(f *testing.F) {
	good, err := os.ReadFile(filepath.Join("testdata", "identity-2minishards-raw.shard"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(byte(0x01), good)
	f.Add(byte(0x37), buildAll(f, Spec{Hash: Murmur, MinishardBits: 3, MinishardIndexEncoding: Gzip, DataEncoding: Gzip},
		randomChunks(rand.New(rand.NewPCG(5, 5)), 20))["0.shard"])
	f.Fuzz(func(t *testing.T, params byte, file []byte) {
		spec := Spec{
			MinishardBits:          int(params & 3),
			Hash:                   []Hash{Identity, Murmur}[params>>2&1],
			PreshiftBits:           int(params >> 3 & 1),
			MinishardIndexEncoding: []Encoding{Raw, Gzip}[params>>4&1],
			DataEncoding:           []Encoding{Raw, Gzip}[params>>5&1],
		}
		if spec.Hash == Murmur {
			spec.MinishardBits = 3 // the second seed's
		}
		r, err := NewReader(spec, 0, bytes.NewReader(file), int64(len(file)))
		if err != nil {
			return
		}
		r.MaxDecoded = 1 << 16
		es, err := r.Entries()
		if err == nil {
			for _, e := range es {
				d, err := r.Data(e)
				if err == nil && spec.DataEncoding == Raw && int64(len(d)) != e.Size {
					t.Fatalf("entry of %d bytes read as %d", e.Size, len(d))
				}
			}
		}
		for _, k := range []uint64{0, 1, 2, 3, 10, 1 << 20} {
			if _, err := r.Get(k); err != nil && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrNotFound) {
				t.Fatalf("Get(%d): %v", k, err)
			}
		}
	})
}

// FuzzBuildRead builds shards from chunks and a spec taken from the input
// and reads every chunk back with the independent reader and the Reader.
func FuzzBuildRead(f *testing.F) {
	f.Add(byte(0x25), byte(0x3), []byte("\x01\x00\x00\x00\x00\x00\x00\x00hello\x02\x00\x00\x00\x00\x00\x00\x80"))
	f.Fuzz(func(t *testing.T, bitsParam, encParam byte, data []byte) {
		spec := Spec{
			MinishardBits:          int(bitsParam & 7),
			ShardBits:              int(bitsParam >> 3 & 3),
			PreshiftBits:           int(bitsParam >> 5),
			Hash:                   []Hash{Identity, Murmur}[encParam&1],
			MinishardIndexEncoding: []Encoding{Raw, Gzip}[encParam>>1&1],
			DataEncoding:           []Encoding{Raw, Gzip}[encParam>>2&1],
		}
		chunks := map[uint64][]byte{}
		for len(data) >= 9 {
			k := binary.LittleEndian.Uint64(data)
			n := min(int(data[8]), len(data)-9)
			chunks[k] = data[9 : 9+n]
			data = data[9+n:]
		}
		files := buildAll(t, spec, chunks)
		sj, err := json.Marshal(spec)
		if err != nil {
			t.Fatal(err)
		}
		for k, want := range chunks {
			got, ok, err := shardingtest.Get(sj, files, k)
			if err != nil || !ok || !bytes.Equal(got, want) {
				t.Fatalf("independent reader, key %d: %q, %v, %v; want %q", k, got, ok, err, want)
			}
			sh, _ := spec.Locate(k)
			file := files[spec.ShardFile(sh)]
			r, err := NewReader(spec, sh, bytes.NewReader(file), int64(len(file)))
			if err != nil {
				t.Fatal(err)
			}
			if got, err := r.Get(k); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("Reader, key %d: %q, %v; want %q", k, got, err, want)
			}
		}
	})
}

func BenchmarkBuildShard(b *testing.B) {
	rng := rand.New(rand.NewPCG(28, 4))
	const n = 100_000
	keys := make([]uint64, n)
	data := make([][]byte, n)
	var total int
	for i := range keys {
		keys[i] = rng.Uint64N(1 << 40)
		data[i] = []byte(strings.Repeat(fmt.Sprintf("annotation %d;", keys[i]), 1+rng.IntN(8)))
		total += len(data[i])
	}
	for _, enc := range []Encoding{Raw, Gzip} {
		b.Run(fmt.Sprintf("100k-keys-%s", enc), func(b *testing.B) {
			sb, mb := ChooseBits(n, int64(total))
			spec := Spec{Hash: Murmur, ShardBits: sb, MinishardBits: mb, MinishardIndexEncoding: Gzip, DataEncoding: enc}
			b.SetBytes(int64(total))
			b.ReportAllocs()
			for b.Loop() {
				bl, err := NewBuilder(spec)
				if err != nil {
					b.Fatal(err)
				}
				bl.Grow(len(keys))
				for i, k := range keys {
					bl.Add(k, data[i])
				}
				if err := bl.WriteAll(func(string, []byte) error { return nil }); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "keys/s")
		})
	}
}

// TestLayoutIsTheShard: a shard's Layout holds the indexes of the file
// AppendShard writes, byte for byte, each chunk is stored there as
// EncodeChunk stores it, Chunk finds the chunk of every byte of chunk
// data and Largest the largest chunk of a span, for raw and gzip data and indexes and both hashes; a key of
// another shard and an empty shard are errors.
func TestLayoutIsTheShard(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	for _, spec := range []Spec{
		{Hash: Identity, PreshiftBits: 2, MinishardBits: 2, ShardBits: 1, MinishardIndexEncoding: Raw, DataEncoding: Raw},
		{Hash: Murmur, MinishardBits: 3, ShardBits: 2, MinishardIndexEncoding: Gzip, DataEncoding: Gzip},
		{Hash: Murmur, MinishardIndexEncoding: Gzip, DataEncoding: Raw},
	} {
		b, err := NewBuilder(spec)
		if err != nil {
			t.Fatal(err)
		}
		data := map[uint64][]byte{}
		for range 200 {
			k := rng.Uint64N(5000)
			data[k] = bytes.Repeat([]byte{byte(k)}, rng.IntN(40))
		}
		for k, d := range data {
			b.Add(k, d)
		}
		shards, err := b.Shards()
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range shards {
			want, err := b.AppendShard(nil, n)
			if err != nil {
				t.Fatal(err)
			}
			var sized []Sized
			enc := map[uint64][]byte{}
			for k, d := range data {
				if sh, _ := spec.Locate(k); sh == n {
					e, err := b.EncodeChunk(nil, d)
					if err != nil {
						t.Fatal(err)
					}
					enc[k] = e
					sized = append(sized, Sized{Key: k, Size: int64(len(e))})
				}
			}
			lay, err := b.Layout(n, sized)
			if err != nil {
				t.Fatal(err)
			}
			if lay.Size != int64(len(want)) || !bytes.Equal(lay.Head, want[:len(lay.Head)]) || !bytes.Equal(lay.Tail, want[lay.TailStart:]) {
				t.Fatalf("%+v shard %d: the layout's indexes are not the shard's", spec, n)
			}
			r, err := NewReader(spec, n, bytes.NewReader(want), int64(len(want)))
			if err != nil {
				t.Fatal(err)
			}
			es, err := r.Entries()
			if err != nil || len(es) != len(sized) {
				t.Fatalf("%+v shard %d: %d entries, %v", spec, n, len(es), err)
			}
			for _, e := range es {
				if !bytes.Equal(want[e.Offset:e.Offset+e.Size], enc[e.Key]) {
					t.Fatalf("%+v shard %d: chunk %d is not stored as EncodeChunk stores it", spec, n, e.Key)
				}
				if e.Size == 0 {
					continue
				}
				for _, off := range []int64{e.Offset, e.Offset + e.Size - 1} {
					if got, err := lay.Chunk(off); err != nil || got != e {
						t.Fatalf("%+v shard %d: byte %d is in %+v, the layout says %+v (%v)", spec, n, off, e, got, err)
					}
				}
			}
			if _, err := lay.Chunk(lay.TailStart); err == nil {
				t.Fatalf("%+v shard %d: the minishard indexes taken for chunk data", spec, n)
			}
			// Largest over spans of the file: the whole, the indexes, and
			// random spans, against a scan of the entries.
			spans := [][2]int64{{0, lay.Size}, {0, int64(len(lay.Head))}, {lay.TailStart, lay.Size}}
			for range 50 {
				lo := rng.Int64N(lay.Size)
				spans = append(spans, [2]int64{lo, lo + rng.Int64N(lay.Size-lo) + 1})
			}
			for _, sp := range spans {
				var want Entry
				for _, e := range es {
					if e.Offset < sp[1] && e.Offset+e.Size > sp[0] && e.Size > want.Size {
						want = e
					}
				}
				if got, err := lay.Largest(sp[0], sp[1]); err != nil || got.Size != want.Size || (want.Size > 0 && got.Offset+got.Size <= sp[0]) {
					t.Fatalf("%+v shard %d: the largest chunk in [%d, %d) is %+v, Largest says %+v (%v)", spec, n, sp[0], sp[1], want, got, err)
				}
			}
		}
		other := Sized{Key: 0, Size: 1}
		for k := uint64(0); ; k++ {
			if sh, _ := spec.Locate(k); sh != shards[0] {
				other.Key = k
				break
			}
			if k > 1<<20 {
				other.Key = math.MaxUint64
				break
			}
		}
		if sh, _ := spec.Locate(other.Key); sh != shards[0] {
			if _, err := b.Layout(shards[0], []Sized{other}); err == nil {
				t.Errorf("%+v: a key of another shard was laid out", spec)
			}
		}
		if _, err := b.Layout(shards[0], nil); !errors.Is(err, ErrEmptyShard) {
			t.Errorf("%+v: an empty layout: %v", spec, err)
		}
	}
}
