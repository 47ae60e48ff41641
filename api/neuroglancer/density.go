package neuroglancer

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/zvfserve/zvfserve/zvf"
)

// The density source: a store as a Neuroglancer precomputed image volume
// of vertex counts (uint32, raw chunks), so that a store too large to draw
// shows as a heat map. Scale k counts level k's vertices in voxels of the
// level's bin shape: voxel v covers store coordinates [v·s, (v+1)·s) on
// each axis (s = the bin edge in store units; its resolution in nm is
// s·u, u the axis unit in nm, 1 without a length unit), a vertex on a
// boundary belongs to the upper voxel and one on the volume's max face to
// the last voxel. The volume spans the level's chunk grid and the store's
// declared bounds, so every vertex filed in its chunk is counted.

// densityChunk is the edge of a density chunk, in voxels.
const densityChunk = 64

// maxVoxelIndex bounds a density voxel index: 2^24, the largest range of
// integers a float32 holds exactly. Neuroglancer computes a chunk's name
// from its grid position and the scale's voxel_offset in a Float32Array
// (sliceview/volume/backend.js computeChunkBounds), so past 2^24 it names
// chunks off the grid by a voxel or more, each a 404 it takes for empty:
// a scale that far out would show nothing, without a word.
const maxVoxelIndex = 1 << 24

// densityScale is one scale of the volume.
type densityScale struct {
	key    string
	level  int
	voxel  [3]float64 // store units
	offset [3]int64
	size   [3]int64
}

// end is the voxel past the volume on axis a.
func (sc *densityScale) end(a int) int64 { return sc.offset[a] + sc.size[a] }

// checkedDensityScales is densityScales for an answer drawn from them
// (the volume's info, its chunks): a level whose listing was found
// incomplete is that error, not a scale quietly left out, and each
// level's listing is checked first (CheckListed), as a scale's extent
// takes in every listed chunk.
func checkedDensityScales(ctx context.Context, st *zvf.Store) ([]densityScale, error) {
	for _, li := range st.Info().Levels {
		if len(li.BinShape) != 3 {
			continue
		}
		l, err := st.Level(li.Level)
		if errors.Is(err, zvf.ErrChanged) {
			return nil, err
		}
		if err != nil {
			continue // no scale at this level (densityScales)
		}
		if err := l.CheckListed(ctx); err != nil {
			return nil, err
		}
	}
	return densityScales(st), nil
}

// densityScales lists the volume's scales: one per level whose bins are
// coarser than the previous scale's on some axis and finer on none.
func densityScales(st *zvf.Store) []densityScale {
	info := st.Info()
	if info.Dims != 3 {
		return nil
	}
	var out []densityScale
	for _, li := range info.Levels {
		if len(li.BinShape) != 3 {
			continue
		}
		sc := densityScale{key: strconv.Itoa(li.Level), level: li.Level}
		lo, hi, ok := extent(st, li)
		if !ok {
			continue
		}
		good := true
		for a := 0; a < 3; a++ {
			s := li.BinShape[a]
			if !(s > 0) || math.IsInf(s, 0) {
				good = false
				break
			}
			sc.voxel[a] = s
			// The first voxel whose lower bound v·s is at most lo, the
			// first past hi (hi on a boundary: the one it starts). A
			// volume whose voxel indices pass ±maxVoxelIndex has no scale
			// at this level (a coarser level may have one): beyond it
			// Neuroglancer misnames chunks, and past 2^63 (declared bounds
			// of 1e308, a bin edge of 1e-300) an index converted to int64
			// is undefined and the steps below ran 2^63 times.
			fl, ce := math.Floor(lo[a]/s), math.Ceil(hi[a]/s)
			if !(math.Abs(fl) <= maxVoxelIndex && math.Abs(ce) <= maxVoxelIndex) {
				good = false
				break
			}
			off, end := int64(fl), int64(ce)
			for i := 0; float64(off)*s > lo[a]; i++ {
				if i == 4 {
					good = false
					break
				}
				off--
			}
			for i := 0; float64(end)*s < hi[a]; i++ {
				if i == 4 {
					good = false
					break
				}
				end++
			}
			if !good || off < -maxVoxelIndex || end > maxVoxelIndex {
				good = false
				break
			}
			sc.offset[a], sc.size[a] = off, max(end-off, 1)
		}
		if !good {
			continue
		}
		if n := len(out); n > 0 {
			prev, coarser := out[n-1].voxel, false
			for a := 0; a < 3; a++ {
				if sc.voxel[a] < prev[a] {
					good = false
				}
				coarser = coarser || sc.voxel[a] > prev[a]
			}
			if !good || !coarser {
				continue
			}
		}
		out = append(out, sc)
	}
	return out
}

