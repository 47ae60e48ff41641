package zvf

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"sync"

	"github.com/zvfserve/zvfserve/zvf/ragged"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/zarr"
)

// layout07 is ZVF 0.6/0.7's layout: the cell of family F at chunk C is
// the single-chunk uint8 array <F>/<C>/ (zarr.json + c/0), or a slice of
// one of the reference writer's __shard_NNNNNN arrays that pack them; the
// cross-chunk links of a delta are one global blob,
// cross_chunk_links/<delta>/data (zvf-format §2, §5).
type layout07 struct {
	l      *Level
	keys   []Key
	packed bool // the store packs chunks into __shard_ arrays (root shard_layout)

	mu  sync.Mutex
	idx map[string]*arrayIndex // family -> where its chunks live
	// fam opens a family's per-chunk arrays, whose documents differ only
	// in their shapes, without parsing each one whole.
	fam map[string]*zarr.Family

	ccl map[int]*cclMeta // cross_chunk_links/<delta>
}

type cclMeta struct {
	width    int
	numLinks int64 // -1 unknown
	ndim     int
	// stored: the family's data array was there when the level opened
	// (a family without one has no records).
	stored bool
}

// arrayIndex lists one per-chunk family: its chunk keys, and for keys
// packed into the reference writer's __shard_NNNNNN arrays, where they
// live.
type arrayIndex struct {
	keys   []Key
	direct map[string]bool
	shards map[string]shardRef
	// allDirect: the store has no shard arrays, so every key is read from
	// its own array and nothing was listed (the vertex listing already
	// says which chunks exist; a missing blob is found by opening it).
	allDirect bool
}

type shardRef struct {
	shard    string // array path of the shard
	off, len int64
}

// maxShardIndex bounds one shard's key count (the writer's default is 64
// chunks a shard).
const maxShardIndex = 1 << 20

func newLayout07(l *Level, packed bool) *layout07 {
	return &layout07{l: l, packed: packed, idx: map[string]*arrayIndex{}, ccl: map[int]*cclMeta{}}
}

func (y *layout07) sharded() bool { return y.packed }

func (y *layout07) chunks() []Key { return y.keys }

func (y *layout07) open(ctx context.Context) error {
	l := y.l
	idx, err := y.index(ctx, "vertices")
	if err != nil {
		return err
	}
	y.keys = idx.keys
	a, ok, err := l.arrayAttrs(ctx, "links/0")
	if err != nil {
		return err
	}
	if ok {
		l.intra = "links/0"
		l.linkWidth = a.LinkWidth
		if l.linkWidth == 0 {
			l.linkWidth = 2
		}
		if l.linkWidth < 1 || l.linkWidth > 64 {
			return l.s.errf(ErrCorrupt, l.n, "links/0", "", "link_width %d", l.linkWidth)
		}
	}
	names, err := l.children(ctx, "cross_chunk_links")
	if err != nil {
		return err
	}
	for _, name := range names {
		d, ok := parseDelta(name)
		if !ok {
			continue
		}
		a, _, err := l.arrayAttrs(ctx, "cross_chunk_links/"+name)
		if err != nil {
			return err
		}
		m := &cclMeta{width: a.LinkWidth, numLinks: -1, ndim: a.SidNdim}
		if m.width == 0 {
			m.width = 2
		}
		if m.ndim == 0 {
			m.ndim = l.keyArity
		}
		if a.NumLinks != nil {
			m.numLinks = *a.NumLinks
		}
		if m.width < 1 || m.width > 64 || m.ndim > 32 {
			return l.s.errf(ErrCorrupt, l.n, "cross_chunk_links/"+name, "", "link_width %d sid_ndim %d", m.width, m.ndim)
		}
		switch _, err := l.node(ctx, "cross_chunk_links/"+name+"/data"); {
		case err == nil:
			m.stored = true
		case !errors.Is(err, storage.ErrNotFound):
			return l.s.wrap(kindOf(err), l.n, "cross_chunk_links/"+name, "", err)
		}
		y.ccl[d] = m
		l.linkDeltas = append(l.linkDeltas, d)
	}
	if l.s.watched {
		// A store that may change records at open which chunks every family
		// has, so that a chunk missing later is told from one never written.
		families := []string{"vertex_fragments"}
		if l.intra != "" {
			families = append(families, l.intra)
		}
		for _, a := range l.vattrs {
			families = append(families, "vertex_attributes/"+a.Name)
		}
		for _, f := range families {
			if _, err := y.index(ctx, f); err != nil {
				return err
			}
		}
		return y.catchUp(ctx, families)
	}
	return nil
}

