package neuroglancer

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/zvfserve/zvfserve/zvf"
)

// The segments source: a store's skeletons or multilod meshes as a
// Neuroglancer segmentation layer. Neuroglancer fetches a standalone
// skeleton or mesh source's files at {source}/{id} (and {id}.index), a
// path no info can move, so a viewer holding an older skeleton or multilod
// info (another vertex_attributes list, another sharding) was answered the
// new version's files and drew them wrongly without a word. A segmentation
// volume's info is the one precomputed info that names where the skeletons
// and meshes are ("skeletons", "mesh", relative to it): this one names
// them under the store version ("../skeletons/v{version}"), so those
// fetches carry the version and answer 410 store-changed once it is gone,
// as the annotation sources' keys do.
//
// Neuroglancer accepts such an info only with a volume of at least one
// scale. The store has no labelled voxels, so the volume is background
// (segment 0, never drawn) over the box the annotation sources give
// (level 0's chunk grid, up to the declared bounds), in voxels of a store
// unit, as the annotation sources' dimensions (Neuroglancer takes a
// dimension's scale from the first layer that names it), and coarser
// scales of twice the voxel each down to one chunk, so a cross-section at
// any zoom reads a few chunks of zeros.

// labelChunk is the edge of a segments volume chunk, in voxels (a chunk
// of uint64 is at most 256 KiB, and compresses to almost nothing).
const labelChunk = 32

// labelScale is one scale of the segments volume.
type labelScale struct {
	key        string     // relative to the version: labels/{k}
	resolution [3]float64 // nanometres a voxel
	offset     [3]int64
	size       [3]int64
}

// labelScales lays the volume over st's box. The finest voxel is a store
// unit; on an axis whose box lies so far from the origin that its voxel
// indices would pass what Neuroglancer names chunks by exactly
// (maxVoxelIndex, a float32's integers), a power of two units; on one
// shorter than a chunk of units, a power of two fraction of a unit.
func labelScales(st *zvf.Store) []labelScale {
	info := st.Info()
	dims, _ := dimensions(info.Axes)
	nm := nanometresPer(dims)
	lo, hi, ok := annotationBox(st)
	if !ok || len(nm) < 3 {
		return []labelScale{{key: "labels/0", resolution: [3]float64{1, 1, 1}, size: [3]int64{1, 1, 1}}}
	}
	var unit [3]float64
	for a := 0; a < 3; a++ {
		q, e, far := 1.0, hi[a]-lo[a], math.Max(math.Abs(lo[a]), math.Abs(hi[a]))
		for e > 0 && e/q < labelChunk && q > 0x1p-40 {
			q /= 2
		}
		for far/q > maxVoxelIndex/2 && q < 0x1p1000 {
			q *= 2
		}
		unit[a] = q
	}
	var out []labelScale
	for k := 0; k < 64; k++ {
		sc := labelScale{key: "labels/" + strconv.Itoa(k)}
		one := true
		for a := 0; a < 3; a++ {
			q := math.Ldexp(unit[a], k)
			off, end := math.Floor(lo[a]/q), math.Ceil(hi[a]/q)
			sc.resolution[a] = roundNm(q * nm[a])
			sc.offset[a], sc.size[a] = int64(off), max(int64(end-off), 1)
			one = one && sc.size[a] <= labelChunk
		}
		out = append(out, sc)
		if one {
			break
		}
	}
	return out
}

// annotationBox is the box the annotation sources' infos give (see
// plan.bounds): level 0's chunk grid, its upper corner the store's
// declared one where that lies inside; ok false when it is not finite.
func annotationBox(st *zvf.Store) (lo, hi [3]float64, ok bool) {
	info := st.Info()
	if len(info.Levels) == 0 || len(info.Levels[0].ChunkShape) != 3 {
		return lo, hi, false
	}
	l, err := st.Level(0)
	if err != nil || len(l.Keys()) == 0 {
		return lo, hi, false
	}
	cs := info.Levels[0].ChunkShape
	off := len(l.Keys()[0]) - 3
	for a := 0; a < 3; a++ {
		lo[a], hi[a] = math.Inf(1), math.Inf(-1)
		for _, k := range l.Keys() {
			c := float64(k[off+a]) * cs[a]
			lo[a], hi[a] = math.Min(lo[a], c), math.Max(hi[a], c+cs[a])
		}
		if b := info.Bounds[1]; len(b) == 3 && b[a] > lo[a] && b[a] < hi[a] {
			hi[a] = b[a]
		}
		if math.IsInf(lo[a], 0) || math.IsInf(hi[a], 0) || math.IsNaN(lo[a]) || math.IsNaN(hi[a]) {
			return lo, hi, false
		}
	}
	return lo, hi, true
}

