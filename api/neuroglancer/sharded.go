package neuroglancer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/zvfserve/zvfserve/api/neuroglancer/sharding"
	"github.com/zvfserve/zvfserve/zvf"
)

// Sharded sources (neuroglancer_uint64_sharded_v1, package sharding): the
// annotation spatial levels and by_id, and the skeletons, of a large store
// are served as shard files ({key}/{n}.shard) that Neuroglancer reads with
// Range requests: a few files instead of one per cell or object, which a
// static copy or a CDN in front can hold.
// The info's "sharding" members say so; the unsharded paths keep
// answering. Each shard is built when first asked for, from the keys the
// spec places in it, once per store version (the cache shares one build
// among concurrent requests and counts the shard in its byte budget).
//
// Keys: a spatial level's cells by the compressed Morton code of their
// grid position over the level's grid_shape (murmur hash, so a shard is a
// spread of the volume); by_id's dense annotation ids (points, lines) by
// identity with a preshift, so that shard n is one run of ids and its
// build reads only the chunks or objects that hold them; polyline ids and
// skeletons' segment ids (object ids, not dense) by murmur hash. The
// relationship index (objects/{id}) is not sharded.

// ShardMode says when the sources are sharded (--ng-sharded).
type ShardMode string

// The modes.
const (
	ShardAuto   ShardMode = "auto"   // above AutoShardKeys
	ShardAlways ShardMode = "always" // every annotation and skeleton source
	ShardNever  ShardMode = "never"
)

// ParseShardMode reads a --ng-sharded value.
func ParseShardMode(s string) (ShardMode, error) {
	switch m := ShardMode(s); m {
	case ShardAuto, ShardAlways, ShardNever:
		return m, nil
	}
	return "", fmt.Errorf("%q is not a sharding mode: want always, auto or never", s)
}

// String and Set make a ShardMode a flag.Value.
func (m *ShardMode) String() string { return string(*m) }

