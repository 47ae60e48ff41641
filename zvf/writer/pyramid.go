package writer

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"

	"github.com/zvfserve/zvfserve/zvf/ragged"
)

// pyramid derives coarser levels by per-object metavertex coarsening
// (zvf-format.md §7.1), reproducing build_pyramid's layout: one metavertex
// per occupied target bin (the float32 mean of every surviving object's
// vertices in it, shared between objects), one single-row fragment per
// metavertex, manifests in trajectory order with consecutive duplicates
// removed, and cross-level links ±1 from every fine vertex to the
// metavertex of its bin.
type pyramid struct {
	s         *storeWriter
	g         *geom
	o         *Options
	prev      *level
	prevChunk []float64
}

func newPyramid(s *storeWriter, g *geom, o *Options, l0 *level) *pyramid {
	return &pyramid{s: s, g: g, o: o, prev: l0, prevChunk: g.chunk}
}

// binAcc accumulates one metavertex.
type binAcc struct {
	id  int32 // first-seen id
	cnt int64
}

// next builds, schedules and returns level i+1 from level i.
func (p *pyramid) next(i int) (*level, error) {
	src, g, spec := p.prev, p.g, p.o.Pyramid[i]
	d := g.d
	sparsity := spec.Sparsity
	if sparsity == 0 {
		sparsity = 1
	}
	scale := max(spec.ChunkScale, 1)
	chunk := make([]float64, d)
	sameAsRoot := true
	for a := range d {
		chunk[a] = p.prevChunk[a] * float64(scale)
		if math.Abs(chunk[a]-g.chunk[a]) >= 1e-9 {
			sameAsRoot = false
		}
	}
	bin := make([]float64, d)
	for a := range d {
		bin[a] = g.bin[a] * spec.Coarsen
	}

	manifests := src.objectManifests()
	nsrc := len(manifests)
	if src.vertexCount() == 0 || nsrc == 0 {
		return nil, inputErr("Options.Pyramid", i, "level %d has no vertices to coarsen", src.index)
	}
	keep := p.keep(nsrc, sparsity, i)

	bins, keys, sums, seqs := binObjects(src, manifests, keep, bin, d)
	// Metavertex order is np.unique over the bin keys' raw bytes, i.e. a
	// memcmp of little-endian int64s.
	m := len(keys)
	order := make([]int32, m)
	for j := range order {
		order[j] = int32(j)
	}
	slices.SortFunc(order, func(a, b int32) int { return cmpLE(keys[a], keys[b], d) })
	rank := make([]int32, m)
	pos := make([]float32, m*d)
	for r, id := range order {
		rank[id] = int32(r)
		cnt := float64(bins[keys[id]].cnt)
		for a := range d {
			pos[r*d+a] = float32(float64(sums[int(id)*d+a]) / cnt)
		}
	}
	sums = nil

	// Chunk the metavertices; each is a one-row fragment.
	bk := byCell(pos, d, chunk)
	nl := &level{index: src.index + 1, d: d, pos: pos, codec: p.s.zstd, style: stylePretty,
		auxCodec: p.s.zstd, auxStyle: stylePretty}
	where := make([]fragRef, m) // by rank
	nl.chunks = make([]chunkData, len(bk.keys))
	for ci, k := range bk.keys {
		rows := bk.order[bk.start[ci]:bk.start[ci+1]]
		frags := make([]int64, len(rows))
		for f, r := range rows {
			frags[f] = 1
			where[r] = fragRef{int32(ci), int32(f)}
		}
		nl.chunks[ci] = chunkData{c: k, rows: rows, frags: frags}
	}
	if src.hasObjects {
		nl.inheritObjects(src, seqs, keep, where, rank)
	}
	present := []string{"vertices"}
	if src.hasObjects {
		present = append(present, "object_index")
	}
	nl.meta = obj{{"level", nl.index}, {"object_sparsity", 1 / sparsity}, {"vertex_count", m},
		{"coarsening_method", "per_object"}, {"parent_level", src.index}, {"arrays_present", present}}
	if !sameAsRoot {
		nl.meta = append(nl.meta, kv{"chunk_shape", chunk})
	}
	if src.hasObjects {
		nl.meta = append(nl.meta, kv{"preserves_object_ids", true}, kv{"inherited_num_objects", nsrc})
	} else {
		nl.meta = append(nl.meta, kv{"inherited_num_objects", 0})
	}
	nl.meta = append(nl.meta, kv{"shared_fragments", true})
	p.s.writeLevel(nl)
	p.crossLevel(src, nl, bin, bins, rank, where)
	p.prev, p.prevChunk = nl, chunk
	return nl, nil
}

