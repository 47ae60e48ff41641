package zvf

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/zvfserve/zvfserve/zvf/storage"
)

// holeCheck finds, for a box answer, chunks the level's listing lacked
// (an object store's listing behind its writes) before the answer goes
// out short without a word. checkListing sees an incomplete listing only
// once every listed chunk has been read, and only where the level
// declares its vertex_count; a box reads the chunks it covers. So the
// cells a box covers that the listing lacks ("holes") are asked for: a
// Stat of each one's zarr.json, a read-after-write the backend answers
// as it stands, not as its listing does. A hole found absent is
// remembered for the version; one found there makes the level's answers
// a *ListingError. It keeps a bit a cell of the store's declared bounds
// (with the listed chunks'), so only for levels of at most maxHoleCells
// cells; a box with more than maxBoxProbes holes left lists the level
// again instead (once a version), which no hole is then checked against.
// Where a cell cannot be asked for — past that grid (data beyond the
// declared bounds), on a larger grid, in a level packed into __shard_
// arrays (a chunk there has no zarr.json of its own) or chunked by
// attribute (a cell holds a chunk per attribute value, unknown ahead) —
// a box that may meet an unlisted chunk lists the level again instead,
// once a version.
type holeCheck struct {
	once sync.Once
	mode holeMode // see initHoles
	dims int
	lo   [maxDims]int64 // the grid's first cell per axis
	n    [maxDims]int64 // its cells per axis
	// known (holesByCell): a bit per grid cell (row-major, last axis
	// fastest), set when the cell is listed or found absent; open counts
	// the cells neither.
	known []atomic.Uint64
	open  atomic.Int64
}

// holeMode is how a level's box answers look for unlisted chunks.
type holeMode uint8

const (
	holesOff    holeMode = iota // not looked for: a listing that cannot lag, or a store that does not change
	holesByCell                 // the grid's cells asked for, a bit each; past the grid, relisted
	holesByList                 // a box meeting an unlisted cell (or past the grid) relists
	holesAlways                 // any box relists (attribute-chunked, or no grid at all)
)

const (
	// maxHoleCells bounds a checked level's grid (128 KiB of bits).
	maxHoleCells = 1 << 20
	// maxBoxProbes bounds the Stats one answer makes.
	maxBoxProbes = 64
	// probesAtOnce: Stats in flight for one answer.
	probesAtOnce = 16
)

// initHoles sets the check up, for levels whose chunks come from a
// listing (0.6/0.7 per-chunk arrays) of a store that may change while it
// is served: cell by cell where each cell's chunk has a zarr.json of its
// own and the grid is small enough, else by listing again.
func (l *Level) initHoles() {
	h := &l.holes
	d := l.s.dims
	y, ok := l.lay.(*layout07)
	if !ok || !l.s.watched || d > maxDims {
		return
	}
	h.mode = holesAlways
	if l.keyArity != d {
		return
	}
	var lo, hi [maxDims]int64
	for i := 0; i < d; i++ {
		lo[i], hi[i] = math.MaxInt64, math.MinInt64
	}
	if b := l.s.info.Bounds; len(b[0]) == d && len(b[1]) == d {
		for i := 0; i < d; i++ {
			a, z := math.Floor(b[0][i]/l.chunkShape[i]), math.Floor(b[1][i]/l.chunkShape[i])
			if !(a >= -1<<40 && z <= 1<<40 && a <= z) {
				return
			}
			lo[i], hi[i] = int64(a), int64(z)
		}
	}
	for _, k := range l.keys {
		for i := 0; i < d; i++ {
			lo[i], hi[i] = min(lo[i], k[i]), max(hi[i], k[i])
		}
	}
	cells := 1.0
	for i := 0; i < d; i++ {
		if lo[i] > hi[i] {
			return // neither bounds nor chunks
		}
		h.n[i] = hi[i] - lo[i] + 1
		cells *= float64(h.n[i])
	}
	h.dims, h.lo = d, lo
	if y.packed || cells > maxHoleCells {
		h.mode = holesByList
		return
	}
	h.known = make([]atomic.Uint64, (int64(cells)+63)/64)
	for _, k := range l.keys {
		h.mark(h.index(k))
	}
	h.open.Store(int64(cells) - int64(len(l.keys)))
	h.mode = holesByCell
}

// index is cell k's bit (k within the grid).
func (h *holeCheck) index(k []int64) int64 {
	x := int64(0)
	for i := 0; i < h.dims; i++ {
		x = x*h.n[i] + k[i] - h.lo[i]
	}
	return x
}

func (h *holeCheck) has(x int64) bool { return h.known[x>>6].Load()&(1<<(x&63)) != 0 }

// mark sets cell x's bit, reporting whether it was clear (so that two
// answers finding the same cell absent count it once).
func (h *holeCheck) mark(x int64) bool {
	bit := uint64(1) << (x & 63)
	return h.known[x>>6].Or(bit)&bit == 0
}