// Set parses a --ng-sharded value.
func (m *ShardMode) Set(s string) error {
	v, err := ParseShardMode(s)
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// AutoShardKeys is where ShardAuto starts sharding: an annotation source
// of at least this many annotations, a skeleton source of at least this
// many objects. Below it an unsharded source costs Neuroglancer no more
// requests than a few shards do (a view needs a handful of cells, and
// by_id is read one selected annotation at a time), and the server skips
// building shards.
const AutoShardKeys = 1_000_000

// DefaultMaxShardBytes bounds the bytes one shard build holds
// (Options.MaxShardBytes): ChooseBits aims shards at
// sharding.TargetShardBytes, but with the shard count capped a very large
// source could ask for more; that shard's build stops at the bound
// instead of holding the memory, and the shard is read from its layout
// (shardRange), which holds none of its data.
const DefaultMaxShardBytes = 8 * sharding.TargetShardBytes

// shardedBy reports whether a source of n keys is sharded.
func (s *Server) shardedBy(n int64) bool {
	switch s.o.Sharded {
	case ShardAlways:
		return true
	case ShardNever:
		return false
	}
	above := s.o.ShardAbove
	if above <= 0 {
		above = AutoShardKeys
	}
	return n >= above
}

// shardVariant names what, besides the store version, decides whether a
// source is sharded and its specs: the mode, auto's threshold and the
// byte scale; and the cell bound, which decides the spatial levels. The validators of the infos and shard files cover it, so
// that a client revalidating an info (or a shard) cached from a server
// of another mode gets the new one, not a 304 that keeps an info whose
// shard files this server does not have (or the unsharded info beside
// shard files).
func (s *Server) shardVariant() string {
	mode := s.o.Sharded
	if mode == "" {
		mode = ShardAuto
	}
	above := s.o.ShardAbove
	if above <= 0 {
		above = AutoShardKeys
	}
	if mode != ShardAuto {
		above = 0
	}
	// The cell bound aims the coarse spatial levels (plan.fillForViews),
	// so it decides which cells hold which annotations too.
	return fmt.Sprintf("sharded=%s/%d/%d/%d;cells<=%d", mode, above, s.shardScale, shardLayout, s.o.MaxAnnotations)
}

// shardLayout numbers the rules that size specs and lay out shards; it is
// in the validators (shardVariant), so a change of the rules, as a server
// upgrade brings, gives the infos and shard files new ETags: a client
// must not keep an info whose spec the shards no longer follow. 2: dense
// by_id runs sized to the shard target.
const shardLayout = 2

// shardSpec is a source's spec for numKeys keys of about bytes in all.
func shardSpec(hash sharding.Hash, numKeys int, bytes int64, data sharding.Encoding) sharding.Spec {
	sb, mb := sharding.ChooseBits(numKeys, bytes)
	return sharding.Spec{Hash: hash, ShardBits: sb, MinishardBits: mb, MinishardIndexEncoding: sharding.Gzip, DataEncoding: data}
}

// denseSpec shards the dense ids 0..n−1 (of about bytes in all) by
// identity: each shard is a run of 2^(preshift+minishard_bits) ids, the
// longest power of two whose records stay within
// sharding.TargetShardBytes (as ChooseBits aims every shard), unless the
// ids would then need more than 2^MaxShardBits shards; each minishard a
// run of 2^preshift ids, at most sharding.TargetMinishardKeys (while
// minishard_bits has room). ChooseBits's own shard count does not do here:
// runs of a power of two over a count just past one (2^17 + 1 ids in two
// shards) put nearly every id in the first shard, twice the target.
func denseSpec(n int64, bytes int64) sharding.Spec {
	sp := sharding.Spec{Hash: sharding.Identity, MinishardIndexEncoding: sharding.Gzip, DataEncoding: sharding.Raw}
	if n <= 1 {
		return sp
	}
	idBits := bits.Len64(uint64(n - 1)) // the ids fit 2^idBits
	runBits := idBits                   // one shard holds every id
	if bytes > sharding.TargetShardBytes {
		fit := int64(float64(sharding.TargetShardBytes) / (float64(bytes) / float64(n))) // ids a shard may hold
		runBits = max(bits.Len64(uint64(max(fit, 1)))-1, idBits-sharding.MaxShardBits, 0)
		runBits = min(runBits, idBits)
	}
	minishardKeyBits := bits.Len64(sharding.TargetMinishardKeys) - 1
	sp.ShardBits = idBits - runBits
	sp.MinishardBits = min(max(runBits-minishardKeyBits, 0), sharding.MaxMinishardBits)
	sp.PreshiftBits = runBits - sp.MinishardBits
	return sp
}

// annotationShards are an annotation source's specs: one per spatial
// level, and by_id's.
type annotationShards struct {
	spatial []sharding.Spec
	byID    sharding.Spec
}

// recordBytes estimates the stored bytes of the annotations of a cell
// (with their ids) or of by_id records (with a relationship).
func (p *plan) recordBytes(annotations int64, extra int) int64 {
	return annotations * int64(p.kind.geometryBytes(p.rank)+p.propBytes()+extra)
}

// polylineBytes is the size of every polyline's geometry, which the
// record size leaves out.
func (p *plan) polylineBytes() int64 {
	if p.kind != kindPolyline {
		return 0
	}
	var n int64
	for i := range p.objects {
		n += 4 + 4*int64(p.rank)*int64(len(p.objects[i].chunks))
	}
	return n
}

// shards returns the plan's specs, or nil when the source is not sharded;
// kept with the plan's answers, as their estimate walks every polyline.
func (s *Server) shards(ctx context.Context, st *zvf.Store, p *plan) (*annotationShards, error) {
	if !s.shardedBy(p.total) {
		return nil, nil
	}
	v, err := s.cached(ctx, st, "shard-specs\x00"+p.kind.annotationType(), func(context.Context) (any, int64, error) {
		a := p.shardSpecs(s.shardScale)
		return a, 128 * int64(len(a.spatial)+1), nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*annotationShards), nil
}

// shardSpecs sizes the specs of a sharded annotation source; the byte
// estimates count scale times (1 but in tests, which want many shards of
// small stores).
func (p *plan) shardSpecs(scale int64) *annotationShards {
	a := &annotationShards{}
	poly := p.polylineBytes()
	for _, l := range p.levels {
		bytes := p.recordBytes(l.count, 8) + 8*int64(len(l.cells))
		if p.total > 0 {
			bytes += int64(float64(poly) * float64(l.count) / float64(p.total))
		}
		a.spatial = append(a.spatial, shardSpec(sharding.Murmur, len(l.cells), scale*bytes, sharding.Gzip))
	}
	bytes := scale * (p.recordBytes(p.total, 12) + poly)
	if p.kind == kindPolyline {
		a.byID = shardSpec(sharding.Murmur, len(p.objects), bytes, sharding.Raw)
	} else {
		a.byID = denseSpec(p.total, bytes)
	}
	return a
}

// mortonCode is the compressed Morton code of a cell ("i_j_k") over grid:
// bit b of each coordinate, for b from 0 up, taken for the axes whose
// extent needs that bit, interleaved in axis order. A shard build runs it
// over every cell of a level, so it does not allocate (for up to 8 axes).
func mortonCode(cellKey string, grid []int64) (uint64, error) {
	var buf [8]uint64
	pos := buf[:0]
	if len(grid) > len(buf) {
		pos = make([]uint64, 0, len(grid))
	}
	rest := cellKey
	for i := range grid {
		part, tail, more := strings.Cut(rest, "_")
		if more != (i < len(grid)-1) {
			return 0, fmt.Errorf("cell %q of a %d-axis grid", cellKey, len(grid))
		}
		v, err := strconv.ParseUint(part, 10, 63)
		if err != nil {
			return 0, fmt.Errorf("cell %q: %w", cellKey, err)
		}
		pos, rest = append(pos, v), tail
	}
	if len(grid) == 0 {
		return 0, fmt.Errorf("cell %q of a %d-axis grid", cellKey, len(grid))
	}
	need := func(i int) int {
		if grid[i] > 1 {
			return bits.Len64(uint64(grid[i] - 1))
		}
		return 0
	}
	most := 0
	for i := range grid {
		most = max(most, need(i))
	}
	var code uint64
	j := 0
	for b := range most {
		for i := range pos {
			if b < need(i) {
				if j >= 64 {
					return 0, fmt.Errorf("grid %v needs more than 64 bits of Morton code", grid)
				}
				code |= (pos[i] >> b & 1) << j
				j++
			}
		}
	}
	return code, nil
}

// shardFile answers one shard file, building it through the cache.
// holds reports whether shard n holds a key, from the source's plan or
// object list without reading a chunk (an error: what the build would
// fail with before reading, a cell over the bound): with an If-Match, a
// shard that holds one is refused 412 before it is built, one that holds
// none is its 404 (notModifiedOnceFoundAs). The shard's ETag is known
// before the build: the store version, its path (source and shard
// number), the coding and shardVariant, which covers what shapes specs.
// least, when not nil, is the least a whole build of the shard holds, as
// shardBuild.add counts it, known without building the shard.
func (s *Server) shardFile(w http.ResponseWriter, r *http.Request, st *zvf.Store, spec sharding.Spec, source, name string, start time.Time,
	holds func(ctx context.Context, n uint64) (bool, error), least func(b *shardBuild) (int64, error), build func(ctx context.Context, b *shardBuild) error) error {
	n, err := spec.ParseShardFile(name)
	if err != nil {
		return notFoundf("store %q: %s has no shard file %s (it has %d: %s to %s)", st.Name(), source, name, spec.NumShards(), spec.ShardFile(0), spec.ShardFile(spec.NumShards()-1))
	}
	found := func() error {
		ok, err := holds(r.Context(), n)
		if err != nil {
			return err
		}
		if !ok {
			return notFoundf("store %q: shard %s of %s holds no key", st.Name(), spec.ShardFile(n), source)
		}
		return nil
	}
	if done, err := s.notModifiedOnceFoundAs(w, r, st, s.shardVariant(), found); done || err != nil {
		return err
	}
	newBuild := func() *shardBuild {
		b := &shardBuild{spec: spec, shard: n, store: st.Name(), source: source, limit: s.o.MaxShardBytes, built: &s.chunksBuilt}
		if b.limit <= 0 {
			b.limit = DefaultMaxShardBytes
		}
		return b
	}
	key := fmt.Sprintf("shard\x00%s\x00%d", source, n)
	// A shard the cache did not keep (larger than its budget) would be
	// built whole for every Range read: once seen, a Range read is
	// answered from the shard's layout and the chunks it covers. A shard
	// over the build bound cannot be built whole at all: once seen, every
	// read of it is answered so (a GET without Range too, unencoded).
	full, tag := s.cacheKey(st, key), st.Name()+"\x00"+key
	if v, ok := s.overBound.Load(tag); ok && v == full {
		return s.shardRange(w, r, st, key, start, newBuild, build)
	}
	if s.o.Cache != nil && r.Header.Get("Range") != "" {
		if _, kept := s.o.Cache.Peek(full); !kept {
			if v, ok := s.notKept.Load(tag); ok && v == full {
				return s.shardRange(w, r, st, key, start, newBuild, build)
			}
		}
	}
	// A shard the plan shows over the bound is read from its layout
	// without a whole build first: that build would read and hold up to
	// the bound before it stopped.
	if least != nil && !s.holds(full) {
		b := newBuild()
		size, err := least(b)
		if err != nil {
			return err
		}
		if size > b.limit {
			s.overBound.Store(tag, full)
			return s.shardRange(w, r, st, key, start, newBuild, build)
		}
	}
	body, err := s.cachedBytes(r.Context(), st, key, func(ctx context.Context) ([]byte, error) {
		b := newBuild()
		if err := build(ctx, b); err != nil {
			return nil, err
		}
		return b.finish()
	})
	if over := (*shardOverBound)(nil); errors.As(err, &over) {
		s.overBound.Store(tag, full)
		return s.shardRange(w, r, st, key, start, newBuild, build)
	}
	if err != nil {
		return err
	}
	if s.o.Cache == nil {
		return s.send(w, r, st, key, mediaBinary, body, start)
	}
	if _, kept := s.o.Cache.Peek(full); !kept {
		s.notKept.Store(tag, full)
	}
	return s.send(w, r, st, key, mediaBinary, body, start)
}

// holds reports whether the cache holds key.
func (s *Server) holds(key string) bool {
	if s.o.Cache == nil {
		return false
	}
	_, ok := s.o.Cache.Peek(key)
	return ok
}

// chunkOverhead is what shardBuild.add counts for a chunk beside its
// bytes.
const chunkOverhead = 24

// leastSpatialShard is the least a whole build of shard b of spatial
// level n holds, from the plan's cells: each cell's list is a count, its
// records (fixed in size but for a polyline's vertices) and their ids.
func (p *plan) leastSpatialShard(n int, b *shardBuild) (int64, error) {
	sl := p.levels[n]
	per := int64(p.kind.geometryBytes(p.rank) + p.propBytes() + 8)
	var sum int64
	for key, cl := range sl.cells {
		code, err := mortonCode(key, sl.shape)
		if err != nil {
			return 0, corruptf("store %q spatial%d: %v", p.store, n, err)
		}
		if !b.wants(code) {
			continue
		}
		sum += chunkOverhead + 8 + cl.count*per
		if p.kind == kindPolyline {
			for _, i := range cl.objects {
				sum += 4 + 4*int64(p.rank)*int64(len(p.objects[i].chunks))
			}
		}
	}
	return sum, nil
}

// leastByIDShard is the least a whole build of by_id shard b holds, from
// the plan: a record for each id it serves under limit (byIDServed), a
// relationship's count with it where there is one (and the object's id
// but for a point of none).
func (p *plan) leastByIDShard(limit int64, b *shardBuild) (int64, error) {
	per := int64(chunkOverhead + p.kind.geometryBytes(p.rank) + p.propBytes())
	if p.relate {
		per += 4
		if p.kind != kindPoint {
			per += 8
		}
	}
	if p.kind != kindPolyline {
		lo, hi := b.idRange(p.total)
		return (hi - lo) * per, nil
	}
	var sum int64
	for i := range p.objects {
		if b.wants(uint64(p.objects[i].id)) && p.byIDServed(i, limit) {
			sum += per + 4 + 4*int64(p.rank)*int64(len(p.objects[i].chunks))
		}
	}
	return sum, nil
}

// shardRange answers a Range read of a shard the cache cannot keep (or
// any read of one over the build bound; without Range, the whole file,
// read a chunk at a time): the
// shard's layout (sharding.Layout: its shard and minishard indexes, and
// where each minishard's data starts) is built once per store
// version by encoding each chunk and keeping only its size, and cached;
// each read then builds only the chunks its range covers. Nothing of the
// shard's data is held beyond the chunk being sent.
func (s *Server) shardRange(w http.ResponseWriter, r *http.Request, st *zvf.Store, key string, start time.Time,
	newBuild func() *shardBuild, build func(ctx context.Context, b *shardBuild) error) error {
	v, err := s.cached(r.Context(), st, key+"\x00layout", func(ctx context.Context) (any, int64, error) {
		b := newBuild()
		enc, err := sharding.NewBuilder(b.spec)
		if err != nil {
			return nil, 0, err
		}
		b.measure = enc
		if err := build(ctx, b); err != nil {
			return nil, 0, err
		}
		if len(b.sized) == 0 {
			return nil, 0, notFoundf("store %q: shard %s of %s holds no key", b.store, b.spec.ShardFile(b.shard), b.source)
		}
		lay, err := enc.Layout(b.shard, b.sized)
		if err != nil {
			return nil, 0, err
		}
		return lay, lay.Bytes(), nil
	})
	if err != nil {
		return err
	}
	lay := v.(*sharding.Layout)
	// What the answer covers is known before it starts, and so is every
	// chunk's stored size: a chunk over the build bound (one cell or
	// skeleton, which is encoded whole) is refused now, as a problem,
	// rather than when the answer reaches it.
	spans := answerSpans(r, w.Header().Get("ETag"), lay.Size)
	for _, sp := range spans {
		big, err := lay.Largest(sp[0], sp[1])
		if err != nil {
			return err
		}
		if b := newBuild(); big.Size > b.limit {
			return tooLargef("store %q: %s: chunk %d of shard %s is %d bytes stored, more than the %d bytes this server builds at once (--ng-max-shard-bytes; raise it above %d to serve this chunk)",
				b.store, b.source, big.Key, b.spec.ShardFile(b.shard), big.Size, b.limit, big.Size)
		}
	}
	rd := &shardReader{ctx: r.Context(), lay: lay, chunk: func(ctx context.Context, c sharding.Entry) ([]byte, error) {
		b := newBuild()
		b.narrow, b.only = true, c.Key
		if err := build(ctx, b); err != nil {
			return nil, err
		}
		if len(b.keys) != 1 {
			return nil, fmt.Errorf("store %q: %s: chunk %d of shard %s built %d times", b.store, b.source, c.Key, b.spec.ShardFile(b.shard), len(b.keys))
		}
		enc, err := sharding.NewBuilder(b.spec)
		if err != nil {
			return nil, err
		}
		out, err := enc.EncodeChunk(nil, b.data[0])
		if err == nil && int64(len(out)) != c.Size {
			err = fmt.Errorf("store %q: %s: chunk %d of shard %s is %d bytes stored, its layout says %d", b.store, b.source, c.Key, b.spec.ShardFile(b.shard), len(out), c.Size)
		}
		return out, err
	}}
	// The first chunk the answer reaches is built before the answer
	// starts, so that its failure is a problem document, not a cut answer
	// (a later chunk's failure cuts the answer: see the API's wrap).
	if len(spans) > 0 && r.Method != http.MethodHead {
		if at := max(spans[0][0], int64(len(lay.Head))); at < spans[0][1] {
			if err := rd.load(at); err != nil {
				return err
			}
		}
	}
	w.Header().Set("Content-Type", mediaBinary)
	w.Header().Set("Accept-Ranges", "bytes")
	if err := s.sendRange(w, r, rd, lay.Size, start); err != nil {
		return err
	}
	return rd.err
}

// answerSpans are the spans [lo, hi) of a file of size bytes that
// http.ServeContent answers a request with: each range of a bytes Range
// it honours, else the whole file (an If-Range other than the strong
// ETag, a Range in another unit, ranges adding up to more than the file).
// A Range it would answer 416 has none. A Range this cannot read is taken
// as the whole file, which covers whatever is answered.
func answerSpans(r *http.Request, etag string, size int64) [][2]int64 {
	all := [][2]int64{{0, size}}
	v := r.Header.Get("Range")
	if v == "" {
		return all
	}
	if ir := r.Header.Get("If-Range"); ir != "" && (ir != etag || strings.HasPrefix(etag, "W/")) {
		return all
	}
	kept, ok := withoutEmptySuffixes(v)
	switch {
	case !ok:
		return nil
	case kept == "":
		return all
	}
	var spans [][2]int64
	var sum int64
	for spec := range strings.SplitSeq(strings.TrimPrefix(kept, kept[:strings.IndexByte(kept, '=')+1]), ",") {
		first, last, found := strings.Cut(strings.TrimSpace(spec), "-")
		if !found {
			return all
		}
		var lo, hi int64
		if first == "" {
			n, err := strconv.ParseInt(last, 10, 64)
			if err != nil || n < 0 {
				return all
			}
			lo, hi = max(size-n, 0), size
		} else {
			a, err := strconv.ParseInt(first, 10, 64)
			if err != nil || a < 0 {
				return all
			}
			lo, hi = a, size
			if last != "" {
				b, err := strconv.ParseInt(last, 10, 64)
				if err != nil || b < a {
					return all
				}
				hi = min(b+1, size)
			}
		}
		if lo < hi {
			spans, sum = append(spans, [2]int64{lo, hi}), sum+hi-lo
		}
	}
	if sum > size {
		return all
	}
	return spans
}

// shardReader reads a shard file from its layout, building each chunk
// when a read reaches it and keeping only the last one built.
type shardReader struct {
	ctx   context.Context
	lay   *sharding.Layout
	chunk func(ctx context.Context, c sharding.Entry) ([]byte, error)
	off   int64
	at    sharding.Entry // the chunk in cur (Size 0: none)
	cur   []byte         // its stored bytes
	err   error          // the first build that failed
}

func (r *shardReader) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekCurrent:
		offset += r.off
	case io.SeekEnd:
		offset += r.lay.Size
	}
	if offset < 0 {
		return 0, errors.New("shard read: seek before the start")
	}
	r.off = offset
	return offset, nil
}

