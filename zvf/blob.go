package zvf

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"

	"github.com/zvfserve/zvfserve/fragindex"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/zarr"
)

// arrayIndex lists one per-chunk array: its chunk keys, and for keys packed
// into the reference writer's __shard_NNNNNN arrays, where they live.
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

func (l *Level) arrayIndexFor(ctx context.Context, array string) (*arrayIndex, error) {
	l.arrMu.Lock()
	idx, ok := l.arrIdx[array]
	l.arrMu.Unlock()
	if ok {
		return idx, nil
	}
	if !l.s.shards && array != "vertices" {
		// Listing a per-chunk array's folder costs a directory entry per
		// chunk (1.5 s for 57k chunks) to learn nothing new.
		idx = &arrayIndex{allDirect: true}
		l.arrMu.Lock()
		l.arrIdx[array] = idx
		l.arrMu.Unlock()
		return idx, nil
	}
	names, err := l.children(ctx, array)
	if err != nil {
		return nil, err
	}
	idx = &arrayIndex{direct: map[string]bool{}, shards: map[string]shardRef{}}
	for _, name := range names {
		if strings.HasPrefix(name, "__shard_") {
			sp := join(join(l.path, array), name)
			b, err := storage.ReadAll(ctx, l.s.st, join(sp, "zarr.json"), zarr.MaxMetadataBytes)
			if err != nil {
				return nil, l.s.wrap(kindOf(err), l.n, array, name, err)
			}
			node, err := zarr.ParseNode(b)
			if err != nil {
				return nil, l.s.wrap(ErrCorrupt, l.n, array, name, err)
			}
			var a struct {
				Index map[string][2]int64 `json:"shard_index"`
			}
			if err := json.Unmarshal(node.Attributes, &a); err != nil || len(a.Index) > maxShardIndex {
				return nil, l.s.errf(ErrCorrupt, l.n, array, name, "bad shard_index")
			}
			for k, r := range a.Index {
				key, err := ParseKey(k)
				if err != nil || len(key) != l.keyArity || r[0] < 0 || r[1] < 0 {
					return nil, l.s.errf(ErrCorrupt, l.n, array, name, "bad shard_index entry %q %v", k, r)
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
			return nil, l.s.errf(ErrCorrupt, l.n, array, name, "chunk key has %d coordinates, want %d", len(key), l.keyArity)
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
	l.arrMu.Lock()
	if prev, ok := l.arrIdx[array]; ok {
		idx = prev
	} else {
		l.arrIdx[array] = idx
	}
	l.arrMu.Unlock()
	return idx, nil
}

func (l *Level) cacheKey(parts ...string) string {
	return l.s.cachePrefix + l.path + "\x00" + strings.Join(parts, "\x00")
}

// cached loads through the store's cache (or directly without one).
func (l *Level) cached(ctx context.Context, key string, load func(ctx context.Context) (any, int64, error)) (any, error) {
	if l.s.cache == nil {
		v, _, err := load(ctx)
		return v, err
	}
	v, err := l.s.cache.Get(ctx, key, load)
	if err != nil {
		l.s.logCachePanic(err)
	}
	return v, err
}

// errMissing marks a blob array that does not exist for a key.
var errMissing = errors.New("no such blob")

// blob returns the decoded bytes of <array>/<key> (do not modify: they may
// be shared through the cache). A missing blob returns an error matching
// ErrNotFound.
func (l *Level) blob(ctx context.Context, array string, key Key) ([]byte, error) {
	ks := key.String()
	v, err := l.cached(ctx, l.cacheKey("blob", array, ks), func(ctx context.Context) (any, int64, error) {
		b, err := l.loadBlob(ctx, array, key, ks)
		return b, int64(len(b)) + 64, err
	})
	if err != nil {
		return nil, err
	}
	return v.([]byte), nil
}

func (l *Level) loadBlob(ctx context.Context, array string, key Key, ks string) ([]byte, error) {
	idx, err := l.arrayIndexFor(ctx, array)
	if err != nil {
		return nil, err
	}
	if ref, ok := l.shardOf(idx, ks); ok {
		sb, err := l.shardBytes(ctx, array, ref.shard)
		if err != nil {
			return nil, err
		}
		if ref.off > int64(len(sb)) || ref.len > int64(len(sb))-ref.off {
			return nil, l.s.errf(ErrCorrupt, l.n, array, ks, "shard_index [%d, %d] points outside shard %s of %d bytes", ref.off, ref.len, ref.shard, len(sb))
		}
		return sb[ref.off : ref.off+ref.len : ref.off+ref.len], nil
	}
	a, err := zarr.OpenArray(ctx, l.s.st, join(join(l.path, array), ks), l.s.codecs)
	if err != nil {
		if errors.Is(err, storage.ErrNotFound) {
			return nil, l.s.errf(ErrNotFound, l.n, array, ks, "%w", errMissing)
		}
		return nil, l.s.wrap(kindOf(err), l.n, array, ks, err)
	}
	b, err := a.ReadBytes(ctx)
	if err != nil {
		return nil, l.s.wrap(kindOf(err), l.n, array, ks, err)
	}
	return b, nil
}

func (l *Level) shardOf(idx *arrayIndex, ks string) (shardRef, bool) {
	if idx.allDirect || idx.direct[ks] {
		return shardRef{}, false
	}
	r, ok := idx.shards[ks]
	return r, ok
}

func (l *Level) shardBytes(ctx context.Context, array, shard string) ([]byte, error) {
	v, err := l.cached(ctx, l.cacheKey("shard", shard), func(ctx context.Context) (any, int64, error) {
		a, err := zarr.OpenArray(ctx, l.s.st, shard, l.s.codecs)
		if err != nil {
			return nil, 0, l.s.wrap(kindOf(err), l.n, array, shard, err)
		}
		b, err := a.ReadBytes(ctx)
		if err != nil {
			return nil, 0, l.s.wrap(kindOf(err), l.n, array, shard, err)
		}
		return b, int64(len(b)) + 64, nil
	})
	if err != nil {
		return nil, err
	}
	return v.([]byte), nil
}

// hasKey reports whether key is one of the level's vertex chunks.
func (l *Level) hasKey(k Key) bool {
	_, ok := l.keySet[k.String()]
	return ok
}

// chunkVerts is one chunk's decoded vertices and fragment index.
type chunkVerts struct {
	data  []byte
	rows  int
	frags *fragindex.Index // nil when the chunk has no vertex_fragments blob
	// inCell: every row lies in the chunk's closed cell box; binIn: the
	// same per bin (bit f for fragment f, bin-prefiltered levels). Checked
	// once when the chunk is decoded, so a box that covers a cell takes
	// its rows without testing them, and a misfiled row (a corrupt store)
	// still gets tested.
	inCell bool
	binIn  []uint64
}

// verticesAt is vertices for l.keys[i]; a cached chunk costs a map lookup
// and nothing else.
func (l *Level) verticesAt(ctx context.Context, i int32) (*chunkVerts, error) {
	if v, ok := l.s.peek(l.vkeys[i]); ok {
		return v.(*chunkVerts), nil
	}
	return l.vertices(ctx, l.keys[i])
}

// vertices loads a chunk's vertex rows and fragment index.
func (l *Level) vertices(ctx context.Context, key Key) (*chunkVerts, error) {
	var buf [96]byte
	if i, ok := l.keySet[string(key.appendTo(buf[:0]))]; ok && !l.draco { // no allocation for the lookup
		if v, ok := l.s.peek(l.vkeys[i]); ok {
			return v.(*chunkVerts), nil
		}
	}
	if l.draco {
		return nil, l.s.errf(ErrUnsupported, l.n, "vertices", key.String(), "Draco-encoded vertices cannot be decoded")
	}
	ks := key.String()
	v, err := l.cached(ctx, l.cacheKey("verts", ks), func(ctx context.Context) (any, int64, error) {
		// The fragment index is fetched alongside the vertices: on an
		// object store each is two round trips (zarr.json, then c/0).
		type fetched struct {
			b   []byte
			err error
		}
		fc := make(chan fetched, 1)
		go func() {
			var f fetched
			defer func() { fc <- f }() // also after a panic: the load waits for it
			defer l.s.recoverInto(&f.err, "fragment index fetch")
			f.b, f.err = l.blob(ctx, "vertex_fragments", key)
		}()
		data, err := l.blob(ctx, "vertices", key)
		frag := <-fc // always waited for, so no read outlives the load
		if err != nil {
			return nil, 0, err
		}
		row := l.vdt.Size * l.s.dims
		if len(data)%row != 0 {
			return nil, 0, l.s.errf(ErrCorrupt, l.n, "vertices", ks, "%d bytes are not whole rows of %d × %s", len(data), l.s.dims, l.vdt.Name)
		}
		cv := &chunkVerts{data: data, rows: len(data) / row}
		fb, err := frag.b, frag.err
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return nil, 0, err
		default:
			fi, err := fragindex.Decode(fb, int64(cv.rows))
			if err != nil {
				return nil, 0, l.s.errf(ErrCorrupt, l.n, "vertex_fragments", ks, "%w", err)
			}
			cv.frags = fi
		}
		l.markContainment(key, cv)
		size := int64(64) + 8*int64(len(cv.binIn))
		if cv.frags != nil {
			size += cv.frags.SizeBytes()
		}
		return cv, size, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*chunkVerts), nil
}

// attribute loads a vertex attribute's rows for a chunk, aligned with the
// chunk's vertex rows. A missing blob means the attribute is absent there.
func (l *Level) attribute(ctx context.Context, a *attrMeta, key Key, rows int) (data []byte, channels int, err error) {
	b, err := l.blob(ctx, "vertex_attributes/"+a.Name, key)
	if err != nil {
		return nil, 0, err
	}
	size := a.dt.Size
	ch := a.Channels
	if rows == 0 {
		if len(b) != 0 {
			return nil, 0, l.s.errf(ErrCorrupt, l.n, "vertex_attributes/"+a.Name, key.String(), "%d bytes for 0 rows", len(b))
		}
		return b, ch, nil
	}
	if !a.explicitChannels {
		if len(b)%(size*rows) != 0 {
			return nil, 0, l.s.errf(ErrCorrupt, l.n, "vertex_attributes/"+a.Name, key.String(), "%d bytes are not whole rows for %d vertices of %s", len(b), rows, a.dt.Name)
		}
		ch = len(b) / (size * rows)
	}
	if len(b) != size*ch*rows {
		return nil, 0, l.s.errf(ErrCorrupt, l.n, "vertex_attributes/"+a.Name, key.String(), "%d bytes, want %d rows × %d × %s", len(b), rows, ch, a.dt.Name)
	}
	return b, ch, nil
}

// selectAttrs resolves a query's attribute names.
func (l *Level) selectAttrs(names []string) ([]*attrMeta, error) {
	if len(names) == 1 && names[0] == "*" {
		return l.vattrs, nil
	}
	out := make([]*attrMeta, 0, len(names))
	for _, n := range names {
		var found *attrMeta
		for _, a := range l.vattrs {
			if a.Name == n {
				found = a
			}
		}
		if found == nil {
			return nil, l.s.errf(ErrNotFound, l.n, "", "", "no vertex attribute %q at level %d", n, l.n)
		}
		out = append(out, found)
	}
	return out, nil
}