// checkHoles is the check for a box answer over [min, max]: nil, or the
// level's *ListingError, or the error that kept a hole from being asked
// for.
func (l *Level) checkHoles(ctx context.Context, min, max []float64) error {
	h := &l.holes
	h.once.Do(l.initHoles)
	// A listing taken again that agreed with the open's has answered for
	// every cell at once; asking cell by cell after it would only cost
	// each box a walk of its cells.
	if h.mode == holesOff || l.listed.relisted.Load() {
		return nil
	}
	if h.mode == holesAlways {
		return l.relistForBox(ctx, byBox)
	}
	var lo, hi [maxDims]int64
	for i := 0; i < h.dims; i++ {
		a, z := math.Floor(min[i]/l.chunkShape[i]), math.Floor(max[i]/l.chunkShape[i])
		first, last := float64(h.lo[i]), float64(h.lo[i]+h.n[i]-1)
		if a < first || z > last {
			// Past the declared bounds and every listed chunk: a chunk
			// there holds data the bounds say are not, and no bit stands
			// for its cell.
			return l.relistForBox(ctx, byBox)
		}
		lo[i], hi[i] = int64(a), int64(z)
	}
	if h.mode == holesByList {
		return l.relistIfUnlisted(ctx, min, max, &lo, &hi)
	}
	if h.open.Load() == 0 {
		return nil
	}
	var holes []Key
	var k [maxDims]int64
	copy(k[:], lo[:h.dims])
	for {
		if !h.has(h.index(k[:h.dims])) {
			if len(holes) == maxBoxProbes {
				return l.relistForBox(ctx, byBox)
			}
			holes = append(holes, Key(append([]int64(nil), k[:h.dims]...)))
		}
		i := h.dims - 1
		for ; i >= 0 && k[i] == hi[i]; i-- {
			k[i] = lo[i]
		}
		if i < 0 {
			break
		}
		k[i]++
	}
	if len(holes) == 0 {
		return nil
	}
	return l.probeHoles(ctx, holes)
}

// relistIfUnlisted lists the level again (once a version) when the box
// over grid cells lo … hi covers a cell no listed chunk is in: more
// cells than the listed chunks it meets (a chunk a cell on such levels).
func (l *Level) relistIfUnlisted(ctx context.Context, min, max []float64, lo, hi *[maxDims]int64) error {
	cells := 1.0
	for i := 0; i < l.holes.dims; i++ {
		cells *= float64(hi[i] - lo[i] + 1)
	}
	if cells > float64(len(l.keys)) || cells > float64(len(l.candidates(nil, min, max))) {
		return l.relistForBox(ctx, byBox)
	}
	return nil
}

// CheckListed is checkHoles for an answer that enumerates all of the
// level's chunks (its chunk list, a Neuroglancer spatial index): on a
// store that may change, the level is listed again once a version, and a
// chunk the open's listing lacked makes it the level's *ListingError.
func (l *Level) CheckListed(ctx context.Context) error {
	h := &l.holes
	h.once.Do(l.initHoles)
	if h.mode == holesOff || l.listed.relisted.Load() {
		return nil
	}
	return l.relistForBox(ctx, "a listing taken again for an answer listing every chunk")
}

// probeHoles asks for each hole's zarr.json: absent, it is marked known;
// there, the listing lacked it.
func (l *Level) probeHoles(ctx context.Context, holes []Key) error {
	h := &l.holes
	found := make([]bool, len(holes))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(probesAtOnce)
	for i, k := range holes {
		g.Go(func() error {
			_, err := l.s.st.Stat(gctx, join(join(join(l.path, "vertices"), k.String()), "zarr.json"))
			switch {
			case err == nil:
				found[i] = true
			case errors.Is(err, storage.ErrNotFound):
				if h.mark(h.index(k)) {
					h.open.Add(-1)
				}
			default:
				return l.s.wrap(kindOf(err), l.n, "vertices", k.String(), err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	var missing []string
	for i, f := range found {
		if f {
			missing = append(missing, holes[i].String())
		}
	}
	if len(missing) == 0 {
		return nil
	}
	c := &l.listed
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.bad.Load(); e != nil {
		return e
	}
	e := &ListingError{Store: l.s.name, Level: l.n, Missing: missing[0], Count: len(missing), NamedBy: "a box answer covering its cell"}
	l.listingFailed(e, missing)
	return e
}

// byBox names the listing a box answer has taken again.
const byBox = "a listing taken again for a box"

// relistForBox lists the level again for a box with too many holes to
// ask for, or holes it cannot ask for, once a version (the listing
// relisted marks); by says what asked, for the error.
func (l *Level) relistForBox(ctx context.Context, by string) error {
	c := &l.listed
	if e := c.bad.Load(); e != nil {
		return e
	}
	if c.relisted.Load() {
		return nil
	}
	if at := c.retryAt.Load(); at != 0 && l.s.st.Now().UnixNano() < at {
		return nil // the last listing failed: not yet
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.bad.Load(); e != nil {
		return e
	}
	if c.relisted.Load() {
		return nil
	}
	missing, err := l.relistMissing(ctx, l.lay.(relister))
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		// As checkListing: a backend failing listings (its reads
		// answering) must not fail every box, each listing again; the
		// answer goes out as listed, and the listing waits.
		n := c.failures.Add(1)
		wait := retryWait(n)
		c.retryAt.Store(l.s.st.Now().Add(wait).UnixNano())
		l.s.log.Warn("listing a level again for an answer failed; its answers go out as the open's listing has them, and the listing is tried again after a wait",
			"store", l.s.name, "level", l.n, "for", by, "err", err, "failures", n, "retry_in", wait)
		return nil
	}
	if len(missing) == 0 {
		return nil
	}
	e := &ListingError{Store: l.s.name, Level: l.n, Missing: missing[0], Count: len(missing), NamedBy: by}
	l.listingFailed(e, missing)
	return e
}