// load makes cur the chunk that holds byte off, if a chunk does.
func (r *shardReader) load(off int64) error {
	l := r.lay
	if off < int64(len(l.Head)) || off >= l.TailStart {
		return nil
	}
	if r.at.Size > 0 && off >= r.at.Offset && off < r.at.Offset+r.at.Size {
		return nil
	}
	c, err := l.Chunk(off)
	if err == nil {
		r.cur, err = r.chunk(r.ctx, c)
	}
	if err != nil {
		r.at = sharding.Entry{}
		if r.err == nil {
			r.err = err
		}
		return err
	}
	r.at = c
	return nil
}

func (r *shardReader) Read(p []byte) (int, error) {
	l := r.lay
	var n int
	switch {
	case r.off >= l.Size:
		return 0, io.EOF
	case r.off < int64(len(l.Head)):
		n = copy(p, l.Head[r.off:])
	case r.off >= l.TailStart:
		n = copy(p, l.Tail[r.off-l.TailStart:])
	default:
		if err := r.load(r.off); err != nil {
			return 0, err
		}
		n = copy(p, r.cur[r.off-r.at.Offset:])
	}
	r.off += int64(n)
	return n, nil
}

// shardBuild gathers one shard's chunks, safe for concurrent adds, and
// bounds what they hold.
type shardBuild struct {
	spec          sharding.Spec
	shard         uint64
	store, source string
	limit         int64 // bytes the chunks may hold
	// narrow, when set, builds key only alone (a chunk a Range read
	// reaches): build functions skip every other key through wants.
	narrow bool
	only   uint64
	// measure, when not nil, encodes each chunk added and keeps only its
	// stored size (in sized), for the shard's layout.
	measure *sharding.Builder
	mu      sync.Mutex
	keys    []uint64
	data    [][]byte
	sized   []sharding.Sized
	scratch []byte
	bytes   atomic.Int64
	built   *atomic.Int64 // counts the chunks built, to send or to measure (tests read it)
}

