package zarr

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/localfs"
	"github.com/zvfserve/zvfserve/zvf/storage/memstore"
)

// chunkDoc is a 0.7 per-chunk array document as the reference writes it.
const chunkDoc = `{"shape":[46728],"data_type":"uint8","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[46728]}},"chunk_key_encoding":{"name":"default","configuration":{"separator":"/"}},"fill_value":0,"codecs":[{"name":"bytes"}],"attributes":{},"zarr_format":3,"node_type":"array","storage_transformers":[]}`

// TestFamilyTemplate: documents that differ from the template only in
// their shape lists take the fast path and parse to ParseNode's result;
// every other difference is parsed in full, with ParseNode's result or
// error.
func TestFamilyTemplate(t *testing.T) {
	t.Parallel()
	shapes := func(s, c string) string {
		d := strings.Replace(chunkDoc, `"shape":[46728]`, `"shape":[`+s+`]`, 1)
		return strings.Replace(d, `"chunk_shape":[46728]`, `"chunk_shape":[`+c+`]`, 1)
	}
	for _, c := range []struct {
		name, tpl, doc string
		fast           bool
	}{
		{"same", chunkDoc, chunkDoc, true},
		{"other shape", chunkDoc, shapes("12", "12"), true},
		{"spaces in the lists", chunkDoc, shapes(" 7 ", "\t7\n"), true},
		{"zero length", chunkDoc, shapes("0", "1"), true},
		{"largest int64", chunkDoc, shapes("9223372036854775807", "1"), true},
		{"int64 overflow", chunkDoc, shapes("9223372036854775808", "1"), false},
		{"zero chunk", chunkDoc, shapes("5", "0"), false},
		{"negative", chunkDoc, shapes("-5", "5"), false},
		{"leading zero", chunkDoc, shapes("05", "5"), false},
		{"exponent", chunkDoc, shapes("5e2", "5"), false},
		{"fraction", chunkDoc, shapes("5.0", "5"), false},
		{"rank 2", chunkDoc, shapes("5,5", "5,5"), false},
		{"empty", chunkDoc, shapes("", ""), false},
		{"other fill", chunkDoc, strings.Replace(chunkDoc, `"fill_value":0`, `"fill_value":7`, 1), false},
		{"other codec", chunkDoc, strings.Replace(chunkDoc, `{"name":"bytes"}`, `{"name":"bytes"},{"name":"zstd","configuration":{"level":1}}`, 1), false},
		{"other attributes", chunkDoc, strings.Replace(chunkDoc, `"attributes":{}`, `"attributes":{"n":1}`, 1), false},
		{"truncated", chunkDoc, chunkDoc[:len(chunkDoc)-1], false},
		{"trailing", chunkDoc, chunkDoc + "x", false},
		{"a shape-like member folded", strings.Replace(chunkDoc, `"zarr_format"`, `"SHAPE":[3],"zarr_format"`, 1),
			strings.Replace(shapes("9", "9"), `"zarr_format"`, `"SHAPE":[3],"zarr_format"`, 1), false},
		{"rank 0", `{"shape":[],"data_type":"uint8","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[]}},"chunk_key_encoding":{"name":"default"},"fill_value":0,"codecs":[{"name":"bytes"}],"zarr_format":3,"node_type":"array"}`,
			`{"shape":[],"data_type":"uint8","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[]}},"chunk_key_encoding":{"name":"default"},"fill_value":0,"codecs":[{"name":"bytes"}],"zarr_format":3,"node_type":"array"}`, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := NewFamily(nil, nil)
			if _, err := f.parse([]byte(c.tpl)); err != nil {
				t.Fatal(err)
			}
			if f.tpl == nil {
				if c.fast {
					t.Fatal("no template from the first document")
				}
			} else if _, fast := f.tpl.match([]byte(c.doc)); fast != c.fast {
				t.Errorf("fast path %v, want %v", fast, c.fast)
			}
			sameAsParseNode(t, f, []byte(c.doc))
		})
	}
}

// sameAsParseNode: f parses doc as ParseNode does (both fail, or both
// give the same metadata).
func sameAsParseNode(t *testing.T, f *Family, doc []byte) {
	t.Helper()
	got, gerr := f.parse(doc)
	var want *ArrayMeta
	n, werr := ParseNode(doc)
	if werr == nil {
		if n.Array == nil {
			werr = errors.New("not an array")
		} else {
			want = n.Array
		}
	}
	if (gerr == nil) != (werr == nil) || !reflect.DeepEqual(got, want) {
		t.Fatalf("family: %+v, %v\nParseNode: %+v, %v\ndoc %q", got, gerr, want, werr, doc)
	}
}

