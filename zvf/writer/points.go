package writer

import (
	"context"
	"slices"

	"github.com/zvfserve/zvfserve/zvf/storage"
)

// PointCloud is the input of WritePoints. Positions holds D values per
// vertex (D = len(Options.ChunkShape)).
type PointCloud struct {
	Positions  []float32
	Attributes []Attribute // per vertex
	// ObjectIDs (optional) assigns each vertex to an object >= 0. With
	// object ids, object attributes or groups, fragments are per object
	// (one per object present in a chunk); without, fragments are bins.
	ObjectIDs        []int64
	ObjectAttributes []Attribute // one row per object id 0..max
	Groups           [][]int64   // group g lists member object ids
	GroupAttributes  []Attribute // one row per group
}

// maxBinsPerChunk caps the fragments of a binned point chunk: every bin
// gets a fragment even when empty, so the fragment index grows with it.
const maxBinsPerChunk = 1 << 16

// WritePoints writes a point-cloud store under prefix (levels 0..len(o.Pyramid)).
func WritePoints(ctx context.Context, w storage.Writer, prefix string, pc *PointCloud, o Options) (*Summary, error) {
	g, err := prepare(&o, pc.Positions, "point_cloud", "implicit_sequential")
	if err != nil {
		return nil, err
	}
	n := len(pc.Positions) / g.d
	if err := checkAttrs("PointCloud.Attributes", pc.Attributes, n); err != nil {
		return nil, err
	}
	ids := pc.ObjectIDs
	objects := ids != nil || pc.ObjectAttributes != nil || pc.Groups != nil
	if objects && ids == nil {
		// The reference makes every point its own object.
		ids = make([]int64, n)
		for i := range ids {
			ids[i] = int64(i)
		}
	}
	l := &level{pos: pc.Positions, vattrs: pc.Attributes, channelTag: true, auxUnbatched: true}
	if objects {
		nobj, err := checkObjectIDs("PointCloud.ObjectIDs", ids, n)
		if err != nil {
			return nil, err
		}
		if err := checkObjectSide(pc.ObjectAttributes, pc.Groups, pc.GroupAttributes, nobj); err != nil {
			return nil, err
		}
		l.chunks, l.manifests = chunkByObject(g, pc.Positions, ids, nobj)
		l.hasObjects = true
		l.oattrs, l.groups, l.gattrs = pc.ObjectAttributes, pc.Groups, pc.GroupAttributes
	} else {
		p := int64(1)
		for _, b := range g.bpc {
			p *= b
			if p > maxBinsPerChunk {
				return nil, inputErr("Options.BinShape", -1, "more than %d bins per chunk", maxBinsPerChunk)
			}
		}
		l.chunks = chunkByBin(g, pc.Positions, int(p))
	}
	return run(ctx, w, prefix, &o, g, l)
}

// checkObjectIDs validates per-vertex object ids and returns max+1.
func checkObjectIDs(field string, ids []int64, n int) (int, error) {
	if len(ids) != n {
		return 0, inputErr(field, -1, "%d ids for %d vertices", len(ids), n)
	}
	maxID := int64(-1)
	for i, id := range ids {
		// OIDs are dense manifest slots; cap them so num_objects cannot
		// exceed the vertex count by more than the slots it can hold.
		if id < 0 || id > int64(n)+manifestBucket*64 {
			return 0, inputErr(field, i, "object id %d out of range [0, %d]", id, int64(n)+manifestBucket*64)
		}
		maxID = max(maxID, id)
	}
	return int(maxID + 1), nil
}

// graphObjects checks the per-vertex object ids of a graph or mesh (nil:
// every vertex in object 0) and the object attributes, and returns the ids
// and the number of objects.
func graphObjects(field string, ids []int64, n int, oattrs []Attribute) ([]int64, int, error) {
	if ids == nil {
		ids = make([]int64, n)
	}
	nobj, err := checkObjectIDs(field, ids, n)
	if err != nil {
		return nil, 0, err
	}
	return ids, nobj, checkObjectSide(oattrs, nil, nil, nobj)
}

// checkObjectSide validates object attributes, groups and group attributes
// against the object count.
func checkObjectSide(oattrs []Attribute, groups [][]int64, gattrs []Attribute, nobj int) error {
	if err := checkAttrs("ObjectAttributes", oattrs, nobj); err != nil {
		return err
	}
	for gi, members := range groups {
		for _, m := range members {
			if m < 0 || m >= int64(nobj) {
				return inputErr("Groups", gi, "member object %d out of range [0, %d)", m, nobj)
			}
		}
	}
	return checkAttrs("GroupAttributes", gattrs, len(groups))
}

// chunkByBin lays out an undifferentiated point cloud: chunk = bin // bins
// per chunk, one range fragment per bin in row-major order (empty bins
// included), rows in input order inside a bin.
func chunkByBin(g *geom, pos []float32, p int) []chunkData {
	d := g.d
	frag := make([]int32, len(pos)/d) // bin of each vertex inside its chunk
	bk := groupBy(len(pos)/d, func(i int) coords {
		c, f := g.chunkOfBin(cellOf(pos[i*d:i*d+d], g.bin))
		frag[i] = int32(f)
		return c
	})
	chunks := make([]chunkData, len(bk.keys))
	counts := make([]int64, p)
	for ci, k := range bk.keys {
		rows := bk.order[bk.start[ci]:bk.start[ci+1]]
		fr := make([]int32, len(rows))
		clear(counts)
		for j, r := range rows {
			fr[j] = frag[r]
			counts[fr[j]]++
		}
		// Stable counting sort of the chunk's rows by fragment.
		next := make([]int64, p)
		var acc int64
		for f, c := range counts {
			next[f] = acc
			acc += c
		}
		sorted := make([]uint32, len(rows))
		for j, r := range rows {
			sorted[next[fr[j]]] = r
			next[fr[j]]++
		}
		chunks[ci] = chunkData{c: k, rows: sorted, frags: slices.Clone(counts)}
	}
	return chunks
}

// chunkByObject lays out vertices with object ids: chunk = floor(p/chunk),
// one fragment per object present (ascending id), rows in input order
// inside a fragment. manifests[oid] lists the object's fragments in chunk
// order.
func chunkByObject(g *geom, pos []float32, ids []int64, nobj int) ([]chunkData, [][]fragRef) {
	bk := byCell(pos, g.d, g.chunk)
	chunks := make([]chunkData, len(bk.keys))
	manifests := make([][]fragRef, nobj)
	for ci, k := range bk.keys {
		rows := slices.Clone(bk.order[bk.start[ci]:bk.start[ci+1]])
		slices.SortStableFunc(rows, func(a, b uint32) int {
			switch {
			case ids[a] < ids[b]:
				return -1
			case ids[a] > ids[b]:
				return 1
			}
			return 0
		})
		var frags []int64
		for j := 0; j < len(rows); {
			e := j
			for e < len(rows) && ids[rows[e]] == ids[rows[j]] {
				e++
			}
			oid := ids[rows[j]]
			manifests[oid] = append(manifests[oid], fragRef{int32(ci), int32(len(frags))})
			frags = append(frags, int64(e-j))
			j = e
		}
		chunks[ci] = chunkData{c: k, rows: rows, frags: frags}
	}
	return chunks, manifests
}