// wants reports whether key is in the shard being built.
func (b *shardBuild) wants(key uint64) bool {
	if b.narrow {
		return key == b.only
	}
	sh, _ := b.spec.Locate(key)
	return sh == b.shard
}

func (b *shardBuild) add(key uint64, data []byte) error {
	b.built.Add(1)
	if b.measure != nil {
		b.mu.Lock()
		defer b.mu.Unlock()
		var err error
		if b.scratch, err = b.measure.EncodeChunk(b.scratch[:0], data); err != nil {
			return err
		}
		b.sized = append(b.sized, sharding.Sized{Key: key, Size: int64(len(b.scratch))})
		return nil
	}
	// A narrow build holds its one chunk, whose stored size the layout
	// checked against the bound before the answer started.
	if n := b.bytes.Add(int64(len(data)) + chunkOverhead); n > b.limit && !b.narrow {
		return &shardOverBound{tooLargef("store %q: shard %s of %s holds more than %d bytes, more than this server builds at once", b.store, b.spec.ShardFile(b.shard), b.source, b.limit)}
	}
	b.mu.Lock()
	b.keys = append(b.keys, key)
	b.data = append(b.data, data)
	b.mu.Unlock()
	return nil
}

// shardOverBound is a whole-shard build stopped at its byte bound: the
// shard is then read from its layout (shardRange), which holds none of
// its data. It is the too-large problem it wraps wherever it is answered.
type shardOverBound struct{ problem error }

