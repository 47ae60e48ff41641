package zvf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/zvfserve/zvfserve/zvf/manifest"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/zarr"
)

// Problem is one finding of Validate, however many places it was found
// at: one broken chunk is one problem, not one per object that names it.
type Problem struct {
	Severity string `json:"severity"` // "error" or "warning"
	Check    int    `json:"check"`    // validation level that found it (1-5)
	Path     string `json:"path"`     // where it was found first: a store path, or LEVEL/objects/ID for an object
	Message  string `json:"message"`
	// Count is how many places it was found at; Paths, when more than one,
	// the first few of them (Path first).
	Count int      `json:"count"`
	Paths []string `json:"paths,omitempty"`
}

// problemPaths is how many of a problem's paths a report keeps.
const problemPaths = 5

// Report is the outcome of Validate.
type Report struct {
	// ZVVersion and Layout say which format was checked (empty when the
	// store did not open).
	ZVVersion string    `json:"zv_version,omitempty"`
	Layout    string    `json:"layout,omitempty"`
	Levels    int       `json:"levels_checked"`
	Problems  []Problem `json:"problems"`
	Chunks    int       `json:"chunks_checked"`
	Objects   int64     `json:"objects_checked"`

	index map[problemKey]int // Problems by what they say
}

type problemKey struct {
	severity string
	check    int
	message  string
}

// OK reports whether no error was found.
func (r *Report) OK() bool {
	for _, p := range r.Problems {
		if p.Severity == "error" {
			return false
		}
	}
	return true
}

// add records a finding; one that says what an earlier one said (the
// same severity, check and message) is that problem found at another path.
func (r *Report) add(sev string, check int, path, format string, a ...any) {
	k := problemKey{sev, check, fmt.Sprintf(format, a...)}
	if i, ok := r.index[k]; ok {
		p := &r.Problems[i]
		p.Count++
		if p.Paths == nil {
			p.Paths = []string{p.Path}
		}
		if len(p.Paths) < problemPaths {
			p.Paths = append(p.Paths, path)
		}
		return
	}
	if r.index == nil {
		r.index = map[problemKey]int{}
	}
	r.index[k] = len(r.Problems)
	r.Problems = append(r.Problems, Problem{Severity: sev, Check: check, Path: path, Message: k.message, Count: 1})
}

// Findings counts the places problems were found at (each problem's Count).
func (r *Report) Findings() int {
	n := 0
	for _, p := range r.Problems {
		n += p.Count
	}
	return n
}

var validConventions = map[string]map[string]bool{
	"links_convention":        {"explicit": true, "implicit_sequential": true, "implicit_sequential_with_branches": true},
	"object_index_convention": {"standard": true, "identity": true},
	"cross_chunk_strategy":    {"boundary_deduplication": true, "explicit_links": true, "both": true},
}