// TestFamilyOpen: arrays opened through a family read the same bytes as
// OpenArray's, and a missing array is the storage's not-found.
func TestFamilyOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := memstore.New()
	defer st.Close()
	for i, n := range []int{3, 5, 8} {
		p := "f/" + string(rune('a'+i))
		doc := strings.ReplaceAll(chunkDoc, "46728", strconv.Itoa(n))
		data := make([]byte, n)
		for j := range data {
			data[j] = byte(i*10 + j)
		}
		if err := st.Put(ctx, p+"/zarr.json", []byte(doc)); err != nil {
			t.Fatal(err)
		}
		if err := st.Put(ctx, p+"/c/0", data); err != nil {
			t.Fatal(err)
		}
	}
	f := NewFamily(st, nil)
	for _, p := range []string{"f/a", "f/b", "f/c"} {
		a, err := f.Open(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		b, err := OpenArray(ctx, st, p, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := a.ReadBytes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want, err := b.ReadBytes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) || !reflect.DeepEqual(a.Meta(), b.Meta()) {
			t.Fatalf("%s: family %v %+v, OpenArray %v %+v", p, got, a.Meta(), want, b.Meta())
		}
	}
	if _, err := f.Open(ctx, "f/missing"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("missing array: %v", err)
	}
}

// FuzzFamily: after any template, any document parses through the
// family exactly as ParseNode parses it.
func FuzzFamily(f *testing.F) {
	f.Add([]byte(chunkDoc), []byte(strings.ReplaceAll(chunkDoc, "46728", "12")))
	f.Add([]byte(chunkDoc), []byte(strings.Replace(chunkDoc, "[46728]", "[1,2]", 1)))
	for _, b := range corpusMeta(f, "*/*.zarr") {
		f.Add(b, b)
	}
	f.Fuzz(func(t *testing.T, tpl, doc []byte) {
		fam := NewFamily(nil, nil)
		_, _ = fam.parse(tpl)
		sameAsParseNode(t, fam, doc)
	})
}

// familyStore is an in-memory store for a family test, closed when the
// test ends, and put, which writes one object of it or stops the test.
func familyStore(t *testing.T) (*memstore.Store, func(k string, b []byte)) {
	st := memstore.New()
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	return st, func(k string, b []byte) {
		t.Helper()
		if err := st.Put(context.Background(), k, b); err != nil {
			t.Fatal(err)
		}
	}
}

// readsAsOpenArray: read answers each array's bytes, or fails, as
// OpenArray and ReadBytes do.
func readsAsOpenArray(t *testing.T, st storage.Store, read func(context.Context, string) ([]byte, error), paths ...string) {
	t.Helper()
	ctx := context.Background()
	for _, p := range paths {
		got, gerr := read(ctx, p)
		var want []byte
		a, werr := OpenArray(ctx, st, p, nil)
		if werr == nil {
			want, werr = a.ReadBytes(ctx)
		}
		if !bytes.Equal(got, want) || (gerr == nil) != (werr == nil) ||
			(werr != nil && (errors.Is(gerr, storage.ErrTooLarge) != errors.Is(werr, storage.ErrTooLarge) ||
				errors.Is(gerr, storage.ErrNotFound) != errors.Is(werr, storage.ErrNotFound))) {
			t.Errorf("%s: family %v, %v; OpenArray %v, %v", p, got, gerr, want, werr)
		}
	}
}

// chunkDocOf is chunkDoc for an array of n bytes.
func chunkDocOf(n int) []byte {
	return []byte(strings.ReplaceAll(chunkDoc, "46728", strconv.Itoa(n)))
}

// TestFamilyReadBytes: once a family has opened an array, ReadBytes reads
// the next one's chunk alongside its zarr.json, and answers exactly as
// OpenArray and ReadBytes do — also when the early read is of no use: a
// chunk stored elsewhere, a chunk larger than its metadata allows, a
// missing chunk (fill bytes) or a missing array.
func TestFamilyReadBytes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, put := familyStore(t)
	put("f/first/zarr.json", chunkDocOf(4))
	put("f/first/c/0", []byte{1, 2, 3, 4})
	put("f/plain/zarr.json", chunkDocOf(5))
	put("f/plain/c/0", []byte{5, 6, 7, 8, 9})
	put("f/dotted/zarr.json", []byte(strings.Replace(string(chunkDocOf(3)), `"name":"default","configuration":{"separator":"/"}`, `"name":"v2","configuration":{"separator":"."}`, 1)))
	put("f/dotted/0", []byte{7, 7, 7})
	put("f/dotted/c/0", []byte{9, 9, 9}) // where the template's chunks are, not this array's
	put("f/big/zarr.json", chunkDocOf(3))
	put("f/big/c/0", make([]byte, 100))
	put("f/nochunk/zarr.json", chunkDocOf(3))
	f := NewFamily(st, nil)
	if _, err := f.ReadBytes(ctx, "f/first"); err != nil {
		t.Fatal(err)
	}
	readsAsOpenArray(t, st, f.ReadBytes, "f/plain", "f/dotted", "f/big", "f/nochunk", "f/missing")

	// The chunk read is in flight while zarr.json is: a zarr.json read that
	// waits for its chunk's read to begin returns.
	started := make(chan struct{})
	gate := &gateStore{Store: st, chunk: "f/plain/c/0", meta: "f/plain/zarr.json", started: started}
	g := NewFamily(gate, nil)
	if _, err := g.ReadBytes(ctx, "f/first"); err != nil {
		t.Fatal(err)
	}
	gate.armed.Store(true)
	b, err := g.ReadBytes(ctx, "f/plain")
	if err != nil || !bytes.Equal(b, []byte{5, 6, 7, 8, 9}) {
		t.Fatalf("%v %v", b, err)
	}
	if gate.waited.Load() {
		t.Fatal("zarr.json was read before the chunk's read began: the two reads are one after the other")
	}
}