func (e *shardOverBound) Error() string { return e.problem.Error() }
func (e *shardOverBound) Unwrap() error { return e.problem }

// finish writes the shard file; a shard no key is placed in does not
// exist.
func (b *shardBuild) finish() ([]byte, error) {
	if len(b.keys) == 0 {
		return nil, notFoundf("store %q: shard %s of %s holds no key", b.store, b.spec.ShardFile(b.shard), b.source)
	}
	sb, err := sharding.NewBuilder(b.spec)
	if err != nil {
		return nil, err
	}
	sb.Grow(len(b.keys))
	for i, k := range b.keys {
		sb.Add(k, b.data[i])
	}
	return sb.AppendShard(nil, b.shard)
}

// each runs f over 0..n−1 concurrently, bounded like a plan's reads.
func each(ctx context.Context, n int, f func(ctx context.Context, i int) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(readConcurrency)
	for i := range n {
		g.Go(func() error { return f(gctx, i) })
	}
	return g.Wait()
}

// spatialShard builds shard b of spatial level n: every cell it holds,
// encoded as the unsharded cell is.
func (p *plan) spatialShard(ctx context.Context, n int, limit int64, b *shardBuild) error {
	sl := p.levels[n]
	var cells []string
	var codes []uint64
	for key := range sl.cells {
		code, err := mortonCode(key, sl.shape)
		if err != nil {
			return corruptf("store %q spatial%d: %v", p.store, n, err)
		}
		if b.wants(code) {
			cells, codes = append(cells, key), append(codes, code)
		}
	}
	return each(ctx, len(cells), func(ctx context.Context, i int) error {
		if err := p.checkSize(n, cells[i], sl.cells[cells[i]], limit); err != nil {
			return err
		}
		body, err := p.cellBytes(ctx, n, cells[i])
		if err != nil {
			return err
		}
		return b.add(codes[i], body)
	})
}