// Validate checks a store the way the reference validator's levels do
// (1 structure, 2 metadata, 3 consistency, 4 conventions, 5 pyramid) plus
// every fragment-index and manifest invariant, and reports each problem
// with its path instead of stopping at the first. progress, if not nil, is
// called as chunks are checked.
func Validate(ctx context.Context, st storage.Store, name string, upTo int, progress func(done, total int)) *Report {
	r := &Report{}
	if upTo < 1 || upTo > 5 {
		upTo = 5
	}
	// 1: structure.
	raw, err := storage.ReadAll(ctx, st, "zarr.json", zarr.MaxMetadataBytes)
	if err != nil {
		r.add("error", 1, "zarr.json", "root metadata unreadable: %v", errors.Unwrap(err))
		return r
	}
	lst, err := st.List(ctx, "")
	if err != nil {
		r.add("error", 1, "", "cannot list the store: %v", err)
		return r
	}
	var levelNames []int
	for _, p := range lst.Prefixes {
		n := p[:len(p)-1]
		if v, err := strconv.Atoi(n); err == nil && strconv.Itoa(v) == n {
			levelNames = append(levelNames, v)
			for _, a := range []string{"vertices", "vertex_fragments"} {
				sub, err := st.List(ctx, p+a+"/")
				if err == nil && len(sub.Prefixes)+len(sub.Keys) == 0 {
					sev := "error"
					if a == "vertex_fragments" {
						sev = "warning"
					}
					r.add(sev, 1, p+a, "missing")
				}
			}
			if _, err := st.Stat(ctx, p+"zarr.json"); err != nil {
				r.add("warning", 1, p+"zarr.json", "level metadata missing")
			}
		}
	}
	if len(levelNames) == 0 {
		r.add("error", 1, "", "no integer-named resolution level")
	}
	if upTo >= 2 {
		validateRootAttrs(r, raw)
	}
	if !r.OK() {
		return r
	}
	s, err := Open(ctx, st, Options{Name: name})
	if err != nil {
		r.add("error", 2, openErrorPath(err), "%v", err)
		return r
	}
	r.ZVVersion, r.Layout = s.Info().ZVVersion, s.Info().Layout
	if upTo >= 3 {
		validateConsistency(ctx, s, r, progress)
	}
	if upTo >= 4 {
		validateConventions(s, r)
	}
	if upTo >= 5 {
		validatePyramid(s, r)
	}
	r.Levels = upTo
	return r
}