// catchUp lists the level's vertex chunks once more when another family's
// listing, taken after it, has a chunk it lacks: the vertex listing had
// not caught up with the store's writes (an object store's eventual
// consistency), and the level would open without that chunk. The new
// listing is taken when it finds more; a chunk no vertex listing finds
// stays out (the store lacks it: validate reports such a family's cell).
func (y *layout07) catchUp(ctx context.Context, families []string) error {
	have := make(map[string]bool, len(y.keys))
	for _, k := range y.keys {
		have[k.String()] = true
	}
	ahead := ""
	for _, f := range families {
		y.mu.Lock()
		idx := y.idx[f]
		y.mu.Unlock()
		for _, k := range idx.keys {
			if !have[k.String()] {
				ahead = f + " " + k.String()
				break
			}
		}
		if ahead != "" {
			break
		}
	}
	if ahead == "" {
		return nil
	}
	idx, err := y.list(ctx, "vertices")
	if err != nil {
		return err
	}
	if len(idx.keys) <= len(y.keys) {
		return nil
	}
	y.l.s.log.Info("a level's vertex listing lacked a chunk another family's listing had (the backend's listing had not caught up); listed again",
		"store", y.l.s.name, "level", y.l.n, "first", ahead, "chunks", len(y.keys), "now", len(idx.keys))
	y.mu.Lock()
	y.idx["vertices"] = idx
	y.mu.Unlock()
	y.keys = idx.keys
	return nil
}

// index lists where family's chunks live (its child arrays: a folder
// without a zarr.json is no chunk); without __shard_ arrays only the
// vertices are listed.
func (y *layout07) index(ctx context.Context, family string) (*arrayIndex, error) {
	l := y.l
	y.mu.Lock()
	idx, ok := y.idx[family]
	y.mu.Unlock()
	if ok {
		return idx, nil
	}
	if !y.packed && family != "vertices" && !l.s.watched {
		// Listing a per-chunk array's folder costs a directory entry per
		// chunk (1.5 s for 57k chunks) to learn nothing new, unless the
		// store may change (see open).
		idx = &arrayIndex{allDirect: true}
		y.mu.Lock()
		y.idx[family] = idx
		y.mu.Unlock()
		return idx, nil
	}
	idx, err := y.list(ctx, family)
	if err != nil {
		return nil, err
	}
	y.mu.Lock()
	if prev, ok := y.idx[family]; ok {
		idx = prev
	} else {
		y.idx[family] = idx
	}
	y.mu.Unlock()
	return idx, nil
}

// relist lists the level's vertex chunks again, as the level opened
// (checkListing).
func (y *layout07) relist(ctx context.Context) ([]Key, error) {
	idx, err := y.list(ctx, "vertices")
	if err != nil {
		return nil, err
	}
	return idx.keys, nil
}

// list lists family's chunks, sorted (index keeps what it finds).
func (y *layout07) list(ctx context.Context, family string) (*arrayIndex, error) {
	l := y.l
	names, err := l.arrays(ctx, family)
	if err != nil {
		return nil, err
	}
	idx := &arrayIndex{direct: map[string]bool{}, shards: map[string]shardRef{}}
	for _, name := range names {
		if strings.HasPrefix(name, "__shard_") {
			sp := join(join(l.path, family), name)
			b, err := storage.ReadAll(ctx, l.s.st, join(sp, "zarr.json"), zarr.MaxMetadataBytes)
			if err != nil {
				return nil, l.s.wrap(kindOf(err), l.n, family, name, err)
			}
			node, err := zarr.ParseNode(b)
			if err != nil {
				return nil, l.s.wrap(ErrCorrupt, l.n, family, name, err)
			}
			var a struct {
				Index map[string][2]int64 `json:"shard_index"`
			}
			if err := json.Unmarshal(node.Attributes, &a); err != nil || len(a.Index) > maxShardIndex {
				return nil, l.s.errf(ErrCorrupt, l.n, family, name, "bad shard_index")
			}
			for k, r := range a.Index {
				key, err := ParseKey(k)
				if err != nil || len(key) != l.keyArity || r[0] < 0 || r[1] < 0 {
					return nil, l.s.errf(ErrCorrupt, l.n, family, name, "bad shard_index entry %q %v", k, r)
				}
				ks := key.String()
				if _, dup := idx.shards[ks]; !dup {
					idx.keys = append(idx.keys, key)
				}
				idx.shards[ks] = shardRef{shard: sp, off: r[0], len: r[1]}
			}
			continue
		}
		key, err := ParseKey(name)
		if err != nil {
			continue
		}
		if len(key) != l.keyArity {
			return nil, l.s.errf(ErrCorrupt, l.n, family, name, "chunk key has %d coordinates, want %d", len(key), l.keyArity)
		}
		if _, sh := idx.shards[key.String()]; !sh {
			idx.keys = append(idx.keys, key)
		}
		idx.direct[key.String()] = true
	}
	sort.Slice(idx.keys, func(i, j int) bool { return compareKeys(idx.keys[i], idx.keys[j]) < 0 })
	// dedupe (a key both direct and sharded)
	out := idx.keys[:0]
	for i, k := range idx.keys {
		if i == 0 || !k.equal(idx.keys[i-1]) {
			out = append(out, k)
		}
	}
	idx.keys = out
	return idx, nil
}

