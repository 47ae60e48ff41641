package zarr

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"

	"github.com/zvfserve/zvfserve/zvf/storage"
)

// Family opens the arrays of a family whose zarr.json documents differ
// only in their shapes: ZVF 0.7 writes each chunk of a family as its own
// one-chunk array, alike but for "shape" and "chunk_shape". A document
// parsed in full becomes the family's template; a later one equal to it
// byte for byte outside those two integer lists has only the lists read,
// not the whole document parsed again. Anything else is parsed in full
// (and becomes the template), so the result is always ParseNode's.
type Family struct {
	st storage.Store
	cs *Codecs

	mu  sync.Mutex
	tpl *template
	// ahead is where the template's arrays store their chunk and the
	// bound of reading it, once an array has opened through the family
	// (see ReadBytes).
	ahead *readAhead
}

type readAhead struct {
	key   string // the chunk key of a one-chunk array, relative to it
	bound int64
}

// NewFamily is a Family reading from st; cs as for OpenArray.
func NewFamily(st storage.Store, cs *Codecs) *Family {
	if cs == nil {
		cs = NewCodecs()
	}
	return &Family{st: st, cs: cs}
}

// Open reads and parses <p>/zarr.json, as OpenArray does.
func (f *Family) Open(ctx context.Context, p string) (*Array, error) {
	return f.opened(openArray(ctx, f.st, p, f.cs, f.parse))
}

// opened notes where a's chunk is, for the family's next early reads.
func (f *Family) opened(a *Array, err error) (*Array, error) {
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	if f.ahead == nil {
		f.ahead = &readAhead{key: a.meta.KeyEncoding.ChunkKey([]int64{0}), bound: a.pipe.withSlack(a.lim.MaxChunkBytes)}
	}
	f.mu.Unlock()
	return a, nil
}

// ReadBytes opens the array at p and returns its bytes, as Open and
// Array.ReadBytes would. The chunk is read while zarr.json is, where the
// family's arrays store it (once one has opened; before, where 0.7
// writers do): on an object store one round trip instead of two, on a
// local disk two files at once. The early read is used
// only if the array's own metadata puts its one chunk there and allows
// its size; otherwise the chunk is read again as the metadata says.
func (f *Family) ReadBytes(ctx context.Context, p string) ([]byte, error) {
	p = strings.Trim(p, "/")
	f.mu.Lock()
	ra := f.ahead
	f.mu.Unlock()
	if ra == nil {
		// No array has opened yet (a cold query opens several at once):
		// guess where 0.7 writers put a one-chunk array's chunk, the
		// default key encoding's c/0, within the family's limit. The
		// array's own metadata still decides (see below), so a wrong
		// guess costs a read, never an answer.
		max := f.cs.lim.MaxChunkBytes
		ra = &readAhead{key: "c/0", bound: max + compressSlack(max)}
	}
	key := join(p, ra.key)
	// Both reads start at once, not on a goroutine of this call's: a
	// local folder reads the two files one after the other on one of its
	// own (storage.BatchStarter), zarr.json first.
	waits := storage.StartAll(ctx, f.st, []storage.Read{
		{Key: join(p, "zarr.json"), Opt: storage.Whole(MaxMetadataBytes)},
		{Key: key, Opt: storage.Whole(ra.bound)},
	})
	meta, merr := waits[0]()
	a, err := f.opened(openFetched(f.st, p, f.cs, f.parse, meta.Data, merr))
	obj, rerr := waits[1]() // always waited for: no read outlives the call
	if err != nil {
		return nil, err
	}
	if errors.Is(rerr, storage.ErrTooLarge) {
		return a.ReadBytes(ctx) // refused by the family's bound: the array's own decides
	}
	// Any other outcome of the early read (a missing chunk, a change, an
	// unreachable store) is what reading it now would have met.
	return a.ReadBytesFetched(ctx, key, obj.Data, rerr)
}

// parse is ParseNode for an array document, through the template.
func (f *Family) parse(b []byte) (*ArrayMeta, error) {
	f.mu.Lock()
	t := f.tpl
	f.mu.Unlock()
	if t != nil {
		if m, ok := t.match(b); ok {
			return m, nil
		}
	}
	m, err := parseArrayDoc(b)
	if err != nil {
		return nil, err
	}
	if t := newTemplate(b, m); t != nil {
		f.mu.Lock()
		f.tpl = t
		f.mu.Unlock()
	}
	return m, nil
}

// template is a parsed array document with where its two shape lists
// are: spans[0] holds the top-level "shape" list's contents (between its
// brackets), spans[1] chunk_grid.configuration.chunk_shape's.
type template struct {
	doc   []byte
	meta  *ArrayMeta
	spans [2][2]int
}