// objectManifests is each object's fragments at src; a level without an
// object index is one implicit object naming every fragment in chunk
// order.
func (src *level) objectManifests() [][]fragRef {
	if src.hasObjects {
		return src.manifests
	}
	var all []fragRef
	for ci := range src.chunks {
		for f := range src.chunks[ci].frags {
			all = append(all, fragRef{int32(ci), int32(f)})
		}
	}
	return [][]fragRef{all}
}

// binObjects bins every surviving object's vertices (keep) in trajectory
// order into cells of size bin, accumulating float32 sums in that order
// (np.add.at order): the bins by cell, their cells in order of first
// appearance, the sums (d, the dimensions, a bin, by bin id) and each
// object's sequence of bin ids (consecutive repeats folded).
func binObjects(src *level, manifests [][]fragRef, keep []int, bin []float64, d int) (bins map[coords]*binAcc, keys []coords, sums []float32, seqs [][]int32) {
	// Fragment start rows per source chunk.
	fstart := make([][]int64, len(src.chunks))
	for ci := range src.chunks {
		st := make([]int64, len(src.chunks[ci].frags)+1)
		for f, n := range src.chunks[ci].frags {
			st[f+1] = st[f] + n
		}
		fstart[ci] = st
	}
	bins = map[coords]*binAcc{}
	seqs = make([][]int32, len(manifests))
	var lastKey coords
	var last *binAcc // rows of a fragment mostly share a bin: skip the map
	for _, oid := range keep {
		var seq []int32
		prev := int32(-1)
		for _, r := range manifests[oid] {
			c := &src.chunks[r.chunk]
			for _, row := range c.rows[fstart[r.chunk][r.frag]:fstart[r.chunk][r.frag+1]] {
				v := src.pos[int(row)*d : int(row)*d+d]
				k := cellOf(v, bin)
				acc := last
				if acc == nil || k != lastKey {
					acc = bins[k]
					if acc == nil {
						acc = &binAcc{id: int32(len(keys))}
						bins[k] = acc
						keys = append(keys, k)
						sums = append(sums, make([]float32, d)...)
					}
					last, lastKey = acc, k
				}
				for a := range d {
					sums[int(acc.id)*d+a] += v[a]
				}
				acc.cnt++
				if acc.id != prev {
					seq = append(seq, acc.id)
					prev = acc.id
				}
			}
		}
		seqs[oid] = seq
	}
	return bins, keys, sums, seqs
}

// inheritObjects gives nl, a coarsened level of src, src's objects: each
// one's manifest from its sequence of bins (seqs, by bin id; where and
// rank place the metavertices), and the object attributes of the
// surviving ones (keep).
func (nl *level) inheritObjects(src *level, seqs [][]int32, keep []int, where []fragRef, rank []int32) {
	nsrc := len(seqs)
	nl.hasObjects = true
	nl.manifests = make([][]fragRef, nsrc)
	for oid, seq := range seqs {
		if seq == nil {
			continue
		}
		refs := make([]fragRef, len(seq))
		for j, id := range seq {
			refs[j] = where[rank[id]]
		}
		nl.manifests[oid] = refs
	}
	mask := make([]byte, nsrc)
	for _, oid := range keep {
		mask[oid] = 1
	}
	for _, a := range src.oattrs {
		rs := a.rowSize()
		out := Attribute{Name: a.Name, DType: a.DType, Channels: a.Channels, Data: make([]byte, len(a.Data))}
		for _, oid := range keep {
			if (oid+1)*rs <= len(a.Data) {
				copy(out.Data[oid*rs:], a.Data[oid*rs:(oid+1)*rs])
			}
		}
		nl.oattrs = append(nl.oattrs, out)
	}
	if len(nl.oattrs) > 0 {
		nl.oattrsMask = mask
	}
}

// keep picks the surviving object ids (sorted). The reference draws them
// with numpy's RNG; this uses a seeded PCG, so the count matches
// (max(1, round(n/sparsity))) but not the choice.
func (p *pyramid) keep(n int, sparsity float64, i int) []int {
	all := make([]int, n)
	for j := range all {
		all[j] = j
	}
	if sparsity <= 1 || n <= 1 {
		return all
	}
	target := max(1, int(math.RoundToEven(float64(n)*(1/sparsity))))
	r := rand.New(rand.NewPCG(p.o.SparsitySeed, uint64(i)))
	r.Shuffle(n, func(a, b int) { all[a], all[b] = all[b], all[a] })
	kept := all[:target]
	slices.Sort(kept)
	return kept
}

