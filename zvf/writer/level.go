package writer

import (
	"context"
	"encoding/binary"
	"math"
	"strconv"

	"github.com/zvfserve/zvfserve/vlen"
	"github.com/zvfserve/zvfserve/zvf/ragged"
)

// chunkData is one chunk of a level: which source rows it holds, in blob
// row order, and how those rows split into range fragments.
type chunkData struct {
	c     coords
	rows  []uint32 // indices into level.pos rows (and attribute rows)
	frags []int64  // row count per fragment; they tile rows in order
	// links are intra-chunk links (links/0), linkWidth chunk-local rows
	// each; linkSrc[i] is the caller's link index (for link attributes).
	links   []int64
	linkSrc []uint32
}

// level is everything the writer emits for one resolution level.
type level struct {
	index  int
	d      int
	pos    []float32 // d values per row
	chunks []chunkData

	// manifests[oid] lists (chunk index, fragment) blocks; nil manifests
	// (hasObjects false) means the level has no object index.
	hasObjects bool
	manifests  [][]fragRef

	vattrs     []Attribute // rows aligned with pos rows
	channelTag bool        // write channel_names for multi-channel vattrs

	linkWidth int // 0: no links/0
	lattrs    []Attribute

	cclGroup bool    // create cross_chunk_links/0 even without records
	ccl      []int64 // flat records: cclWidth * (d+1) values each
	cclWidth int

	oattrs     []Attribute
	oattrsMask []byte // present_mask for oattrs (coarse levels)
	groups     [][]int64
	gattrs     []Attribute

	meta obj // zarr_vectors_level

	codec *blobCodec // codec of the level's per-chunk arrays
	style nodeStyle
	// aux* is what object attributes and groups use (write_points writes
	// them outside its batch: zstd + pretty).
	auxCodec     *blobCodec
	auxStyle     nodeStyle
	auxUnbatched bool
}

type fragRef struct {
	chunk int32
	frag  int32
}

func (l *level) vertexCount() int {
	n := 0
	for i := range l.chunks {
		n += len(l.chunks[i].rows)
	}
	return n
}

func deltaSeg(delta int) string {
	if delta > 0 {
		return "+" + strconv.Itoa(delta)
	}
	return strconv.Itoa(delta)
}

// writeLevel schedules every blob of the level and records its groups.
func (s *storeWriter) writeLevel(l *level) {
	lp := strconv.Itoa(l.index)
	s.group(lp, stylePretty, obj{{"zarr_vectors_level", l.meta}})
	s.group(lp+"/vertices", l.style, obj{{"zv_array", "vertices"}, {"dtype", "float32"}, {"encoding", "raw"}})
	s.group(lp+"/vertex_fragments", l.style, obj{{"zv_array", "vertex_fragments"}, {"encoding", "fragment_index_v1"}})
	for i := range l.vattrs {
		a := &l.vattrs[i]
		m := obj{{"zv_array", "attribute"}, {"name", a.Name}, {"dtype", a.DType}}
		if l.channelTag && a.Channels > 1 {
			names := make([]string, a.Channels)
			for c := range names {
				names[c] = "ch" + strconv.Itoa(c)
			}
			m = append(m, kv{"channel_names", names})
		}
		if a.Categories != nil {
			m = append(m, kv{"encoding", "dictionary"}, kv{"categories", a.Categories}, kv{"ordered", false})
		}
		s.group(lp+"/vertex_attributes/"+a.Name, l.style, m)
	}
	if l.linkWidth > 0 {
		s.group(lp+"/links/0", l.style, obj{{"zv_array", "links"}, {"dtype", "int64"}, {"link_width", l.linkWidth}, {"level_delta", 0}})
		// The reference leaves link_fragments' attributes empty (§3.5).
		s.group(lp+"/link_fragments", stylePretty, obj{})
		for i := range l.lattrs {
			a := &l.lattrs[i]
			s.group(lp+"/link_attributes/"+a.Name+"/0", l.style,
				obj{{"zv_array", "link_attribute"}, {"name", a.Name}, {"dtype", a.DType}, {"level_delta", 0}})
		}
	}
	for ci := range l.chunks {
		c := &l.chunks[ci]
		s.run(func(ctx context.Context) error { return s.writeChunk(ctx, l, lp, c) })
	}
	if l.cclGroup || len(l.ccl) > 0 {
		s.writeCCL(l.codec, l.style, lp, 0, l.cclWidth, l.d, l.ccl)
	}
	if l.hasObjects {
		s.writeObjectIndex(lp, l, l.style)
	}
	for i := range l.oattrs {
		s.writeDense(lp+"/object_attributes/"+l.oattrs[i].Name, &l.oattrs[i], l.oattrsMask, l.auxCodec, l.auxStyle,
			"object_attribute")
	}
	if len(l.groups) > 0 {
		s.writeGroups(lp, l)
	}
	for i := range l.gattrs {
		s.writeDense(lp+"/group_attributes/"+l.gattrs[i].Name, &l.gattrs[i], nil, l.auxCodec, l.auxStyle,
			"groupings_attribute")
	}
}