func validateRootAttrs(r *Report, raw []byte) {
	var doc struct {
		Attributes map[string]json.RawMessage `json:"attributes"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		r.add("error", 2, "zarr.json", "not JSON: %v", err)
		return
	}
	var zv map[string]json.RawMessage
	if err := json.Unmarshal(doc.Attributes["zarr_vectors"], &zv); err != nil || zv == nil {
		r.add("error", 2, "zarr.json", "attributes.zarr_vectors missing or not an object")
		return
	}
	for key, valid := range validConventions {
		if v, ok := zv[key]; ok {
			var s string
			if json.Unmarshal(v, &s) != nil || !valid[s] {
				r.add("error", 2, "zarr.json", "%s %s is not one of the allowed values", key, v)
			}
		}
	}
	var cs, bb []float64
	_ = json.Unmarshal(zv["chunk_shape"], &cs)
	if b, ok := zv["base_bin_shape"]; ok {
		if err := json.Unmarshal(b, &bb); err != nil || len(bb) != len(cs) {
			r.add("error", 2, "zarr.json", "base_bin_shape %s does not match chunk_shape %v", b, cs)
			return
		}
		for i := range bb {
			ratio := cs[i] / bb[i]
			if !(bb[i] > 0) || math.Abs(ratio-math.Round(ratio)) > 1e-9 {
				r.add("error", 2, "zarr.json", "base_bin_shape %v does not divide chunk_shape %v", bb, cs)
				return
			}
		}
	}
	var bounds [][]float64
	if err := json.Unmarshal(zv["bounds"], &bounds); err != nil || len(bounds) != 2 || len(bounds[0]) != len(cs) || len(bounds[1]) != len(cs) {
		r.add("error", 2, "zarr.json", "bounds %s is not [[min…],[max…]] with one number per axis", zv["bounds"])
		return
	}
	// bounds is the data's inclusive box: a min past its max holds nothing,
	// yet it is what the catalog, the viewer and Neuroglancer's info show.
	for i := range bounds[0] {
		if bounds[0][i] > bounds[1][i] {
			r.add("error", 2, "zarr.json", "bounds: min %g is greater than max %g on axis %d", bounds[0][i], bounds[1][i], i)
		}
	}
}

// openErrorPath is where a store that does not open failed: the array or
// chunk its error names, else the root's metadata.
func openErrorPath(err error) string {
	var ze *Error
	if !errors.As(err, &ze) || ze.Level < 0 {
		return "zarr.json"
	}
	p := strconv.Itoa(ze.Level)
	if ze.Array != "" {
		p += "/" + ze.Array
	}
	if ze.Chunk != "" {
		p += "/" + ze.Chunk
	}
	return p
}

// validateConsistency decodes every chunk and manifest.
func validateConsistency(ctx context.Context, s *Store, r *Report, progress func(int, int)) {
	total := 0
	for _, l := range s.levels {
		total += len(l.keys)
	}
	done := 0
	// Each level's chunks' rows, which link records are checked against
	// once every level's chunks are read (cross-level records name rows
	// of the next).
	chunkRows := map[int]map[string]int{}
	for _, l := range s.levels {
		var rows int64
		chunkRows[l.n] = make(map[string]int, len(l.keys))
		ob := newOutsideBounds(l)
		for _, k := range l.keys {
			path := fmt.Sprintf("%d/vertices/%s", l.n, k)
			cv, err := l.vertices(ctx, k)
			done++
			r.Chunks++
			if progress != nil {
				progress(done, total)
			}
			if err != nil {
				r.add("error", 3, path, "%v", err)
				continue
			}
			rows += int64(cv.rows)
			chunkRows[l.n][k.String()] = cv.rows
			validateCell(l, k, cv, r, path)
			validateBins(l, k, cv, r)
			ob.add(l, k, cv)
			if cv.frags == nil {
				r.add("warning", 3, fmt.Sprintf("%d/vertex_fragments/%s", l.n, k), "missing")
			} else if l.binPrefilter && int64(cv.frags.Len()) > prod(l.bpc) {
				r.add("error", 3, fmt.Sprintf("%d/vertex_fragments/%s", l.n, k), "%d fragments, more than the %d bins of a chunk", cv.frags.Len(), prod(l.bpc))
			}
			for _, a := range l.vattrs {
				if _, _, err := l.attribute(ctx, a, k, cv.rows); err != nil && !errors.Is(err, ErrNotFound) {
					r.add("error", 3, fmt.Sprintf("%d/vertex_attributes/%s/%s", l.n, a.Name, k), "%v", err)
				}
			}
			if l.intra != "" {
				if _, err := l.links0(ctx, k); err != nil {
					r.add("error", 3, fmt.Sprintf("%d/%s/%s", l.n, l.intra, k), "%v", err)
				}
			}
		}
		if l.meta.VertexCount != rows {
			r.add("error", 3, fmt.Sprintf("%d/zarr.json", l.n), "vertex_count %d, chunks hold %d", l.meta.VertexCount, rows)
		}
		ob.report(l, rows, r)
	}
	for _, l := range s.levels {
		if y, ok := l.lay.(*layout09); ok {
			validateNonempty(ctx, l, y, r)
			validateHasPerm(l, y, r)
		}
		for _, d := range l.linkDeltas {
			validateCrossLinks(ctx, l, d, chunkRows, r)
		}
		if l.objects != nil {
			validateManifests(ctx, l, r)
		}
		validateObjectAttrsAndGroups(ctx, l, r)
		validateLinkAttrs(ctx, l, r)
	}
}

// validateCell checks that chunk k's rows lie in the cell its key names,
// by the test the query path chooses chunks with (a box reads the chunks
// whose cells floor(min/chunk_shape) … floor(max/chunk_shape) it spans):
// a row that fails it is missed by every box holding it that does not
// touch its chunk's cell. One problem a chunk: how many rows, and the
// farthest (its distance from the closed cell, 0 for a row on the cell's
// upper face, which belongs to the next).
func validateCell(l *Level, k Key, cv *chunkVerts, r *Report, path string) {
	d := l.s.dims
	off := l.keyArity - d
	out, worst, far := 0, -1.0, 0
	for row := 0; row < cv.rows; row++ {
		dist, in := 0.0, true
		for i := 0; i < d; i++ {
			v := l.vdt.At(cv.data, row*d+i).Float64()
			c0 := float64(k[off+i]) * l.chunkShape[i]
			if math.Floor(v/l.chunkShape[i]) == float64(k[off+i]) {
				continue
			}
			in = false
			switch {
			case math.IsNaN(v) || math.IsInf(v, 0):
				dist = math.Inf(1)
			case v < c0:
				dist = max(dist, c0-v)
			default:
				dist = max(dist, v-(c0+l.chunkShape[i]))
			}
		}
		if !in {
			out++
			if dist > worst {
				worst, far = dist, row
			}
		}
	}
	if out == 0 {
		return
	}
	cell := make([]string, d)
	at := make([]string, d)
	for i := 0; i < d; i++ {
		c0 := float64(k[off+i]) * l.chunkShape[i]
		cell[i] = fmt.Sprintf("[%g, %g)", c0, c0+l.chunkShape[i])
		at[i] = fmt.Sprintf("%g", l.vdt.At(cv.data, far*d+i).Float64())
	}
	r.add("error", 3, path, "%d of %d rows lie outside the chunk's cell %s (farthest %g from it: row %d at (%s)); a box that holds such a row but not the cell does not find it",
		out, cv.rows, strings.Join(cell, " × "), worst, far, strings.Join(at, ", "))
}

// outsideBounds counts a level's rows outside the store's declared bounds
// (the data's inclusive box, which the catalog, the viewer and
// Neuroglancer's info show): one problem a level, with the farthest row.
type outsideBounds struct {
	lo, hi []float64 // nil: no usable bounds to check against
	out    int64
	worst  float64
	at     []float64
	chunk  Key
}

func newOutsideBounds(l *Level) *outsideBounds {
	b := l.s.info.Bounds
	d := l.s.dims
	if len(b[0]) != d || len(b[1]) != d {
		return &outsideBounds{}
	}
	ob := &outsideBounds{lo: make([]float64, d), hi: make([]float64, d), worst: -1}
	for i := 0; i < d; i++ {
		if !(b[0][i] <= b[1][i]) {
			return &outsideBounds{} // reported at check 2
		}
		ob.lo[i], ob.hi[i] = b[0][i], b[1][i]
		if l.vdt.Kind == zarr.KindFloat && l.vdt.Size == 4 {
			// Bounds written from float64 input may fall between two
			// float32 values; the rows stored round to either side.
			ob.lo[i] = float64(below32(b[0][i]))
			ob.hi[i] = float64(above32(b[1][i]))
		}
	}
	return ob
}

func (ob *outsideBounds) add(l *Level, k Key, cv *chunkVerts) {
	if ob.lo == nil {
		return
	}
	d := l.s.dims
	for row := 0; row < cv.rows; row++ {
		dist := 0.0
		for i := 0; i < d; i++ {
			v := l.vdt.At(cv.data, row*d+i).Float64()
			switch {
			case math.IsNaN(v):
				dist = math.Inf(1)
			case v < ob.lo[i]:
				dist = max(dist, ob.lo[i]-v)
			case v > ob.hi[i]:
				dist = max(dist, v-ob.hi[i])
			}
		}
		if dist == 0 {
			continue
		}
		ob.out++
		if dist > ob.worst {
			ob.worst, ob.chunk = dist, k
			ob.at = ob.at[:0]
			for i := 0; i < d; i++ {
				ob.at = append(ob.at, l.vdt.At(cv.data, row*d+i).Float64())
			}
		}
	}
}

func (ob *outsideBounds) report(l *Level, rows int64, r *Report) {
	if ob.out == 0 {
		return
	}
	b := l.s.info.Bounds
	bits := 64
	if l.vdt.Kind == zarr.KindFloat && l.vdt.Size <= 4 {
		bits = 32 // the row as stored, not its float64 widening
	}
	at := make([]string, len(ob.at))
	for i, v := range ob.at {
		at[i] = strconv.FormatFloat(v, 'g', -1, bits)
	}
	r.add("warning", 3, fmt.Sprintf("%d/vertices/%s", l.n, ob.chunk), "%d of %d rows of level %d lie outside the store's bounds %v – %v (farthest %s from them: (%s)); bounds are the data's inclusive box, which the catalog, the viewer and Neuroglancer sources show",
		ob.out, rows, l.n, b[0], b[1], strconv.FormatFloat(ob.worst, 'g', -1, bits), strings.Join(at, ", "))
}

// validateBins checks, on a bin-prefiltered level whose chunk k is read
// through its fragment index (fragment f = bin f), that each fragment's
// rows lie in its bin's closed cell: a box reads only the bins whose
// cells it overlaps (boxBins), so a row filed in another bin of its chunk
// is missed by a box around it that does not reach that bin. (Bins found
// from the rows themselves, cv.bins, hold only rows in their cells.) One
// problem a chunk: how many rows and fragments, and the farthest row.
func validateBins(l *Level, k Key, cv *chunkVerts, r *Report) {
	d := l.s.dims
	if cv.bins != nil || !l.binsUsable(cv) || len(k) != d || d > maxDims {
		return
	}
	var lo, hi, flo, fhi [maxDims]float64
	out, frags, worst, far, farFrag := 0, 0, -1.0, 0, 0
	for f := 0; f < cv.frags.Len(); f++ {
		start, count, _ := cv.frags.Range(f)
		l.binBox(k, f, lo[:d], hi[:d])
		bad := 0
		for row := int(start); row < int(start+count); row++ {
			dist, in := 0.0, true
			for i := 0; i < d; i++ {
				v := l.vdt.At(cv.data, row*d+i).Float64()
				switch {
				case v >= lo[i] && v <= hi[i]:
					continue
				case math.IsNaN(v):
					dist = math.Inf(1)
				case v < lo[i]:
					dist = max(dist, lo[i]-v)
				default:
					dist = max(dist, v-hi[i])
				}
				in = false
			}
			if !in {
				bad++
				if dist > worst {
					worst, far, farFrag = dist, row, f
					flo, fhi = lo, hi
				}
			}
		}
		if bad > 0 {
			out += bad
			frags++
		}
	}
	if out == 0 {
		return
	}
	cell := make([]string, d)
	at := make([]string, d)
	for i := 0; i < d; i++ {
		cell[i] = fmt.Sprintf("[%g, %g]", flo[i], fhi[i])
		at[i] = fmt.Sprintf("%g", l.vdt.At(cv.data, far*d+i).Float64())
	}
	r.add("error", 3, fmt.Sprintf("%d/vertex_fragments/%s", l.n, k), "%d of %d rows lie outside the cell of the bin their fragment names (%d of %d fragments; farthest %g from it: row %d of fragment %d, whose bin's cell is %s, at (%s)); a box that holds such a row but not that bin's cell does not find it",
		out, cv.rows, frags, cv.frags.Len(), worst, far, farFrag, strings.Join(cell, " × "), strings.Join(at, ", "))
}

// validateLinkAttrs reads each link attribute's cell for every links cell
// holding rows, as an answer asking for it does: a cell that is not a row
// per link row fails those answers (an error); one missing leaves its
// links without values (a warning).
func validateLinkAttrs(ctx context.Context, l *Level, r *Report) {
	for _, name := range slices.Sorted(maps.Keys(l.lunserved)) {
		r.add("warning", 3, fmt.Sprintf("%d/link_attributes/%s/0", l.n, name), "%v: left out of answers", l.lunserved[name])
	}
	if len(l.lattrs) == 0 {
		return
	}
	var cells []linkRef
	if l.intra != "" {
		for _, k := range l.keys {
			cells = append(cells, linkRef{seg: l.intraSegment(), cell: k})
		}
	}
	if y, ok := l.lay.(*layout09); ok && y.links[0] != nil {
		for _, seg := range y.links[0].segs {
			if seg.intra {
				continue
			}
			for i := range seg.grid.cells {
				if seg.grid.present[seg.grid.cells[i]] {
					cells = append(cells, linkRef{seg: seg.name, cell: seg.grid.cellKeys[i]})
				}
			}
		}
	}
	for _, ref := range cells {
		n, err := l.linkRows(ctx, ref)
		if err != nil || n == 0 {
			continue // the links' own problem, reported with them
		}
		for _, a := range l.lattrs {
			path := fmt.Sprintf("%d/%s/%s", l.n, l.linkAttrFamily(a, ref.seg), ref.cell)
			col, err := l.edgeColumns(ctx, []*linkAttrMeta{a}, []linkRef{ref})
			switch {
			case err != nil:
				r.add("error", 3, path, "%v", err)
			case col[0].Valid != nil:
				r.add("warning", 3, path, "missing: the links cell's %d rows have no %s values", n, a.Name)
			}
		}
	}
}

// validateObjectAttrsAndGroups reads each object attribute and the groups
// as an object or group request does: what fails those requests is a
// problem of the array.
func validateObjectAttrsAndGroups(ctx context.Context, l *Level, r *Report) {
	for _, a := range l.oattrs {
		if _, _, err := l.objectAttrData(ctx, a); err != nil {
			r.add("error", 3, fmt.Sprintf("%d/object_attributes/%s", l.n, a.Name), "%v", err)
		}
	}
	path := fmt.Sprintf("%d/groups", l.n)
	g, err := l.groups(ctx)
	switch {
	case errors.Is(err, ErrNotFound) && l.numGroups == 0:
	case err != nil:
		r.add("error", 3, path, "%v", err)
	default:
		if err := l.checkGroupCount(g); err != nil {
			r.add("error", 3, path, "%v", err)
		}
	}
}

// validateNonempty reports, per chunk-grid array of a 0.9 level, the
// stored cells holding bytes that its nonempty_chunks leaves out.
func validateNonempty(ctx context.Context, l *Level, y *layout09, r *Report) {
	families := make([]string, 0, len(y.fams))
	for f := range y.fams {
		families = append(families, f)
	}
	sort.Strings(families)
	for _, f := range families {
		path := fmt.Sprintf("%d/%s", l.n, f)
		cells, err := y.unlisted(ctx, y.fams[f])
		switch {
		case err != nil:
			r.add("error", 3, path, "listing its stored cells: %v", err)
		case len(cells) > 0:
			r.add("error", 3, path, "nonempty_chunks leaves out %d stored cells holding bytes (%s), which no answer reads", len(cells), strings.Join(cells[:min(len(cells), 5)], ", "))
		}
	}
}

// validateHasPerm warns where a links array's has_perm, which the reader
// trusts for the width of its rows, disagrees with the format's rule
// (links_has_perm): such rows are misread wherever their counts fit.
func validateHasPerm(l *Level, y *layout09, r *Report) {
	for _, d := range l.linkDeltas {
		f := y.links[d]
		if f == nil {
			continue
		}
		for _, seg := range f.segs {
			if want := !seg.intra && f.delta == 0 && (f.duplicate || !f.directed); seg.hasPerm != want {
				r.add("warning", 3, fmt.Sprintf("%d/%s", l.n, seg.family), "has_perm %v, where the format's rule (not intra-chunk, delta 0, store duplicate or undirected) gives %v: its rows may be misread", seg.hasPerm, want)
			}
		}
	}
}

// validateCrossLinks checks that every cross-chunk (or cross-level) record
// of delta names chunks the levels hold and rows those chunks hold (the
// server refuses a record naming a row past its chunk as corrupt);
// chunkRows holds the rows of each level's chunks that could be read.
func validateCrossLinks(ctx context.Context, l *Level, d int, chunkRows map[int]map[string]int, r *Report) {
	recs, err := l.lay.crossLinks(ctx, d, nil)
	path := fmt.Sprintf("%d/%s", l.n, l.crossFamily(d))
	if err != nil {
		r.add("error", 3, path, "%v", err)
		return
	}
	for i, rec := range recs {
		for k, ep := range rec {
			n := l.n
			if k > 0 {
				n += d // endpoints after the first are at level n+delta
			}
			t, err := l.s.Level(n)
			if err != nil {
				continue // a cross-level family to no level fails crossLinks
			}
			// The record and its row go in the path, so that a family broken
			// the same way throughout is one problem a chunk, counted, not
			// one a record.
			ks := Key(ep.Chunk).String()
			at := fmt.Sprintf("%s record %d", path, i)
			if !t.hasKey(Key(ep.Chunk)) {
				r.add("error", 3, at, "records name chunk %s of level %d, which does not exist", ks, n)
				continue
			}
			if rows, ok := chunkRows[n][ks]; ok && ep.Row >= int64(rows) {
				r.add("error", 3, fmt.Sprintf("%s (row %d)", at, ep.Row), "records name rows past chunk %s of level %d, which holds %d rows", ks, n, rows)
			}
		}
	}
}

// validateManifests resolves every object's manifest. It walks what is
// stored (eachManifest), not the rows num_objects declares: rows that
// hold the array's fill value, stored or not, are one manifest checked
// once and counted.
func validateManifests(ctx context.Context, l *Level, r *Report) {
	visit := func(id int64, blocks []manifest.Block) error {
		r.Objects++
		if _, err := l.manifestOf(ctx, id, blocks); err != nil {
			// The object is the path, so that objects failing for one
			// reason (a broken chunk they name) are one problem.
			r.add("error", 3, fmt.Sprintf("%d/objects/%d", l.n, id), "its manifest does not resolve: %v", err)
		}
		return nil
	}
	again := func(row, n int64, blocks []manifest.Block) error {
		r.Objects += n
		id, err := l.objectAt(ctx, row) // the run's first object (vlen_manifests_v2 names rows by id)
		if err != nil {
			id = row
		}
		if _, err := l.manifestOf(ctx, id, blocks); err != nil {
			r.add("error", 3, fmt.Sprintf("%d/object_index/manifests rows %d-%d", l.n, row, row+n-1),
				"%d more objects hold the array's fill value, whose manifest does not resolve: %v", n, err)
		}
		return nil
	}
	skip := func(row int64, err error) error {
		r.Objects++
		r.add("error", 3, fmt.Sprintf("%d/object_index/manifests row %d", l.n, row), "does not read: %v", err)
		return ctx.Err()
	}
	if err := l.eachManifest(ctx, visit, again, skip); err != nil {
		r.add("error", 3, fmt.Sprintf("%d/object_index/manifests", l.n), "not checked to the end: %v", err)
	}
}

func validateConventions(s *Store, r *Report) {
	conv := s.info.LinksConvention
	for _, g := range s.info.GeometryTypes {
		ok := true
		switch g {
		case "graph", "mesh":
			ok = conv == "explicit"
		case "skeleton":
			ok = conv == "explicit" || conv == "implicit_sequential_with_branches"
		case "line", "polyline", "streamline":
			ok = conv == "implicit_sequential"
		}
		if !ok {
			r.add("error", 4, "zarr.json", "links_convention %q does not suit geometry %q", conv, g)
		}
	}
	for _, l := range s.levels {
		if s.geom == "mesh" && l.linkWidth > 0 && l.linkWidth < 3 {
			r.add("error", 4, fmt.Sprintf("%d/links/0", l.n), "mesh link_width %d < 3", l.linkWidth)
		}
		if s.geom == "point_cloud" && l.linkWidth > 0 {
			r.add("error", 4, fmt.Sprintf("%d/links/0", l.n), "a point cloud has links")
		}
	}
}

func validatePyramid(s *Store, r *Report) {
	for i, l := range s.levels {
		if l.n != i {
			r.add("error", 5, strconv.Itoa(l.n), "levels are not contiguous from 0 (found %v)", s.Levels())
			break
		}
		if i > 0 && l.meta.VertexCount > s.levels[i-1].meta.VertexCount {
			r.add("error", 5, strconv.Itoa(l.n), "vertex_count %d exceeds level %d's %d", l.meta.VertexCount, i-1, s.levels[i-1].meta.VertexCount)
		}
		if sp := l.meta.ObjectSparsity; sp != 0 && !(sp > 0 && sp <= 1) {
			r.add("error", 5, strconv.Itoa(l.n), "object_sparsity %v not in (0, 1]", sp)
		}
	}
}
