package zvf

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"unsafe"

	"github.com/zvfserve/zvfserve/zvf/manifest"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/zarr"
)

// objectRow is the manifest row of object id: the id itself, or its row in
// object_index/object_ids (vlen_manifests_v2).
func (l *Level) objectRow(ctx context.Context, id int64) (int64, error) {
	if l.objects == nil {
		return 0, l.s.errf(ErrNotFound, l.n, "object_index", "", "level %d has no object index", l.n)
	}
	if !l.objects.byID {
		if id < 0 || id >= l.objects.num {
			return 0, l.s.errf(ErrNotFound, l.n, "object_index", "", "no object %d (level %d has %d)", id, l.n, l.objects.num)
		}
		return id, nil
	}
	ids, err := l.objectIDs(ctx)
	if err != nil {
		return 0, err
	}
	row, ok := ids.row(id)
	if !ok {
		return 0, l.s.errf(ErrNotFound, l.n, "object_index/object_ids", "", "no object %d at level %d", id, l.n)
	}
	return row, nil
}

// ObjectIDAt is the id of the object in manifest row row (0 ≤ row <
// ObjectCount): the row itself, or object_ids[row] where the index names
// objects by id (ZVF 0.9.2 vlen_manifests_v2). It lists a level's objects,
// whose ids need not be 0 … ObjectCount-1.
func (l *Level) ObjectIDAt(ctx context.Context, row int64) (int64, error) {
	if l.objects == nil || row < 0 || row >= l.objects.num {
		return 0, l.s.errf(ErrNotFound, l.n, "object_index", "", "no manifest row %d at level %d", row, l.n)
	}
	return l.objectAt(ctx, row)
}

// objectAt is the id of the object in manifest row row.
func (l *Level) objectAt(ctx context.Context, row int64) (int64, error) {
	if !l.objects.byID {
		return row, nil
	}
	ids, err := l.objectIDs(ctx)
	if err != nil {
		return 0, err
	}
	return ids.ids[row], nil
}

// manifestRow returns the raw manifest blob of manifest row id.
func (l *Level) manifestRow(ctx context.Context, id int64) ([]byte, error) {
	if l.objects.legacy {
		return l.legacyManifest(ctx, id)
	}
	arr, err := l.manifestArray(ctx)
	if err != nil {
		return nil, err
	}
	cs := arr.Meta().ChunkShape[0]
	c := id / cs
	elems, err := l.manifestChunk(ctx, arr, c)
	if err != nil {
		return nil, err
	}
	if id%cs >= int64(len(elems)) {
		return nil, l.manifestsShort(c, elems)
	}
	return elems[id%cs], nil
}

// manifestChunk returns the manifests of chunk c, through the cache (a
// missing chunk is the fill value's, as Zarr reads it).
func (l *Level) manifestChunk(ctx context.Context, arr *zarr.Array, c int64) ([][]byte, error) {
	v, err := l.cached(ctx, l.cacheKey("manifests", fmt.Sprint(c)), func(ctx context.Context) (any, int64, error) {
		ch, err := arr.ReadChunk(ctx, []int64{c})
		if err != nil {
			return nil, 0, l.s.wrap(kindOf(err), l.n, "object_index/manifests", fmt.Sprint(c), err)
		}
		var size int64 = 64
		for _, e := range ch.Elems {
			size += int64(len(e)) + 24
		}
		return ch.Elems, size, nil
	})
	if err != nil {
		return nil, err
	}
	return v.([][]byte), nil
}

func (l *Level) manifestsShort(c int64, elems [][]byte) error {
	return l.s.errf(ErrCorrupt, l.n, "object_index/manifests", fmt.Sprint(c), "chunk holds %d manifests", len(elems))
}