// writeChunk writes vertices, fragments, attributes and links of a chunk.
func (s *storeWriter) writeChunk(ctx context.Context, l *level, lp string, c *chunkData) error {
	key := c.c.key(l.d)
	d := l.d
	err := s.rawBlob(ctx, l.codec, lp+"/vertices", key, 4*d*len(c.rows), func(b []byte) {
		o := 0
		for _, r := range c.rows {
			for _, v := range l.pos[int(r)*d : int(r)*d+d] {
				binary.LittleEndian.PutUint32(b[o:], math.Float32bits(v))
				o += 4
			}
		}
	})
	if err != nil {
		return err
	}
	if err := s.fragmentBlob(ctx, l.codec, lp+"/vertex_fragments", key, c.frags); err != nil {
		return err
	}
	for i := range l.vattrs {
		if err := s.attributeBlob(ctx, l.codec, lp+"/vertex_attributes/"+l.vattrs[i].Name, key, &l.vattrs[i], c.rows); err != nil {
			return err
		}
	}
	if l.linkWidth == 0 || c.links == nil {
		return nil
	}
	links := appendInt64s(make([]byte, 0, 8*len(c.links)), c.links)
	if err := s.blob(ctx, l.codec, lp+"/links/0", key, links); err != nil {
		return err
	}
	if err := s.fragmentBlob(ctx, l.codec, lp+"/link_fragments", key, []int64{int64(len(c.links) / l.linkWidth)}); err != nil {
		return err
	}
	for i := range l.lattrs {
		if err := s.attributeBlob(ctx, l.codec, lp+"/link_attributes/"+l.lattrs[i].Name+"/0", key, &l.lattrs[i], c.linkSrc); err != nil {
			return err
		}
	}
	return nil
}

// fragmentBlob writes a chunk's fragment ranges (one per count, in order).
func (s *storeWriter) fragmentBlob(ctx context.Context, codec *blobCodec, array, key string, counts []int64) error {
	b, err := rangeFragments(counts)
	if err != nil {
		return &WriteError{Key: s.prefix + array + "/" + key, Err: err}
	}
	return s.blob(ctx, codec, array, key, b)
}

// attributeBlob writes the rows of a (vertex or link) attribute that a
// chunk holds, in the chunk's order.
func (s *storeWriter) attributeBlob(ctx context.Context, codec *blobCodec, array, key string, a *Attribute, rows []uint32) error {
	rs := a.rowSize()
	return s.rawBlob(ctx, codec, array, key, rs*len(rows), func(b []byte) {
		for j, r := range rows {
			copy(b[j*rs:], a.Data[int(r)*rs:int(r)*rs+rs])
		}
	})
}

// writeCCL writes cross_chunk_links/<delta>: the group and, when there are
// records, its data blob.
func (s *storeWriter) writeCCL(codec *blobCodec, style nodeStyle, lp string, delta, width, d int, flat []int64) {
	path := lp + "/cross_chunk_links/" + deltaSeg(delta)
	m := obj{{"zv_array", "cross_chunk_links"}, {"level_delta", delta}, {"link_width", width}}
	if len(flat) > 0 {
		m = append(m, kv{"num_links", len(flat) / (width * (d + 1))}, kv{"sid_ndim", d})
		s.run(func(ctx context.Context) error {
			return s.blob(ctx, codec, path, "data", appendInt64s(make([]byte, 0, 8*len(flat)), flat))
		})
	}
	s.group(path, style, m)
}