// spatialHolds reports whether shard n of spatial level l (spec) holds
// a cell; a cell over limit it holds is the error its build fails with.
func (p *plan) spatialHolds(l int, spec sharding.Spec, n uint64, limit int64) (bool, error) {
	sl := p.levels[l]
	held := false
	for key, cl := range sl.cells {
		code, err := mortonCode(key, sl.shape)
		if err != nil {
			return false, corruptf("store %q spatial%d: %v", p.store, l, err)
		}
		if sh, _ := spec.Locate(code); sh != n {
			continue
		}
		if err := p.checkSize(l, key, cl, limit); err != nil {
			return false, err
		}
		held = true
	}
	return held, nil
}

// byIDHolds reports whether shard n of by_id (spec) holds an id: a
// polyline's object id placed there (one it serves under limit), or a
// dense id in its run.
func (p *plan) byIDHolds(spec sharding.Spec, n uint64, limit int64) bool {
	if p.kind == kindPolyline {
		for i := range p.objects {
			if sh, _ := spec.Locate(uint64(p.objects[i].id)); sh == n && p.byIDServed(i, limit) {
				return true
			}
		}
		return false
	}
	lo, hi := (&shardBuild{spec: spec, shard: n}).idRange(p.total)
	return lo < hi
}

// byIDShard builds shard b of by_id: each annotation's by_id record, but
// for a polyline over limit (byIDServed). Each kind picks the objects or
// chunks holding b's ids and reads their records into b.
func (p *plan) byIDShard(ctx context.Context, limit int64, b *shardBuild) error {
	var parts []int // objects, or for points chunks
	var records func(ctx context.Context, part int, l *list) error
	switch p.kind {
	case kindPolyline:
		for i := range p.objects {
			if b.wants(uint64(p.objects[i].id)) && p.byIDServed(i, limit) {
				parts = append(parts, i)
			}
		}
		records = p.polylineRecord
	case kindPoint:
		lo, hi := b.idRange(p.total)
		for c := range p.keys {
			if p.first[c] < hi && p.first[c+1] > lo {
				parts = append(parts, c)
			}
		}
		records = func(ctx context.Context, c int, l *list) error {
			return p.pointRows(ctx, c, p.relate, func(id, _ int64) bool { return id >= lo && id < hi }, l)
		}
	default: // kindLine
		lo, hi := b.idRange(p.total)
		for i := range p.objects {
			if p.edgeFirst[i] < hi && p.edgeFirst[i+1] > lo {
				parts = append(parts, i)
			}
		}
		records = func(ctx context.Context, i int, l *list) error {
			return p.lineRecords(ctx, i, func(id, _, _ int64) bool { return id >= lo && id < hi }, l)
		}
	}
	return each(ctx, len(parts), func(ctx context.Context, i int) error {
		var l list
		if err := records(ctx, parts[i], &l); err != nil {
			return err
		}
		return p.addRecords(&l, b)
	})
}