// extent is the box a scale's volume spans: the level's chunk grid
// (which holds every vertex filed in its chunk), grown to the store's
// declared bounds.
func extent(st *zvf.Store, li zvf.LevelInfo) (lo, hi []float64, ok bool) {
	l, err := st.Level(li.Level)
	if err != nil || len(l.Keys()) == 0 || len(li.ChunkShape) != 3 {
		return nil, nil, false
	}
	lo, hi = make([]float64, 3), make([]float64, 3)
	off := len(l.Keys()[0]) - 3
	b := st.Info().Bounds
	for a := 0; a < 3; a++ {
		lo[a], hi[a] = math.Inf(1), math.Inf(-1)
		if len(b[0]) == 3 && len(b[1]) == 3 {
			lo[a], hi[a] = b[0][a], b[1][a]
		}
		for _, k := range l.Keys() {
			c := float64(k[off+a]) * li.ChunkShape[a]
			lo[a], hi[a] = math.Min(lo[a], c), math.Max(hi[a], c+li.ChunkShape[a])
		}
	}
	return lo, hi, true
}

func (s *Server) densityInfo(w http.ResponseWriter, r *http.Request) error {
	start := s.o.Now()
	st, done, err := s.sourceRequest(w, r, "density")
	if err != nil || done {
		return err
	}
	dims, notes := dimensions(st.Info().Axes)
	nm := nanometresPer(dims)
	scales, err := checkedDensityScales(r.Context(), st)
	if err != nil {
		return err
	}
	type scaleInfo struct {
		Key         string     `json:"key"`
		Size        [3]int64   `json:"size"`
		VoxelOffset [3]int64   `json:"voxel_offset"`
		Resolution  [3]float64 `json:"resolution"`
		ChunkSizes  [][3]int64 `json:"chunk_sizes"`
		Encoding    string     `json:"encoding"`
	}
	type scaleNote struct {
		Key   string     `json:"key"`
		Level int        `json:"zvf_level"`
		Voxel [3]float64 `json:"voxel"`
	}
	inf := struct {
		Type        string      `json:"@type"`
		DataType    string      `json:"data_type"`
		NumChannels int         `json:"num_channels"`
		VolumeType  string      `json:"type"`
		Scales      []scaleInfo `json:"scales"`
		Notes       struct {
			Store      string      `json:"store"`
			Level      int         `json:"level"`
			Attributes []note      `json:"attributes"`
			Axes       []string    `json:"axes"`
			NmPerUnit  []float64   `json:"nanometres_per_unit"`
			Scales     []scaleNote `json:"density_scales"`
		} `json:"zvfserve"`
	}{Type: "neuroglancer_multiscale_volume", DataType: "uint32", NumChannels: 1, VolumeType: "image", Scales: []scaleInfo{}}
	inf.Notes.Store, inf.Notes.Attributes, inf.Notes.Axes, inf.Notes.NmPerUnit = st.Name(), []note{}, append([]string{}, notes...), nm
	inf.Notes.Scales = []scaleNote{}
	for _, sc := range scales {
		si := scaleInfo{Key: versioned(st, sc.key), Size: sc.size, VoxelOffset: sc.offset, ChunkSizes: [][3]int64{{densityChunk, densityChunk, densityChunk}}, Encoding: "raw"}
		for a := 0; a < 3; a++ {
			si.Resolution[a] = roundNm(sc.voxel[a] * nm[a])
		}
		inf.Scales = append(inf.Scales, si)
		inf.Notes.Scales = append(inf.Notes.Scales, scaleNote{Key: si.Key, Level: sc.level, Voxel: sc.voxel})
	}
	body, err := json.Marshal(&inf)
	if err != nil {
		return err
	}
	return s.send(w, r, st, "density\x00info", mediaJSON, body, start)
}