func (l *Level) manifestArray(ctx context.Context) (*zarr.Array, error) {
	v, err := l.cached(ctx, l.cacheKey("manifest-array"), func(ctx context.Context) (any, int64, error) {
		a, err := zarr.OpenArray(ctx, l.s.st, join(l.path, "object_index/manifests"), l.s.codecs)
		if err != nil {
			return nil, 0, l.lazyErr(err, "object_index/manifests")
		}
		m := a.Meta()
		if len(m.Shape) != 1 || !m.DataType.Variable() {
			return nil, 0, l.s.errf(ErrCorrupt, l.n, "object_index/manifests", "", "manifests array is %s", m)
		}
		if m.Shape[0] < l.objects.num {
			return nil, 0, l.s.errf(ErrCorrupt, l.n, "object_index/manifests", "", "holds %d manifests, num_objects is %d", m.Shape[0], l.objects.num)
		}
		return a, 1024, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*zarr.Array), nil
}

// objectIDs maps manifest rows to object ids and back (vlen_manifests_v2).
type objectIDs struct {
	ids    []int64 // row -> id
	sorted bool    // ids ascend: rows are found by binary search
	// order: the rows by ascending id when ids do not ascend, searched
	// the same way (8 bytes a row, where a map took several times that).
	order []int64
}

func (o *objectIDs) row(id int64) (int64, bool) {
	if o.sorted {
		i, ok := slices.BinarySearch(o.ids, id)
		return int64(i), ok
	}
	i, ok := slices.BinarySearchFunc(o.order, id, func(r, id int64) int { return cmp.Compare(o.ids[r], id) })
	if !ok {
		return 0, false
	}
	return o.order[i], true
}

// objectIDs reads object_index/object_ids: an integer array whose row r
// is the id of the object in manifest row r (ZVF 0.9.2 vlen_manifests_v2).
// Through the cache like every read: a failed or cancelled read is not
// kept, and the next request tries again.
func (l *Level) objectIDs(ctx context.Context) (*objectIDs, error) {
	const p = "object_index/object_ids"
	v, err := l.cached(ctx, l.cacheKey("object-ids"), func(ctx context.Context) (any, int64, error) {
		arr, err := zarr.OpenArray(ctx, l.s.st, join(l.path, p), l.s.codecs)
		if err != nil {
			return nil, 0, l.lazyErr(err, p)
		}
		m := arr.Meta()
		if len(m.Shape) != 1 || (m.DataType.Kind != zarr.KindInt && m.DataType.Kind != zarr.KindUint) || m.Shape[0] != l.objects.num {
			return nil, 0, l.s.errf(ErrCorrupt, l.n, p, "", "%s, where vlen_manifests_v2 needs %d integer object ids (num_objects)", m, l.objects.num)
		}
		// The ids are widened to int64 and ordered (16 bytes a row, what
		// the read holds of a narrower type more): bounded like a read
		// whole, and backed by stored chunks before anything is sized by
		// them — a chunk not stored reads as rows of the fill value, two
		// of which are one id twice.
		n := m.Shape[0]
		if limit := l.s.codecs.Limits().MaxReadBytes; n > limit/16 {
			return nil, 0, l.s.errf(ErrUnsupported, l.n, p, "", "%d object ids, more than the %d-byte read limit holds at 16 bytes an id", n, limit)
		}
		if n > 0 {
			cs := m.ChunkShape[0]
			last := (n - 1) / cs
			stored, err := l.storedChunks1D(ctx, arr, p, last)
			if err != nil {
				return nil, 0, err
			}
			next := 0
			for c := int64(0); c <= last; c++ {
				if next < len(stored) && stored[next] == c {
					next++
					continue
				}
				// A one-row chunk of the fill value is one id: read on.
				if rows := min(cs, n-c*cs); rows > 1 {
					return nil, 0, l.s.errf(ErrCorrupt, l.n, p, fmt.Sprint(c), "chunk %d is not stored: its %d rows would all be the fill value, one object id %d times", c, rows, rows)
				}
			}
		}
		c, err := arr.Read(ctx)
		if err != nil {
			return nil, 0, l.s.wrap(kindOf(err), l.n, p, "", err)
		}
		ids := &objectIDs{ids: make([]int64, m.Shape[0]), sorted: true}
		for i := range ids.ids {
			v := m.DataType.At(c.Data, i)
			id := v.I
			if v.Kind == zarr.KindUint {
				if v.U > math.MaxInt64 {
					return nil, 0, l.s.errf(ErrCorrupt, l.n, p, "", "row %d: object id %d does not fit int64", i, v.U)
				}
				id = int64(v.U)
			}
			ids.ids[i] = id
			ids.sorted = ids.sorted && (i == 0 || id > ids.ids[i-1])
		}
		size := 8 * int64(len(ids.ids))
		if !ids.sorted {
			ids.order = make([]int64, len(ids.ids))
			for r := range ids.order {
				ids.order[r] = int64(r)
			}
			slices.SortFunc(ids.order, func(a, b int64) int {
				return cmp.Or(cmp.Compare(ids.ids[a], ids.ids[b]), cmp.Compare(a, b))
			})
			for i := 1; i < len(ids.order); i++ {
				if a, b := ids.order[i-1], ids.order[i]; ids.ids[a] == ids.ids[b] {
					return nil, 0, l.s.errf(ErrCorrupt, l.n, p, "", "object id %d at rows %d and %d", ids.ids[a], a, b)
				}
			}
			size += 8 * int64(len(ids.order))
		}
		return ids, size, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*objectIDs), nil
}

func (l *Level) legacyManifest(ctx context.Context, id int64) ([]byte, error) {
	read := func(name string) ([]byte, error) {
		v, err := l.cached(ctx, l.cacheKey("legacy", name), func(ctx context.Context) (any, int64, error) {
			a, err := zarr.OpenArray(ctx, l.s.st, join(l.path, "object_index/"+name), l.s.codecs)
			if err != nil {
				return nil, 0, l.lazyErr(err, "object_index/"+name)
			}
			b, err := a.ReadBytes(ctx)
			if err != nil {
				return nil, 0, l.s.wrap(kindOf(err), l.n, "object_index/"+name, "", err)
			}
			return b, int64(len(b)), nil
		})
		if err != nil {
			return nil, err
		}
		return v.([]byte), nil
	}
	data, err := read("data")
	if err != nil {
		return nil, err
	}
	offs, err := read("offsets")
	if err != nil {
		return nil, err
	}
	if int64(len(offs)) < 8*l.objects.num {
		return nil, l.s.errf(ErrCorrupt, l.n, "object_index/offsets", "", "%d bytes for %d objects", len(offs), l.objects.num)
	}
	at := func(i int64) int64 { return int64(le64(offs[8*i:])) }
	start, end := at(id), int64(len(data))
	if id+1 < l.objects.num {
		end = at(id + 1)
	}
	if start < 0 || start > end || end > int64(len(data)) {
		return nil, l.s.errf(ErrCorrupt, l.n, "object_index/offsets", "", "object %d spans [%d, %d) of %d bytes", id, start, end, len(data))
	}
	return data[start:end], nil
}

// refs decodes object id's manifest into ordered (chunk, fragment) refs.
func (l *Level) refs(ctx context.Context, id int64) ([]manifest.Block, error) {
	row, err := l.objectRow(ctx, id)
	if err != nil {
		return nil, err
	}
	return l.refsRow(ctx, id, row)
}

// refsRow decodes manifest row row (object id's).
func (l *Level) refsRow(ctx context.Context, id, row int64) ([]manifest.Block, error) {
	b, err := l.manifestRow(ctx, row)
	if err != nil {
		return nil, err
	}
	return l.decodeManifest(id, b)
}

// decodeManifest decodes object id's manifest blob.
func (l *Level) decodeManifest(id int64, b []byte) ([]manifest.Block, error) {
	blocks, err := manifest.Decode(b, l.objects.ndim)
	if err != nil {
		return nil, l.s.errf(ErrCorrupt, l.n, "object_index/manifests", "", "object %d: %w", id, err)
	}
	return blocks, nil
}

// fragRows resolves fragment f of a chunk to its rows (appended to dst).
func (l *Level) fragRows(cv *chunkVerts, key Key, f int64, dst []int64) ([]int64, error) {
	if cv.frags == nil {
		if f != 0 {
			return nil, l.s.errf(ErrCorrupt, l.n, "vertex_fragments", key.String(), "fragment %d named but the chunk has no fragment index", f)
		}
		for r := 0; r < cv.rows; r++ {
			dst = append(dst, int64(r))
		}
		return dst, nil
	}
	if f < 0 || f >= int64(cv.frags.Len()) {
		return nil, l.s.errf(ErrCorrupt, l.n, "vertex_fragments", key.String(), "fragment %d named, chunk has %d", f, cv.frags.Len())
	}
	return cv.frags.AppendRows(dst, int(f)), nil
}

// fragCount is the number of rows fragment f of a chunk holds, checked
// as fragRows checks it.
func (l *Level) fragCount(cv *chunkVerts, key Key, f int64) (int64, error) {
	if cv.frags == nil {
		if f != 0 {
			return 0, l.s.errf(ErrCorrupt, l.n, "vertex_fragments", key.String(), "fragment %d named but the chunk has no fragment index", f)
		}
		return int64(cv.rows), nil
	}
	if f < 0 || f >= int64(cv.frags.Len()) {
		return 0, l.s.errf(ErrCorrupt, l.n, "vertex_fragments", key.String(), "fragment %d named, chunk has %d", f, cv.frags.Len())
	}
	return cv.frags.Count(int(f)), nil
}

// objectRows gathers an object's (chunk, row) pairs in manifest order,
// with the number of rows each fragment contributed.
func (l *Level) objectRows(ctx context.Context, id int64) ([]rowRef, []int64, error) {
	blocks, err := l.refs(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	// Count first. A manifest may name the same fragments again and
	// again (a few KB of zstd named 8.2 million rows), so the rows are
	// gathered only when they fit what one decoded chunk may hold: a
	// reference and a vertex row each.
	rowBytes := int64(unsafe.Sizeof(rowRef{})) + int64(l.vdt.Size*l.s.dims)
	maxRows := l.s.codecs.Limits().MaxChunkBytes / rowBytes
	var total, steps int64
	for _, b := range blocks {
		key := Key(b.Chunk)
		if !l.hasKey(key) {
			return nil, nil, l.unlisted(ctx, key, fmt.Sprintf("object %d's manifest", id),
				l.s.errf(ErrCorrupt, l.n, "object_index/manifests", key.String(), "object %d names chunk %s, which does not exist", id, key))
		}
		cv, err := l.vertices(ctx, key)
		if err != nil {
			return nil, nil, err
		}
		for j := int64(0); j < b.Len(); j++ {
			if steps++; steps%4096 == 0 {
				if err := ctx.Err(); err != nil {
					return nil, nil, err
				}
			}
			c, err := l.fragCount(cv, key, b.Fragment(j))
			if err != nil {
				return nil, nil, fmt.Errorf("object %d: %w", id, err)
			}
			if total += c; total > maxRows {
				return nil, nil, l.s.errf(ErrUnsupported, l.n, "object_index/manifests", "", "object %d has more than %d rows (%d bytes each to gather), more than the %d-byte limit of one decoded chunk",
					id, maxRows, rowBytes, l.s.codecs.Limits().MaxChunkBytes)
			}
		}
	}
	out := make([]rowRef, 0, total)
	var counts []int64
	var rows []int64
	for _, b := range blocks {
		key := Key(b.Chunk)
		cv, err := l.vertices(ctx, key)
		if err != nil {
			return nil, nil, err
		}
		for j := int64(0); j < b.Len(); j++ {
			rows, err = l.fragRows(cv, key, b.Fragment(j), rows[:0])
			if err != nil {
				return nil, nil, fmt.Errorf("object %d: %w", id, err)
			}
			counts = append(counts, int64(len(rows)))
			for _, r := range rows {
				out = append(out, rowRef{key: key, ks: key.String(), row: r, frag: b.Fragment(j)})
			}
		}
	}
	return out, counts, nil
}

type rowRef struct {
	key  Key
	ks   string
	row  int64
	frag int64
}

// Object returns one object: vertices in manifest order, the requested
// vertex attributes, connectivity and object attributes.
func (l *Level) Object(ctx context.Context, id int64, attrs []string) (*Object, error) {
	return l.ObjectWith(ctx, id, ObjectQuery{Attributes: attrs})
}

// ObjectQuery says what ObjectWith reads of an object besides its
// vertices, connectivity and object attributes.
type ObjectQuery struct {
	// Attributes: vertex attributes, nil for none, ["*"] for all.
	Attributes []string
	// LinkAttributes: link attributes whose values for each edge come in
	// the object's EdgeAttributes; nil for none, ["*"] for all.
	LinkAttributes []string
	// Wire: a line's edges in the binary format's form (see WireObject).
	Wire bool
}

// ObjectWith returns one object, with what q asks for.
func (l *Level) ObjectWith(ctx context.Context, id int64, q ObjectQuery) (*Object, error) {
	return l.object(ctx, id, q)
}

// WireObject is Object for the binary format's encoder: a line's edges
// come in the wire's form (Object.WireEdges, Edges nil), built as they
// go out instead of as an int64 list the encoder narrows. Other
// geometries' edges and faces come as Object's.
func (l *Level) WireObject(ctx context.Context, id int64, attrs []string) (*Object, error) {
	return l.object(ctx, id, ObjectQuery{Attributes: attrs, Wire: true})
}

// CheckObject is the error ObjectWith(id, q) fails with before it reads a
// vertex — no such attribute, no such object in the index —, nil when it
// would go on to read them: found from the level's metadata and the
// object's manifest, so that a caller may refuse the request (a failed
// precondition) before the object's chunks are read.
func (l *Level) CheckObject(ctx context.Context, id int64, q ObjectQuery) error {
	if _, err := l.selectAttrs(q.Attributes); err != nil {
		return err
	}
	if _, err := l.selectLinkAttrs(q.LinkAttributes); err != nil {
		return err
	}
	_, err := l.refs(ctx, id)
	return err
}

func (l *Level) object(ctx context.Context, id int64, q ObjectQuery) (*Object, error) {
	wire := q.Wire
	sel, err := l.selectAttrs(q.Attributes)
	if err != nil {
		return nil, err
	}
	linkSel, err := l.selectLinkAttrs(q.LinkAttributes)
	if err != nil {
		return nil, err
	}
	refs, counts, err := l.objectRows(ctx, id)
	if err != nil {
		return nil, err
	}
	o := &Object{ID: id, Level: l.n, Count: int64(len(refs)), FragmentCounts: counts}
	row := l.vdt.Size * l.s.dims
	o.Vertices = Column{Name: "vertices", DType: l.vdt.Name, typ: l.vdt, Channels: l.s.dims, Data: make([]byte, 0, len(refs)*row)}
	for _, r := range refs {
		cv, err := l.vertices(ctx, r.key)
		if err != nil {
			return nil, err
		}
		o.Vertices.Data = append(o.Vertices.Data, cv.data[int(r.row)*row:int(r.row+1)*row]...)
	}
	for _, a := range sel {
		col, err := l.gatherAttr(ctx, a, refs)
		if err != nil {
			return nil, err
		}
		o.Attributes = append(o.Attributes, col)
	}
	index := make(map[string]map[int64]int64)
	for i, r := range refs {
		m := index[r.ks]
		if m == nil {
			m = map[int64]int64{}
			index[r.ks] = m
		}
		if _, dup := m[r.row]; !dup {
			m[r.row] = int64(i)
		}
	}
	lookup := func(ks string, row int64) (int64, bool) {
		v, ok := index[ks][row]
		return v, ok
	}
	keys := make([]Key, 0, len(index))
	seen := map[string]bool{}
	for _, r := range refs {
		if !seen[r.ks] {
			seen[r.ks] = true
			keys = append(keys, r.key)
		}
	}
	switch l.geometry() {
	case "polyline", "streamline", "line":
		// One line through the rows: none when there are fewer than two
		// (no edges block, as before the wire form).
		if wire && o.Count > 1 && o.Count <= math.MaxUint32+1 {
			o.WireEdges = lineWireEdges(o.Count)
			break
		}
		for i := int64(1); i < o.Count; i++ {
			o.Edges = append(o.Edges, i-1, i)
		}
	default:
		rows := make(map[string]int, len(keys))
		for _, k := range keys {
			cv, err := l.vertices(ctx, k) // read by objectRows: cached
			if err != nil {
				return nil, err
			}
			rows[k.String()] = cv.rows
		}
		rowsOf := func(ks string) int {
			if n, ok := rows[ks]; ok {
				return n
			}
			return -1
		}
		c, err := l.connect(ctx, connScope{keys: keys, lookup: lookup, frags: refsByFragment(refs), rows: rowsOf, refs: len(linkSel) > 0})
		if err != nil {
			return nil, err
		}
		o.Edges, o.Faces, o.FaceWidth = c.edges, c.faces, c.faceWidth
		if len(linkSel) > 0 {
			if o.EdgeAttributes, err = l.edgeColumns(ctx, linkSel, c.src); err != nil {
				return nil, err
			}
		}
	}
	oa, err := l.objectAttributes(ctx, id)
	if err != nil {
		return nil, err
	}
	o.ObjectAttributes = oa
	return o, nil
}

// lineWireEdges is the wire form (little-endian uint32 pairs) of the
// edges (i-1, i) of a line through n rows, 1 < n <= 2^32: one 8-byte
// store an edge.
func lineWireEdges(n int64) []byte {
	w := make([]byte, 8*(n-1))
	for i := range n - 1 {
		binary.LittleEndian.PutUint64(w[8*i:], uint64(uint32(i))|uint64(uint32(i+1))<<32)
	}
	return w
}

func (l *Level) geometry() string {
	if l.s.geom == "" {
		return "point_cloud"
	}
	return l.s.geom
}

// refsByFragment lists, per chunk, the fragments and their rows in order
// (the skeleton rule needs fragment boundaries).
func refsByFragment(refs []rowRef) map[string][][]int64 {
	out := map[string][][]int64{}
	for i, r := range refs {
		fr := out[r.ks]
		if i == 0 || refs[i-1].ks != r.ks || refs[i-1].frag != r.frag {
			fr = append(fr, nil)
		}
		fr[len(fr)-1] = append(fr[len(fr)-1], r.row)
		out[r.ks] = fr
	}
	return out
}

func (l *Level) gatherAttr(ctx context.Context, a *attrMeta, refs []rowRef) (Column, error) {
	col := Column{Name: a.Name, DType: a.dt.Name, typ: a.dt, Channels: a.Channels, Categories: a.Categories, NullCode: a.nullCode}
	var prevKey string
	var data []byte
	var ch int
	for _, r := range refs {
		if r.ks != prevKey || data == nil {
			cv, err := l.vertices(ctx, r.key)
			if err != nil {
				return col, err
			}
			data, ch, err = l.attribute(ctx, a, r.key, cv.rows)
			if err != nil {
				return col, err
			}
			prevKey = r.ks
			if col.Data == nil {
				col.Channels = ch
				col.Data = make([]byte, 0, len(refs)*ch*a.dt.Size)
			} else if ch != col.Channels {
				return col, l.s.errf(ErrCorrupt, l.n, "vertex_attributes/"+a.Name, r.ks, "%d channels here, %d elsewhere", ch, col.Channels)
			}
		}
		w := ch * a.dt.Size
		col.Data = append(col.Data, data[int(r.row)*w:int(r.row+1)*w]...)
	}
	if col.Data == nil {
		col.Data = []byte{}
	}
	return col, nil
}

// objectAttributes returns one row of every object attribute for id
// (skipping those whose present_mask or fill value marks the object
// absent). Rows are manifest rows.
func (l *Level) objectAttributes(ctx context.Context, id int64) ([]Column, error) {
	var out []Column
	if len(l.oattrs) == 0 {
		return nil, nil
	}
	id, err := l.objectRow(ctx, id)
	if err != nil {
		return nil, err
	}
	for _, a := range l.oattrs {
		data, mask, err := l.objectAttrData(ctx, a)
		if err != nil {
			return nil, err
		}
		if id >= a.shape[0] {
			continue
		}
		if mask != nil && (id >= int64(len(mask)) || mask[id] == 0) {
			continue
		}
		w := int64(a.Channels * a.dt.Size)
		out = append(out, Column{Name: a.Name, DType: a.dt.Name, typ: a.dt, Channels: a.Channels, Data: data[id*w : (id+1)*w]})
	}
	return out, nil
}

func (l *Level) objectAttrData(ctx context.Context, a *objAttrMeta) (data, mask []byte, err error) {
	type pair struct{ data, mask []byte }
	v, err := l.cached(ctx, l.cacheKey("oattr", a.Name), func(ctx context.Context) (any, int64, error) {
		if a.plain {
			d, m, err := l.plainObjectAttr(ctx, a)
			return pair{d, m}, int64(len(d) + len(m)), err
		}
		read := func(name string) ([]byte, error) {
			arr, err := zarr.OpenArray(ctx, l.s.st, join(l.path, "object_attributes/"+a.Name+"/"+name), l.s.codecs)
			if err != nil {
				return nil, l.lazyErr(err, "object_attributes/"+a.Name+"/"+name)
			}
			m := arr.Meta()
			if len(m.Shape) == 1 && m.DataType.Size == 1 {
				return arr.ReadBytes(ctx)
			}
			c, err := arr.Read(ctx)
			if err != nil {
				return nil, err
			}
			return c.Data, nil
		}
		d, err := read("data")
		if err != nil {
			return nil, 0, err
		}
		// Rows are compared by division: shape[0] comes from metadata,
		// and shape[0] × row size can overflow.
		w := int64(a.Channels * a.dt.Size)
		if int64(len(d))%w != 0 || int64(len(d))/w != a.shape[0] {
			return nil, 0, l.s.errf(ErrCorrupt, l.n, "object_attributes/"+a.Name, "", "%d bytes are not shape %v of %s (%d rows of %d bytes)", len(d), a.shape, a.dt.Name, a.shape[0], w)
		}
		var m []byte
		if a.presentMask {
			m, err = read("present_mask")
			if err != nil && !errors.Is(err, ErrNotFound) {
				return nil, 0, err
			}
		}
		return pair{d, m}, int64(len(d) + len(m)), nil
	})
	if err != nil {
		return nil, nil, err
	}
	p := v.(pair)
	return p.data, p.mask, nil
}

// plainObjectAttr reads a ZVF 0.9 object attribute: the array
// object_attributes/<name>, rows whose every value is the fill value (NaN
// for floats) absent. mask holds 1 for each present row.
func (l *Level) plainObjectAttr(ctx context.Context, a *objAttrMeta) (data, mask []byte, err error) {
	p := "object_attributes/" + a.Name
	arr, err := zarr.OpenArray(ctx, l.s.st, join(l.path, p), l.s.codecs)
	if err != nil {
		return nil, nil, l.lazyErr(err, p)
	}
	m := arr.Meta()
	if m.DataType != a.dt || m.DataType.Variable() {
		return nil, nil, l.s.errf(ErrCorrupt, l.n, p, "", "data_type %s, the attributes say %s", m.DataType.Name, a.dt.Name)
	}
	c, err := arr.Read(ctx)
	if err != nil {
		return nil, nil, l.s.wrap(kindOf(err), l.n, p, "", err)
	}
	w := int64(a.Channels * a.dt.Size)
	if int64(len(c.Data))%w != 0 || int64(len(c.Data))/w != a.shape[0] {
		return nil, nil, l.s.errf(ErrCorrupt, l.n, p, "", "%d bytes are not shape %v of %s (%d rows of %d bytes)", len(c.Data), a.shape, a.dt.Name, a.shape[0], w)
	}
	fill := a.dt.At(m.Fill, 0)
	mask = make([]byte, a.shape[0])
	for r := range mask {
		for ch := 0; ch < a.Channels; ch++ {
			if v := a.dt.At(c.Data, r*a.Channels+ch); !sameNumber(v, fill) {
				mask[r] = 1
				break
			}
		}
	}
	return c.Data, mask, nil
}

// sameNumber: a == b, NaN equal to NaN (a float fill value of NaN marks
// absent rows).
func sameNumber(a, b Number) bool {
	if a.Kind == KindFloat && b.Kind == KindFloat && math.IsNaN(a.F) && math.IsNaN(b.F) {
		return true
	}
	return a == b
}

// Manifest returns object id's manifest with every fragment resolved.
func (l *Level) Manifest(ctx context.Context, id int64) (*Manifest, error) {
	blocks, err := l.refs(ctx, id)
	if err != nil {
		return nil, err
	}
	return l.manifestOf(ctx, id, blocks)
}

// manifestOf resolves object id's decoded manifest blocks against the
// chunks and fragments they name.
func (l *Level) manifestOf(ctx context.Context, id int64, blocks []manifest.Block) (*Manifest, error) {
	m := &Manifest{ID: id, Level: l.n, Blocks: make([]ManifestBlock, 0, len(blocks))}
	for _, b := range blocks {
		key := Key(b.Chunk)
		mb := ManifestBlock{Chunk: key, Mode: int(b.Mode), Fragments: []FragmentRows{}}
		if !l.hasKey(key) {
			return nil, l.unlisted(ctx, key, fmt.Sprintf("object %d's manifest", id),
				l.s.errf(ErrCorrupt, l.n, "object_index/manifests", key.String(), "object %d names chunk %s, which does not exist", id, key))
		}
		cv, err := l.vertices(ctx, key)
		if err != nil {
			return nil, err
		}
		for j := int64(0); j < b.Len(); j++ {
			f := b.Fragment(j)
			fr := FragmentRows{Fragment: f}
			if cv.frags != nil && f >= 0 && f < int64(cv.frags.Len()) {
				if s, c, ok := cv.frags.Range(int(f)); ok {
					fr.Range, fr.Count = []int64{s, c}, c
				} else {
					fr.Rows = cv.frags.Indices(int(f))
					fr.Count = int64(len(fr.Rows))
				}
			} else if _, err := l.fragRows(cv, key, f, nil); err != nil {
				return nil, err
			} else {
				fr.Range, fr.Count = []int64{0, int64(cv.rows)}, int64(cv.rows)
			}
			mb.Fragments = append(mb.Fragments, fr)
		}
		m.Blocks = append(m.Blocks, mb)
	}
	return m, nil
}

// HasObject reports whether object id has a non-empty manifest here.
func (l *Level) HasObject(ctx context.Context, id int64) (bool, error) {
	if l.objects == nil {
		return false, nil
	}
	blocks, err := l.refs(ctx, id)
	if errors.Is(err, ErrNotFound) && !errors.Is(err, errMissing) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, b := range blocks {
		if b.Len() > 0 {
			return true, nil
		}
	}
	return false, nil
}

// ObjectLevels lists the levels whose manifest for id is non-empty.
func (s *Store) ObjectLevels(ctx context.Context, id int64) ([]int, error) {
	var out []int
	any := false
	for _, l := range s.levels {
		if l.objects != nil {
			any = true
		}
		ok, err := l.HasObject(ctx, id)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, l.n)
		}
	}
	if !any {
		return nil, s.errf(ErrNotFound, -1, "object_index", "", "store has no object index")
	}
	if len(out) == 0 {
		return nil, s.errf(ErrNotFound, -1, "object_index", "", "no level holds object %d", id)
	}
	return out, nil
}

// eachManifest calls visit with every manifest row's object id and blocks,
// in row order, and again(row, n, blocks) for a run of n rows from row
// that hold the same blob as a row visited before (the array's fill
// value), whose blocks those were: their objects name the same fragments
// later, which changes nothing but counts. Its work follows what is stored,
// not num_objects: the chunks the manifests array's folder lists, and
// one read where each run of missing chunks begins (its fill value, and
// on a store read since a moment, a check that the run was missing then
// too: storage.Since dates the absence, as for every chunk before). A
// store declaring 2^40 objects and storing a few manifests no longer makes
// every request loop over the declared rows.
//
// A row that does not read (its id, its blob) ends the walk with its
// error, unless skip is given: then skip(row, err) is called and the walk
// goes on past that row (past the rest of its chunk when the chunk does
// not read), so that a validator reports every broken row.
func (l *Level) eachManifest(ctx context.Context, visit func(id int64, blocks []manifest.Block) error, again func(row, n int64, blocks []manifest.Block) error,
	skip func(row int64, err error) error) error {
	failed := func(row int64, err error) error {
		if skip == nil {
			return err
		}
		return skip(row, err)
	}
	num := l.objects.num
	if l.objects.legacy {
		// Offsets and data are read whole, bounded like any array read
		// whole, and num_objects rows must fit the offsets read.
		for row := int64(0); row < num; row++ {
			if row%1024 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			id, err := l.objectAt(ctx, row)
			if err != nil {
				if err := failed(row, err); err != nil {
					return err
				}
				continue
			}
			blocks, err := l.refsRow(ctx, id, row)
			if err != nil {
				if err := failed(row, err); err != nil {
					return err
				}
				continue
			}
			if err := visit(id, blocks); err != nil {
				return err
			}
		}
		return nil
	}
	if num <= 0 {
		return nil
	}
	arr, err := l.manifestArray(ctx)
	if err != nil {
		return err
	}
	cs := arr.Meta().ChunkShape[0]
	last := (num - 1) / cs // the last chunk holding a row
	stored, err := l.storedManifestChunks(ctx, arr, last)
	if err != nil {
		return err
	}
	fill := arr.Meta().Fill
	var fillBlocks []manifest.Block
	fillSeen := false
	chunk := func(c int64) error {
		elems, err := l.manifestChunk(ctx, arr, c)
		if err != nil {
			return failed(c*cs, err)
		}
		lo, hi := c*cs, num
		if c < last {
			hi = lo + cs
		}
		for row := lo; row < hi; row++ {
			if (row-lo)%1024 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			if row-lo >= int64(len(elems)) {
				return failed(row, l.manifestsShort(c, elems))
			}
			e := elems[row-lo]
			isFill := bytes.Equal(e, fill)
			if isFill && fillSeen {
				end := row + 1
				for end < hi && end-lo < int64(len(elems)) && bytes.Equal(elems[end-lo], fill) {
					end++
				}
				if err := again(row, end-row, fillBlocks); err != nil {
					return err
				}
				row = end - 1
				continue
			}
			id, err := l.objectAt(ctx, row)
			if err != nil {
				if err := failed(row, err); err != nil {
					return err
				}
				continue
			}
			blocks, err := l.decodeManifest(id, e)
			if err != nil {
				if err := failed(row, err); err != nil {
					return err
				}
				continue
			}
			if err := visit(id, blocks); err != nil {
				return err
			}
			if isFill {
				fillSeen, fillBlocks = true, blocks
			}
		}
		return nil
	}
	// missing handles chunks [a, b), none of them listed.
	missing := func(a, b int64) error {
		if err := chunk(a); err != nil {
			return err
		}
		if a+1 == b {
			return nil
		}
		if !fillSeen {
			return failed(a*cs, l.s.errf(ErrUnavailable, l.n, "object_index/manifests", fmt.Sprint(a), "chunk %d holds manifests, but its folder's listing did not name it: the store changed while it was read", a))
		}
		from, to := (a+1)*cs, num
		if b <= last {
			to = b * cs
		}
		return again(from, to-from, fillBlocks)
	}
	next := int64(0)
	for _, c := range stored {
		if next < c {
			if err := missing(next, c); err != nil {
				return err
			}
		}
		if err := chunk(c); err != nil {
			return err
		}
		next = c + 1
	}
	if next <= last {
		return missing(next, last+1)
	}
	return nil
}

// storedManifestChunks lists the manifests array's stored chunks up to
// last, ascending.
func (l *Level) storedManifestChunks(ctx context.Context, arr *zarr.Array, last int64) ([]int64, error) {
	return l.storedChunks1D(ctx, arr, "object_index/manifests", last)
}

// storedChunks1D lists the stored chunks of family's 1-D array up to last,
// ascending. A 1-D array's chunk keys share one folder, so one listing
// finds them (a folder that is not there holds none).
func (l *Level) storedChunks1D(ctx context.Context, arr *zarr.Array, family string, last int64) ([]int64, error) {
	k0 := arr.ChunkKey([]int64{0})
	dir := k0[:strings.LastIndexByte(k0, '/')+1]
	lst, err := l.s.st.List(ctx, dir)
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return nil, l.s.wrap(kindOf(err), l.n, family, "", err)
	}
	base := arr.Path() + "/"
	var out []int64
	for _, k := range lst.Keys {
		if !strings.HasPrefix(k, base) {
			continue
		}
		if c, ok := parseChunkKey(arr.Meta().KeyEncoding, k[len(base):], 1); ok && c[0] <= last {
			out = append(out, c[0])
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