// byIDServed reports whether the sharded by_id holds object i's record:
// a polyline of more vertices than limit (0: none) is refused by its own
// by_id request (413, checkObjectSize), as are the cells that hold it,
// and the precomputed format has no per-entry error, so the shard leaves
// it out. Neuroglancer then finds no annotation of that id, as it does
// for a by_id 404, rather than a polyline the server refuses elsewhere
// or a truncated one drawn as if it were whole. A point's or a line's
// record is one vertex or edge, always within the bound.
func (p *plan) byIDServed(i int, limit int64) bool {
	return p.kind != kindPolyline || limit <= 0 || int64(len(p.objects[i].chunks)) <= limit
}

// idRange is the run of dense ids [lo, hi) a denseSpec places in the
// shard being built, within 0..total.
func (b *shardBuild) idRange(total int64) (lo, hi int64) {
	run := b.spec.PreshiftBits + b.spec.MinishardBits
	if run >= 63 {
		return 0, total
	}
	lo = min(int64(b.shard)<<run, total)
	hi = min(lo+1<<run, total)
	if b.narrow && b.only < uint64(total) {
		lo, hi = max(lo, int64(b.only)), min(hi, int64(b.only)+1)
	}
	return lo, hi
}

// addRecords adds each annotation of l as its by_id record.
func (p *plan) addRecords(l *list, b *shardBuild) error {
	for i := range l.ids {
		if !b.wants(uint64(l.ids[i])) {
			continue
		}
		if err := b.add(uint64(l.ids[i]), p.byIDRecord(l, i)); err != nil {
			return err
		}
	}
	return nil
}