// cmpLE compares two bin keys as the bytes of little-endian int64s.
func cmpLE(a, b coords, d int) int {
	for i := range d {
		if a[i] == b[i] {
			continue
		}
		x, y := uint64(a[i]), uint64(b[i])
		for s := 0; s < 64; s += 8 {
			bx, by := byte(x>>s), byte(y>>s)
			if bx != by {
				if bx < by {
					return -1
				}
				return 1
			}
		}
	}
	return 0
}

// crossLevel writes links/+1 and cross_chunk_links/+1 at the fine level and
// their mirrors -1 at the coarse level. A fine vertex links to the
// metavertex of its target bin when that bin is occupied (vertices of
// dropped objects can still land in an occupied bin, as in the reference).
// Pairs whose fine and coarse chunk coordinates are equal go to the chunk's
// links blob; the others become cross-chunk records, in fine row order.
func (p *pyramid) crossLevel(fine, coarse *level, bin []float64, bins map[coords]*binAcc, rank []int32, where []fragRef) {
	s, d := p.s, fine.d
	fp, cp := strconv.Itoa(fine.index), strconv.Itoa(coarse.index)
	cross := make([][]int64, len(fine.chunks)) // per fine chunk: flat +1 records
	var once sync.Once
	for ci := range fine.chunks {
		fc := &fine.chunks[ci]
		s.run(func(ctx context.Context) error {
			up := make([]int64, 0, 2*len(fc.rows))
			down := make([]int64, 0, 2*len(fc.rows))
			var rec []int64
			var lastKey coords
			var last *binAcc
			for local, row := range fc.rows {
				k := cellOf(fine.pos[int(row)*d:int(row)*d+d], bin)
				acc := last
				if acc == nil || k != lastKey {
					acc, lastKey = bins[k], k
					last = acc
				}
				if acc == nil {
					continue
				}
				w := where[rank[acc.id]]
				cc := coarse.chunks[w.chunk].c
				if cc == fc.c {
					up = append(up, int64(local), int64(w.frag))
					down = append(down, int64(w.frag), int64(local))
					continue
				}
				rec = append(rec, fc.c[:d]...)
				rec = append(rec, int64(local))
				rec = append(rec, cc[:d]...)
				rec = append(rec, int64(w.frag))
			}
			cross[ci] = rec
			if len(up) == 0 {
				return nil
			}
			once.Do(func() {
				s.group(fp+"/links/+1", stylePretty, obj{{"zv_array", "links"}, {"dtype", "int64"}, {"link_width", 2}, {"level_delta", 1}})
				s.group(cp+"/links/-1", stylePretty, obj{{"zv_array", "links"}, {"dtype", "int64"}, {"link_width", 2}, {"level_delta", -1}})
			})
			key := fc.c.key(d)
			for _, side := range []struct {
				path  string
				pairs []int64
			}{{fp + "/links/+1", up}, {cp + "/links/-1", down}} {
				blob, err := ragged.EncodeBlob(side.pairs, 2)
				if err != nil {
					return &WriteError{Key: s.prefix + side.path + "/" + key, Err: err}
				}
				if err := s.blob(ctx, s.zstd, side.path, key, blob); err != nil {
					return err
				}
			}
			return nil
		})
	}
	s.after = append(s.after, func(ctx context.Context) error {
		var upRec, downRec []int64
		half := d + 1
		for _, rec := range cross {
			for j := 0; j+2*half <= len(rec); j += 2 * half {
				upRec = append(upRec, rec[j:j+2*half]...)
				downRec = append(downRec, rec[j+half:j+2*half]...)
				downRec = append(downRec, rec[j:j+half]...)
			}
		}
		if len(upRec) == 0 {
			return nil
		}
		for _, side := range []struct {
			lp    string
			delta int
			flat  []int64
		}{{fp, 1, upRec}, {cp, -1, downRec}} {
			path := side.lp + "/cross_chunk_links/" + deltaSeg(side.delta)
			s.group(path, stylePretty, obj{{"zv_array", "cross_chunk_links"}, {"level_delta", side.delta}, {"link_width", 2},
				{"num_links", len(side.flat) / (2 * half)}, {"sid_ndim", d}})
			if err := s.blob(ctx, s.zstd, path, "data", appendInt64s(make([]byte, 0, 8*len(side.flat)), side.flat)); err != nil {
				return err
			}
		}
		return nil
	})
}