// roundNm rounds a resolution to 15 significant digits (25 µm is 25000
// nm, not 25000.000000000004).
func roundNm(v float64) float64 {
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 15, 64), 64)
	return r
}

func (s *Server) densityChunk(w http.ResponseWriter, r *http.Request) error {
	start := s.o.Now()
	st, err := s.source(r, "density")
	if err != nil {
		return err
	}
	key, name := chi.URLParam(r, "key"), chi.URLParam(r, "chunk")
	var sc *densityScale
	scales, err := checkedDensityScales(r.Context(), st)
	if err != nil {
		return err
	}
	for i := range scales {
		if scales[i].key == key {
			sc = &scales[i]
		}
	}
	if sc == nil {
		keys := make([]string, len(scales))
		for i, x := range scales {
			keys[i] = x.key
		}
		return notFoundf("store %q: the density volume has no scale %q (it has %s)", st.Name(), key, strings.Join(keys, ", "))
	}
	lo, hi, err := parseVoxelRange(name)
	if err != nil {
		return err
	}
	q := zvf.VoxelQuery{Voxel: sc.voxel[:], Lo: lo[:], Hi: hi[:], Closed: make([]bool, 3)}
	for a := 0; a < 3; a++ {
		// Neuroglancer asks for chunks of the grid: aligned, and cut
		// at the volume's end.
		if lo[a] < sc.offset[a] || lo[a] >= sc.end(a) || (lo[a]-sc.offset[a])%densityChunk != 0 || hi[a] != min(lo[a]+densityChunk, sc.end(a)) {
			return notFoundf("store %q: %s is no chunk of density scale %s (chunks of %d voxels from %d to %d on axis %d)",
				st.Name(), name, key, densityChunk, sc.offset[a], sc.end(a), a)
		}
		q.Closed[a] = hi[a] == sc.end(a)
	}
	if s.notModifiedFound(w, r, st) { // a chunk of the grid: its counts are what is read
		return nil
	}
	l, err := st.Level(sc.level)
	if err != nil {
		return err
	}
	ckey := "density\x00" + key + "\x00" + name
	return s.sendCached(w, r, st, ckey, mediaBinary, start, func(ctx context.Context) ([]byte, error) {
		counts, err := l.Voxels(ctx, q)
		if err != nil {
			return nil, err
		}
		out := make([]byte, 0, 4*len(counts))
		for _, c := range counts {
			out = binary.LittleEndian.AppendUint32(out, c)
		}
		return out, nil
	})
}

// parseVoxelRange reads a chunk name x0-x1_y0-y1_z0-z1. A bound below 0
// has its sign ("-64--1"): a volume of a store with negative coordinates
// has a negative voxel_offset, and Neuroglancer joins the bounds with "-".
func parseVoxelRange(name string) (lo, hi [3]int64, err error) {
	parts := strings.Split(name, "_")
	if len(parts) != 3 {
		return lo, hi, badParam(fmt.Sprintf("chunk %q: want x0-x1_y0-y1_z0-z1", name))
	}
	for a, p := range parts {
		// The separator is the first "-" after the first character,
		// which may be x0's sign.
		x, y, ok := "", "", false
		if len(p) > 1 {
			if i := strings.IndexByte(p[1:], '-'); i >= 0 {
				x, y, ok = p[:i+1], p[i+2:], true
			}
		}
		v0, err0 := strconv.ParseInt(x, 10, 64)
		v1, err1 := strconv.ParseInt(y, 10, 64)
		if !ok || err0 != nil || err1 != nil || strconv.FormatInt(v0, 10) != x || strconv.FormatInt(v1, 10) != y || v1 <= v0 {
			return lo, hi, badParam(fmt.Sprintf("chunk %q: %q is not a voxel range start-end", name, p))
		}
		lo[a], hi[a] = v0, v1
	}
	return lo, hi, nil
}