// newTemplate locates the shape lists of doc (parsed as m), or is nil if
// it cannot tell where they are unambiguously.
func newTemplate(doc []byte, m *ArrayMeta) *template {
	t := &template{doc: bytes.Clone(doc), meta: m, spans: [2][2]int{{-1, -1}, {-1, -1}}}
	dec := json.NewDecoder(bytes.NewReader(t.doc))
	var path []string // member names down to the current value
	var inObj []bool  // per open container: is it an object
	var wantKey []bool
	seen := map[string]bool{}
	for {
		tok, err := dec.Token()
		if err != nil {
			break // io.EOF once the document ends
		}
		if len(inObj) > 0 && inObj[len(inObj)-1] && wantKey[len(wantKey)-1] {
			if k, ok := tok.(string); ok {
				// encoding/json matches member names without regard to
				// case and keeps the last: a name that folds to one of
				// the spans' must be that name, once.
				parent := strings.Join(path, "\x00")
				if want := spanParents[parent]; want != nil {
					for _, w := range want {
						if strings.EqualFold(k, w) {
							if k != w || seen[parent+"\x00"+w] {
								return nil
							}
							seen[parent+"\x00"+w] = true
						}
					}
				}
				path = append(path, k)
				wantKey[len(wantKey)-1] = false
				continue
			}
		}
		which := -1
		if d, ok := tok.(json.Delim); ok && d == '[' {
			switch strings.Join(path, "\x00") {
			case "shape":
				which = 0
			case "chunk_grid\x00configuration\x00chunk_shape":
				which = 1
			}
		}
		if which >= 0 {
			if t.spans[which][0] >= 0 {
				return nil // a duplicate member: leave it to ParseNode
			}
			start := int(dec.InputOffset())
			for {
				tok, err := dec.Token()
				if err != nil {
					return nil
				}
				if d, ok := tok.(json.Delim); ok {
					if d != ']' {
						return nil
					}
					break
				}
			}
			t.spans[which] = [2]int{start, int(dec.InputOffset()) - 1}
			endValue(&path, inObj, wantKey)
			continue
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				inObj = append(inObj, d == '{')
				wantKey = append(wantKey, d == '{')
				continue
			case '}', ']':
				inObj, wantKey = inObj[:len(inObj)-1], wantKey[:len(wantKey)-1]
			}
		}
		endValue(&path, inObj, wantKey)
	}
	if t.spans[0][0] < 0 || t.spans[1][0] < 0 || t.spans[0][1] > t.spans[1][0] ||
		t.doc[t.spans[0][1]] != ']' || t.doc[t.spans[1][1]] != ']' {
		return nil
	}
	return t
}

// spanParents: for the path of an object, the member names on the way to
// the shape lists.
var spanParents = map[string][]string{
	"":                            {"shape", "chunk_grid"},
	"chunk_grid":                  {"configuration"},
	"chunk_grid\x00configuration": {"chunk_shape"},
}

// endValue is called after a whole value: an object member's name is
// popped and its object expects the next name.
func endValue(path *[]string, inObj, wantKey []bool) {
	if n := len(inObj); n > 0 && inObj[n-1] {
		*path = (*path)[:len(*path)-1]
		wantKey[n-1] = true
	}
}

// match is the metadata of doc if doc is the template's but for the
// integers in its shape lists (as many of them, each a plain JSON
// integer).
func (t *template) match(doc []byte) (*ArrayMeta, bool) {
	var lists [2][]int64
	at, pos := 0, 0 // in t.doc, in doc
	for i, s := range t.spans {
		seg := t.doc[at:s[0]]
		if !bytes.HasPrefix(doc[pos:], seg) {
			return nil, false
		}
		pos += len(seg)
		end := bytes.IndexByte(doc[pos:], ']')
		if end < 0 {
			return nil, false
		}
		want := len(t.meta.Shape)
		v, ok := intList(doc[pos:pos+end], want)
		if !ok {
			return nil, false
		}
		lists[i] = v
		pos += end
		at = s[1]
	}
	if !bytes.Equal(doc[pos:], t.doc[at:]) {
		return nil, false
	}
	shape, chunk := lists[0], lists[1]
	if checkChunkShape(chunk) != nil {
		return nil, false // ParseNode says what is wrong
	}
	m := *t.meta
	m.Shape, m.ChunkShape = shape, chunk
	return &m, true
}

// intList parses n comma-separated non-negative JSON integers (with JSON
// whitespace around them) that fit an int64.
func intList(b []byte, n int) ([]int64, bool) {
	out := make([]int64, 0, n)
	i := 0
	space := func() {
		for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
			i++
		}
	}
	for k := 0; k < n; k++ {
		space()
		if k > 0 {
			if i >= len(b) || b[i] != ',' {
				return nil, false
			}
			i++
			space()
		}
		start := i
		var v int64
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			d := int64(b[i] - '0')
			if v > (1<<63-1-d)/10 {
				return nil, false
			}
			v = v*10 + d
			i++
		}
		if i == start || (b[start] == '0' && i-start > 1) {
			return nil, false
		}
		out = append(out, v)
	}
	space()
	return out, i == len(b)
}