// manifestBucket is how many objects share one Zarr chunk of
// object_index/manifests (the reference's OBJECT_INDEX_MANIFEST_BUCKET).
const manifestBucket = 16384

// writeObjectIndex writes object_index/ and its vlen-bytes manifests array.
func (s *storeWriter) writeObjectIndex(lp string, l *level, style nodeStyle) {
	n := len(l.manifests)
	s.group(lp+"/object_index", style, obj{{"zv_array", "object_index"}, {"num_objects", n}, {"sid_ndim", l.d},
		{"layout", "vlen_manifests_v1"}})
	if n == 0 {
		return
	}
	cs := min(manifestBucket, n)
	base := lp + "/object_index/manifests"
	meta := prettyDumps(obj{
		{"shape", []int64{int64(n)}},
		{"data_type", "variable_length_bytes"},
		{"chunk_grid", obj{{"name", "regular"}, {"configuration", obj{{"chunk_shape", []int64{int64(cs)}}}}}},
		{"chunk_key_encoding", obj{{"name", "default"}, {"configuration", obj{{"separator", "/"}}}}},
		{"fill_value", ""},
		{"codecs", []any{obj{{"name", "vlen-bytes"}, {"configuration", obj{}}}, s.zstd.codecs[1]}},
		{"attributes", obj{}},
		{"zarr_format", 3},
		{"node_type", "array"},
		{"storage_transformers", []any{}},
	})
	s.run(func(ctx context.Context) error { return s.put(ctx, base+"/zarr.json", []byte(meta)) })
	for first := 0; first < n; first += cs {
		s.run(func(ctx context.Context) error {
			// Edge chunks are padded with empty elements to the full
			// chunk length, as Zarr stores regular chunks.
			items := make([][]byte, cs)
			for i := range cs {
				if first+i < n {
					blob, err := l.manifestBlob(l.manifests[first+i])
					if err != nil {
						return &WriteError{Key: s.prefix + base, Err: err}
					}
					items[i] = blob
				}
			}
			raw, err := vlen.VlenBytes{}.Encode(items)
			if err != nil {
				return &WriteError{Key: s.prefix + base, Err: err}
			}
			enc, err := s.zstd.encode(raw)
			if err != nil {
				return &WriteError{Key: s.prefix + base, Err: err}
			}
			return s.put(ctx, base+"/c/"+strconv.Itoa(first/cs), enc)
		})
	}
}

func (l *level) manifestBlob(refs []fragRef) ([]byte, error) {
	blocks := make([]blockRef, len(refs))
	for i, r := range refs {
		blocks[i] = blockRef{c: l.chunks[r.chunk].c, frag: int64(r.frag)}
	}
	return manifestBlob(l.d, blocks)
}

// writeDense writes an object or group attribute: dense rows in data, an
// optional present_mask, and the group attributes the reference merges.
func (s *storeWriter) writeDense(path string, a *Attribute, mask []byte, codec *blobCodec, style nodeStyle, tag string) {
	rows := len(a.Data) / a.rowSize()
	shape := []int64{int64(rows)}
	if a.Channels > 1 {
		shape = append(shape, int64(a.Channels))
	}
	m := obj{{"zv_array", tag}, {"name", a.Name}, {"dtype", a.DType}, {"num_channels", 1}, {"shape", shape}}
	if tag == "object_attribute" {
		m = append(m, kv{"has_present_mask", mask != nil})
	}
	s.group(path, style, m)
	s.run(func(ctx context.Context) error {
		if err := s.blob(ctx, codec, path, "data", a.Data); err != nil {
			return err
		}
		if mask != nil {
			return s.blob(ctx, codec, path, "present_mask", mask)
		}
		return nil
	})
}

// writeGroups writes groups/data (concatenated int64 member ids) and
// groups/offsets (int64 byte offsets, one per group).
func (s *storeWriter) writeGroups(lp string, l *level) {
	path := lp + "/groups"
	s.group(path, l.auxStyle, obj{{"zv_array", "groups"}, {"num_groups", len(l.groups)}})
	s.run(func(ctx context.Context) error {
		data, offs := ragged.EncodeGroups(l.groups)
		if err := s.blob(ctx, l.auxCodec, path, "data", data); err != nil {
			return err
		}
		return s.blob(ctx, l.auxCodec, path, "offsets", offs)
	})
}
