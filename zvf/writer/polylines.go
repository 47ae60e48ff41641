package writer

import (
	"context"
	"slices"

	"github.com/zvfserve/zvfserve/zvf/storage"
)

// Polylines is the input of WritePolylines: polyline p is rows
// Offsets[p]..Offsets[p+1] of Positions (D values per row).
type Polylines struct {
	Positions        []float32
	Offsets          []int
	Attributes       []Attribute // per vertex
	ObjectAttributes []Attribute // per polyline
	Groups           [][]int64   // group g lists member polyline ids
	GroupAttributes  []Attribute
	// Polyline stores geometry type "polyline" instead of "streamline".
	Polyline bool
}

// binRun is one maximal stretch of a polyline inside one bin.
type binRun struct {
	start, n int
	chunk    coords
}

// WritePolylines writes a streamline (or polyline) store: fragments are
// the runs of consecutive vertices in one bin, manifests list a
// polyline's runs in path order, and consecutive runs in different chunks
// get a cross-chunk link record with vertex index 0 (§5.4).
func WritePolylines(ctx context.Context, w storage.Writer, prefix string, pl *Polylines, o Options) (*Summary, error) {
	kind := "streamline"
	if pl.Polyline {
		kind = "polyline"
	}
	g, err := prepare(&o, pl.Positions, kind, "implicit_sequential")
	if err != nil {
		return nil, err
	}
	d := g.d
	n := len(pl.Positions) / d
	np := len(pl.Offsets) - 1
	if np < 0 || pl.Offsets[0] != 0 || pl.Offsets[np] != n {
		return nil, inputErr("Polylines.Offsets", -1, "must run from 0 to the vertex count %d", n)
	}
	for p := range np {
		if pl.Offsets[p+1] < pl.Offsets[p] {
			return nil, inputErr("Polylines.Offsets", p+1, "offsets decrease")
		}
	}
	if err := checkAttrs("Polylines.Attributes", pl.Attributes, n); err != nil {
		return nil, err
	}
	if err := checkObjectSide(pl.ObjectAttributes, pl.Groups, pl.GroupAttributes, np); err != nil {
		return nil, err
	}

	// Split every polyline into bin runs; remember each run's chunk.
	var runs []binRun
	firstRun := make([]int, np+1)
	for p := range np {
		firstRun[p] = len(runs)
		var prev coords
		for i := pl.Offsets[p]; i < pl.Offsets[p+1]; i++ {
			b := cellOf(pl.Positions[i*d:i*d+d], g.bin)
			if i == pl.Offsets[p] || b != prev {
				c, _ := g.chunkOfBin(b)
				runs = append(runs, binRun{start: i, chunk: c})
				prev = b
			}
			runs[len(runs)-1].n++
		}
	}
	firstRun[np] = len(runs)

	// Chunks in sorted order; fragments in (polyline, path) order.
	bk := groupBy(len(runs), func(r int) coords { return runs[r].chunk })
	fragOf := make([]fragRef, len(runs))
	l := &level{pos: pl.Positions, vattrs: pl.Attributes, hasObjects: true, cclGroup: true, cclWidth: 2,
		oattrs: pl.ObjectAttributes, groups: pl.Groups, gattrs: pl.GroupAttributes}
	l.chunks = make([]chunkData, len(bk.keys))
	for ci, k := range bk.keys {
		rs := bk.order[bk.start[ci]:bk.start[ci+1]]
		total := 0
		for _, r := range rs {
			total += runs[r].n
		}
		c := chunkData{c: k, rows: make([]uint32, 0, total), frags: make([]int64, len(rs))}
		for f, r := range rs {
			for i := range runs[r].n {
				c.rows = append(c.rows, uint32(runs[r].start+i))
			}
			c.frags[f] = int64(runs[r].n)
			fragOf[r] = fragRef{int32(ci), int32(f)}
		}
		l.chunks[ci] = c
	}
	l.manifests = make([][]fragRef, np)
	for p := range np {
		l.manifests[p] = slices.Clone(fragOf[firstRun[p]:firstRun[p+1]])
		for r := firstRun[p]; r+1 < firstRun[p+1]; r++ {
			a, b := runs[r].chunk, runs[r+1].chunk
			if a != b {
				l.ccl = append(l.ccl, a[:d]...)
				l.ccl = append(l.ccl, 0)
				l.ccl = append(l.ccl, b[:d]...)
				l.ccl = append(l.ccl, 0)
			}
		}
	}
	return run(ctx, w, prefix, &o, g, l)
}