// TestFamilyFirstReadBytesReadsAhead: a family's first arrays, before any
// has opened (a cold query starts several at once), read their chunk
// alongside zarr.json too, where 0.7 writers store a one-chunk array's
// chunk (c/0), and answer as OpenArray and ReadBytes do when the chunk is
// elsewhere (v2 keys), larger than the metadata allows, or missing.
func TestFamilyFirstReadBytesReadsAhead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, put := familyStore(t)
	put("f/plain/zarr.json", chunkDocOf(5))
	put("f/plain/c/0", []byte{5, 6, 7, 8, 9})
	put("f/dotted/zarr.json", []byte(strings.Replace(string(chunkDocOf(3)), `"name":"default","configuration":{"separator":"/"}`, `"name":"v2","configuration":{"separator":"."}`, 1)))
	put("f/dotted/0", []byte{7, 7, 7})
	put("f/dotted/c/0", []byte{9, 9, 9}) // not this array's chunk
	put("f/big/zarr.json", chunkDocOf(3))
	put("f/big/c/0", make([]byte, 100))
	put("f/nochunk/zarr.json", chunkDocOf(3))
	first := func(ctx context.Context, p string) ([]byte, error) { return NewFamily(st, nil).ReadBytes(ctx, p) }
	readsAsOpenArray(t, st, first, "f/plain", "f/dotted", "f/big", "f/nochunk", "f/missing")
	started := make(chan struct{})
	gate := &gateStore{Store: st, chunk: "f/plain/c/0", meta: "f/plain/zarr.json", started: started}
	gate.armed.Store(true)
	b, err := NewFamily(gate, nil).ReadBytes(ctx, "f/plain")
	if err != nil || !bytes.Equal(b, []byte{5, 6, 7, 8, 9}) {
		t.Fatalf("%v %v", b, err)
	}
	if gate.waited.Load() {
		t.Fatal("a fresh family read zarr.json before its chunk's read began: the two reads are one after the other")
	}
}

// gateStore holds a read of meta, once armed, until a read of chunk has
// begun (or a second has passed, which it records).
type gateStore struct {
	storage.Store
	chunk, meta string
	started     chan struct{}
	once        sync.Once
	armed       atomic.Bool
	waited      atomic.Bool
}

func (g *gateStore) Get(ctx context.Context, key string, o storage.ReadOptions) (storage.Object, error) {
	if g.armed.Load() {
		switch key {
		case g.chunk:
			g.once.Do(func() { close(g.started) })
		case g.meta:
			select {
			case <-g.started:
			case <-time.After(time.Second):
				g.waited.Store(true)
			}
		}
	}
	return g.Store.Get(ctx, key, o)
}

// TestFamilyReadBytesOneGoroutineLocally: a chunk of a 0.7 family on a
// local folder (its zarr.json and its bytes) is read on one goroutine
// started for both files, not one a file nor one more for the early read,
// with the same bytes as an array opened and read. Not parallel:
// goroutines are counted process-wide.
func TestFamilyReadBytesOneGoroutineLocally(t *testing.T) {
	ctx := context.Background()
	st, err := localfs.Open(t.TempDir(), localfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	}()
	for _, k := range []string{"f/a", "f/b"} {
		if err := st.Put(ctx, k+"/zarr.json", chunkDocOf(5)); err != nil {
			t.Fatal(err)
		}
		if err := st.Put(ctx, k+"/c/0", []byte{5, 6, 7, 8, 9}); err != nil {
			t.Fatal(err)
		}
	}
	fam := NewFamily(st, nil)
	for _, p := range []string{"f/a", "f/b"} { // before and after the family's first array opened
		g0 := goroutinesCreated()
		b, err := fam.ReadBytes(ctx, p)
		started := goroutinesCreated() - g0
		if err != nil || !bytes.Equal(b, []byte{5, 6, 7, 8, 9}) {
			t.Fatalf("%s: %v %v", p, b, err)
		}
		if started != 1 {
			t.Errorf("%s: %d goroutines started for one chunk, want 1", p, started)
		}
	}
}

// goroutinesCreated is how many goroutines the process has started.
func goroutinesCreated() int64 {
	m := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(m)
	return int64(m[0].Value.Uint64())
}