// segmentsTarget is the source the segments source draws: "skeletons" or
// "multilod" (a mesh store's meshes, at every level of detail).
func segmentsTarget(st *zvf.Store) string {
	if has(objectRoutes(st), "skeletons") {
		return "skeletons"
	}
	return "multilod"
}

// labelsKey is the folder of the segments volume's scales.
const labelsKey = "labels"

func (s *Server) segmentsInfo(w http.ResponseWriter, r *http.Request) error {
	start := s.o.Now()
	st, l0, done, err := s.levelRequest(w, r, "segments")
	if err != nil || done {
		return err
	}
	target := segmentsTarget(st)
	// Relative to this info's directory (Neuroglancer resolves ".."): the
	// target source's files under the version this info describes.
	dir := "../" + target + "/v" + keyVersion(st)
	type scale struct {
		Key         string     `json:"key"`
		Size        [3]int64   `json:"size"`
		VoxelOffset [3]int64   `json:"voxel_offset"`
		Resolution  [3]float64 `json:"resolution"`
		ChunkSizes  [][3]int64 `json:"chunk_sizes"`
		Encoding    string     `json:"encoding"`
	}
	var scales []scale
	for _, sc := range labelScales(st) {
		scales = append(scales, scale{Key: versioned(st, sc.key), Size: sc.size, VoxelOffset: sc.offset, Resolution: sc.resolution,
			ChunkSizes: [][3]int64{{labelChunk, labelChunk, labelChunk}}, Encoding: "raw"})
	}
	inf := map[string]any{"@type": "neuroglancer_multiscale_volume", "type": "segmentation", "data_type": "uint64", "num_channels": 1,
		"scales": scales,
		"zvfserve": map[string]any{"store": st.Name(), "source": target,
			"notes": []string{"the volume holds no labels (every voxel is background, segment 0): it is there because Neuroglancer reads a segmentation info's skeletons or meshes only beside a volume"}}}
	if target == "skeletons" {
		inf["skeletons"] = dir
	} else {
		inf["mesh"] = dir
	}
	if l0.Info().ObjectCount <= maxSegmentIDs {
		inf["segment_properties"] = dir + "/seg_props"
	}
	body, err := json.Marshal(inf)
	if err != nil {
		return err
	}
	return s.send(w, r, st, "segments\x00info", mediaJSON, body, start)
}

// segmentsChunk answers a chunk of the segments volume: background.
func (s *Server) segmentsChunk(w http.ResponseWriter, r *http.Request) error {
	start := s.o.Now()
	st, err := s.source(r, "segments")
	if err != nil {
		return err
	}
	key, name := labelsKey+"/"+chi.URLParam(r, "scale"), chi.URLParam(r, "chunk")
	scales := labelScales(st)
	var sc *labelScale
	for i := range scales {
		if scales[i].key == key {
			sc = &scales[i]
		}
	}
	if sc == nil {
		return notFoundf("store %q: the segments volume has no scale %q (it has %s/0 to %s/%d)", st.Name(), key, labelsKey, labelsKey, len(scales)-1)
	}
	lo, hi, err := parseVoxelRange(name)
	if err != nil {
		return err
	}
	n := int64(8)
	for a := 0; a < 3; a++ {
		end := sc.offset[a] + sc.size[a]
		if lo[a] < sc.offset[a] || lo[a] >= end || (lo[a]-sc.offset[a])%labelChunk != 0 || hi[a] != min(lo[a]+labelChunk, end) {
			return notFoundf("store %q: %s is no chunk of the segments volume's scale %s (chunks of %d voxels from %d to %d on axis %d)",
				st.Name(), name, key, labelChunk, sc.offset[a], end, a)
		}
		n *= hi[a] - lo[a]
	}
	if s.notModified(w, r, st) {
		return nil
	}
	// Every chunk of a shape is the same zeros: one cache entry (and one
	// compression) a shape.
	shape := fmt.Sprintf("segments\x00chunk\x00%d", n)
	return s.send(w, r, st, shape, mediaBinary, s.zeroLabels()[:n], start) // n ≤ labelChunk³ uint64s, checked above
}