func (y *layout07) cell(ctx context.Context, family string, key Key, ks string) ([]byte, error) {
	l := y.l
	idx, err := y.index(ctx, family)
	if err != nil {
		return nil, err
	}
	if ref, ok := shardOf(idx, ks); ok {
		sb, err := y.shardBytes(ctx, family, ref.shard)
		if err != nil {
			return nil, err
		}
		if ref.off > int64(len(sb)) || ref.len > int64(len(sb))-ref.off {
			return nil, l.s.errf(ErrCorrupt, l.n, family, ks, "shard_index [%d, %d] points outside shard %s of %d bytes", ref.off, ref.len, ref.shard, len(sb))
		}
		return sb[ref.off : ref.off+ref.len : ref.off+ref.len], nil
	}
	if !idx.allDirect && !idx.direct[ks] {
		return nil, l.s.errf(ErrNotFound, l.n, family, ks, "%w", errMissing) // not there when the level opened
	}
	b, err := y.family(family).ReadBytes(ctx, join(join(l.path, family), ks))
	if err != nil {
		if !idx.allDirect && l.s.watched {
			return nil, l.s.implied(err, l.n, family, ks) // listed when the level opened
		}
		return nil, y.cellErr(family, ks, err)
	}
	return b, nil
}

// family opens the arrays of one 0.7 family: each of its chunks is an
// array with its own zarr.json.
func (y *layout07) family(name string) *zarr.Family {
	y.mu.Lock()
	defer y.mu.Unlock()
	f := y.fam[name]
	if f == nil {
		if y.fam == nil {
			y.fam = map[string]*zarr.Family{}
		}
		f = zarr.NewFamily(y.l.s.st, y.l.s.codecs)
		y.fam[name] = f
	}
	return f
}

// cellErr is the reader's error for a cell that could not be read: a
// missing array (no zarr.json) is the chunk's absence.
func (y *layout07) cellErr(family, ks string, err error) error {
	l := y.l
	var ze *zarr.Error
	if errors.As(err, &ze) && ze.Chunk == "" && errors.Is(err, storage.ErrNotFound) {
		return l.s.errf(ErrNotFound, l.n, family, ks, "%w", errMissing)
	}
	return l.s.wrap(kindOf(err), l.n, family, ks, err)
}

func shardOf(idx *arrayIndex, ks string) (shardRef, bool) {
	if idx.allDirect || idx.direct[ks] {
		return shardRef{}, false
	}
	r, ok := idx.shards[ks]
	return r, ok
}

func (y *layout07) shardBytes(ctx context.Context, family, shard string) ([]byte, error) {
	l := y.l
	v, err := l.cached(ctx, l.cacheKey("shard", shard), func(ctx context.Context) (any, int64, error) {
		a, err := zarr.OpenArray(ctx, l.s.st, shard, l.s.codecs)
		if err != nil {
			return nil, 0, l.s.implied(err, l.n, family, shard) // listed when the level opened
		}
		b, err := a.ReadBytes(ctx)
		if err != nil {
			return nil, 0, l.s.wrap(kindOf(err), l.n, family, shard, err)
		}
		return b, int64(len(b)) + 64, nil
	})
	if err != nil {
		return nil, err
	}
	return v.([]byte), nil
}

// crossSources: 0.7 keeps a level's records in one list.
func (y *layout07) crossSources(int, []Key) []Key { return nil }

// crossLinks returns every record of cross_chunk_links/<delta> (0.7 keeps
// them in one blob, read once and cached, whatever keys asks).
// crossLinkRefs: the 0.7 writer keeps no attributes for cross-chunk
// links (zvf-format §5.5), so no record has a linkRef.
func (y *layout07) crossLinkRefs(ctx context.Context, delta int, keys []Key) ([][]ragged.Endpoint, []linkRef, error) {
	recs, err := y.crossLinks(ctx, delta, keys)
	return recs, nil, err
}

func (y *layout07) crossLinks(ctx context.Context, delta int, _ []Key) ([][]ragged.Endpoint, error) {
	l := y.l
	m, ok := y.ccl[delta]
	if !ok {
		return nil, nil
	}
	if !m.stored {
		return nil, nil
	}
	name := "cross_chunk_links/" + deltaName(delta)
	v, err := l.cached(ctx, l.cacheKey("ccl", deltaName(delta)), func(ctx context.Context) (any, int64, error) {
		a, err := zarr.OpenArray(ctx, l.s.st, join(l.path, name+"/data"), l.s.codecs)
		if err != nil {
			return nil, 0, l.s.implied(err, l.n, name, "") // there when the level opened
		}
		b, err := a.ReadBytes(ctx)
		if err != nil {
			return nil, 0, l.s.wrap(kindOf(err), l.n, name, "", err)
		}
		recs, err := ragged.DecodeLinks(b, m.width, m.ndim, m.numLinks)
		if err != nil {
			return nil, 0, l.s.errf(ErrCorrupt, l.n, name, "", "%w", err)
		}
		return recs, int64(len(b)) * 2, nil
	})
	if err != nil {
		return nil, err
	}
	return v.([][]ragged.Endpoint), nil
}
