package zvf

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/zvfserve/zvfserve/fragindex"
)

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

// blob returns the bytes of family's cell at key, through the cache (do
// not modify: they may be shared). A missing cell returns an error
// matching ErrNotFound.
func (l *Level) blob(ctx context.Context, family string, key Key) ([]byte, error) {
	ks := key.String()
	v, err := l.cached(ctx, l.cacheKey("blob", family, ks), func(ctx context.Context) (any, int64, error) {
		b, err := l.lay.cell(ctx, family, key, ks)
		return b, int64(len(b)) + 64, err
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
	frags *fragindex.Index // nil when the chunk has no vertex_fragments blob, or bins says where its bins are
	// bins: on a bin-prefiltered level, where each bin's rows start
	// (bin f holds rows [bins[f], bins[f+1])), found from the rows'
	// own coordinates, each row checked to lie in its bin's closed cell
	// (see deriveBins); nil when the fragment index says it instead.
	bins []int32
	// inCell: every row lies in the chunk's closed cell box; binIn: the
	// same per bin (bit f for fragment f, bin-prefiltered levels). Checked
	// once when the chunk is decoded, so a box that covers a cell takes
	// its rows without testing them, and a misfiled row (a corrupt store)
	// still gets tested.
	inCell bool
	binIn  []uint64
	// faces says, once a box has asked, whether no row lies on a face of
	// its bin's cell (see faceFree).
	faces atomic.Int32
	// prep is what bboxes of this chunk share (see chunkPrep); nil
	// until the first needs it.
	prep atomic.Pointer[prepSlot]
	// text is where the value ChunkRows.Prepared keeps for this chunk
	// was last found in the cache, attrText those of PreparedAttribute;
	// asked, that one was asked for.
	text     atomic.Pointer[preparedRef]
	attrText atomic.Pointer[[]preparedRef]
	asked    atomic.Bool
}

// peekVerts is chunk l.keys[i]'s entry under l.vkeys[i] when cached,
// found through the Ref kept from the last time it was (a pointer load,
// where the key's lookup hashes and compares it: on a warm request, one
// per candidate chunk).
func (l *Level) peekVerts(i int32) (any, bool) {
	hits := 0
	v, ok := l.peekVertsTally(i, &hits)
	l.s.countHits(hits)
	return v, ok
}

// peekVertsTally is peekVerts that leaves a hit through a Ref for the
// caller to count, in *hits (Store.countHits): a coarse level's answer
// finds hundreds of small chunks, and one counter write per chunk was a
// tenth of its cost.
func (l *Level) peekVertsTally(i int32, hits *int) (any, bool) {
	rc := l.s.refs
	if rc == nil {
		return l.s.peek(l.vkeys[i])
	}
	if v, ok := rc.DerefUncounted(l.vrefs[i].Load()); ok {
		*hits++
		return v, true
	}
	return l.peekVertsKey(i)
}

// peekVertsKey finds chunk l.keys[i] by its key, keeping its Ref.
func (l *Level) peekVertsKey(i int32) (any, bool) {
	rc := l.s.refs
	v, r, ok := rc.PeekRef(l.vkeys[i])
	if ok {
		l.vrefs[i].Store(r)
	}
	return v, ok
}

// verticesAt is the chunk l.keys[i] as box matching reads it; a cached
// chunk costs a map lookup and nothing else. On a bin-prefiltered level
// the fragment index is read only for a chunk whose bins its rows do not
// tell (see deriveBins): matching needs nothing else of it, and it would
// be a second array (two more files) read for every chunk.
func (l *Level) verticesAt(ctx context.Context, i int32) (*chunkVerts, error) {
	if v, ok := l.peekVerts(int32(i)); ok {
		return v.(*chunkVerts), nil
	}
	if !l.binPrefilter || l.draco {
		return l.vertices(ctx, l.keys[i])
	}
	key := l.keys[i]
	ks := key.String()
	v, err := l.cached(ctx, l.vkeys[i], func(ctx context.Context) (any, int64, error) {
		return l.loadVertices(ctx, key, ks, true)
	})
	if err != nil {
		return nil, err
	}
	return v.(*chunkVerts), nil
}

// vertices loads a chunk's vertex rows and fragment index.
func (l *Level) vertices(ctx context.Context, key Key) (*chunkVerts, error) {
	var buf [96]byte
	if i, ok := l.keySet[string(key.appendTo(buf[:0]))]; ok && !l.draco && !l.binPrefilter { // no allocation for the lookup
		if v, ok := l.peekVerts(int32(i)); ok {
			return v.(*chunkVerts), nil
		}
	}
	if l.draco {
		return nil, l.s.errf(ErrUnsupported, l.n, "vertices", key.String(), "Draco-encoded vertices cannot be decoded")
	}
	ks := key.String()
	v, err := l.cached(ctx, l.cacheKey("verts", ks), func(ctx context.Context) (any, int64, error) {
		return l.loadVertices(ctx, key, ks, false)
	})
	if err != nil {
		return nil, err
	}
	return v.(*chunkVerts), nil
}

// loadVertices reads and decodes a chunk's vertices and its fragment
// index, for the cache. With binned, the rows' bins are first found from
// their coordinates, and the fragment index is read only when they
// cannot be; the vertices are then read straight from the layout and
// held by this entry alone (box matching is what reads a chunk of such a
// level), not cached apart as well.
func (l *Level) loadVertices(ctx context.Context, key Key, ks string, binned bool) (v any, size int64, err error) {
	defer func() {
		if err == nil {
			l.noteSeen(ks, v.(*chunkVerts))
			// The chunk is not cached when the check fails: the next
			// answer that needs it checks again.
			err = l.checkListing(ctx)
		}
	}()
	if binned {
		data, err := l.lay.cell(ctx, "vertices", key, ks)
		if err != nil {
			return nil, 0, err
		}
		cv, err := l.vertexRows(data, ks)
		if err != nil {
			return nil, 0, err
		}
		held := int64(len(data)) + 64
		if l.deriveBins(key, cv) {
			return cv, held + 4*int64(len(cv.bins)), nil
		}
		fb, err := l.blob(ctx, "vertex_fragments", key)
		size, err := l.indexed(key, ks, cv, fb, err)
		return cv, held + size, err
	}
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
	cv, err := l.vertexRows(data, ks)
	if err != nil {
		return nil, 0, err
	}
	size, err = l.indexed(key, ks, cv, frag.b, frag.err)
	return cv, size, err
}

// indexed gives cv the fragment index read as fb (or failed with err; a
// chunk without one has none) and its containment; it returns what that
// adds to cv's size.
func (l *Level) indexed(key Key, ks string, cv *chunkVerts, fb []byte, err error) (int64, error) {
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return 0, err
	default:
		fi, err := fragindex.Decode(fb, int64(cv.rows))
		if err != nil {
			return 0, l.s.errf(ErrCorrupt, l.n, "vertex_fragments", ks, "%w", err)
		}
		cv.frags = fi
	}
	l.markContainment(key, cv)
	size := 8*int64(len(cv.binIn)) + prepBytes(cv, l.objects != nil, l.lines())
	if cv.frags != nil {
		size += cv.frags.SizeBytes()
	}
	return size, nil
}

// vertexRows checks a vertices blob holds whole rows.
func (l *Level) vertexRows(data []byte, ks string) (*chunkVerts, error) {
	row := l.vdt.Size * l.s.dims
	if len(data)%row != 0 {
		return nil, l.s.errf(ErrCorrupt, l.n, "vertices", ks, "%d bytes are not whole rows of %d × %s", len(data), l.s.dims, l.vdt.Name)
	}
	return &chunkVerts{data: data, rows: len(data) / row}, nil
}

// attribute loads a vertex attribute's rows for a chunk, aligned with the
// chunk's vertex rows. A missing blob means the attribute is absent there.
func (l *Level) attribute(ctx context.Context, a *attrMeta, key Key, rows int) (data []byte, channels int, err error) {
	b, err := l.blob(ctx, "vertex_attributes/"+a.Name, key)
	if err != nil {
		return nil, 0, err
	}
	return l.attrRows(a, key, rows, b)
}

// attrRows checks an attribute's blob against the chunk's rows and
// returns its channels per row.
func (l *Level) attrRows(a *attrMeta, key Key, rows int, b []byte) (data []byte, channels int, err error) {
	size := a.dt.Size
	ch := a.Channels
	if rows == 0 {
		if len(b) != 0 {
			return nil, 0, l.s.errf(ErrCorrupt, l.n, "vertex_attributes/"+a.Name, key.String(), "%d bytes for 0 rows", len(b))
		}
		return b, ch, nil
	}
	if !a.channelsKnown {
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

// levelHas says which vertex attributes level n has, for a refusal of
// one it lacks.
func levelHas(n int, names []string) string {
	if len(names) == 0 {
		return "level " + strconv.Itoa(n) + " has none"
	}
	return "level " + strconv.Itoa(n) + " has " + strings.Join(names, ", ")
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
			names := make([]string, len(l.vattrs))
			for i, a := range l.vattrs {
				names[i] = a.Name
			}
			return nil, l.s.errf(ErrNotFound, l.n, "", "", "no vertex attribute %q at level %d; %s", n, l.n, levelHas(l.n, names))
		}
		out = append(out, found)
	}
	return out, nil
}