// skeletonShards is the skeleton source's spec, or nil when unsharded.
func (s *Server) skeletonShards(l0 *zvf.Level, sp *skeletonSpec) *sharding.Spec {
	info := l0.Info()
	if !s.shardedBy(info.ObjectCount) {
		return nil
	}
	per := int64(12 + 8) // a vertex and about an edge
	for _, a := range sp.attrs {
		per += int64(typeSize(a.DataType) * a.Components)
	}
	spec := shardSpec(sharding.Murmur, int(min(info.ObjectCount, 1<<62)), s.shardScale*(info.VertexCount*per+8*info.ObjectCount), sharding.Gzip)
	return &spec
}

// objectIDs lists level 0's objects that have vertices, once per store
// version.
func (s *Server) objectIDs(ctx context.Context, st *zvf.Store, l0 *zvf.Level) ([]int64, error) {
	v, err := s.cached(ctx, st, "object-ids", func(ctx context.Context) (any, int64, error) {
		var ids []int64
		for row := range l0.Info().ObjectCount {
			id, err := l0.ObjectIDAt(ctx, row)
			if err != nil {
				return nil, 0, err
			}
			ok, err := l0.HasObject(ctx, id)
			if err != nil {
				return nil, 0, err
			}
			if ok {
				ids = append(ids, id)
			}
		}
		return ids, 8*int64(len(ids)) + 64, nil
	})
	if err != nil {
		return nil, err
	}
	return v.([]int64), nil
}

// skeletonHolds reports whether shard n of the skeletons (spec) holds an
// object, from the object list (no vertex is read).
func (s *Server) skeletonHolds(ctx context.Context, st *zvf.Store, l0 *zvf.Level, spec sharding.Spec, n uint64) (bool, error) {
	all, err := s.objectIDs(ctx, st, l0)
	if err != nil {
		return false, err
	}
	for _, id := range all {
		if sh, _ := spec.Locate(uint64(id)); sh == n {
			return true, nil
		}
	}
	return false, nil
}

// leastSkeletonShard is the least a whole build of skeleton shard b
// holds, as leastByIDShard is for by_id: each object's skeleton, its
// vertex count (from its manifest, which reads no more than the build
// does: the chunks' vertices, kept by the store's cache) times a vertex's
// position and attributes, with the two counts and the chunk's overhead.
// Its edges are not known before it is read, and count nothing.
func (s *Server) leastSkeletonShard(ctx context.Context, st *zvf.Store, l0 *zvf.Level, sp *skeletonSpec, b *shardBuild) (int64, error) {
	all, err := s.objectIDs(ctx, st, l0)
	if err != nil {
		return 0, err
	}
	per := int64(12)
	for _, a := range sp.attrs {
		per += int64(typeSize(a.DataType) * a.Components)
	}
	var sum int64
	for _, id := range all {
		if !b.wants(uint64(id)) {
			continue
		}
		m, err := l0.Manifest(ctx, id)
		if err != nil {
			return 0, err
		}
		var n int64
		for _, mb := range m.Blocks {
			for _, f := range mb.Fragments {
				n += f.Count
			}
		}
		sum += chunkOverhead + 8 + n*per
	}
	return sum, nil
}

// skeletonShard builds shard b of the skeletons: each object's skeleton,
// encoded as the unsharded one is.
func (s *Server) skeletonShard(ctx context.Context, st *zvf.Store, l0 *zvf.Level, sp *skeletonSpec, b *shardBuild) error {
	all, err := s.objectIDs(ctx, st, l0)
	if err != nil {
		return err
	}
	var ids []int64
	for _, id := range all {
		if b.wants(uint64(id)) {
			ids = append(ids, id)
		}
	}
	return each(ctx, len(ids), func(ctx context.Context, i int) error {
		body, err := sp.skeletonBytes(ctx, st.Name(), l0, ids[i], s.o.MaxAnnotations)
		if err != nil {
			return err
		}
		return b.add(uint64(ids[i]), body)
	})
}

// isShardFile reports whether a path segment names a shard file (no
// cell, annotation or segment id ends so).
func isShardFile(name string) bool { return strings.HasSuffix(name, ".shard") }
