package neuroglancer_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/writer"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// ngVolumeInfo is the info of a precomputed volume, as Neuroglancer reads
// it.
type ngVolumeInfo struct {
	Type        string `json:"@type"`
	VolumeType  string `json:"type"`
	DataType    string `json:"data_type"`
	NumChannels int    `json:"num_channels"`
	Scales      []struct {
		Key         string       `json:"key"`
		Size        [3]int64     `json:"size"`
		VoxelOffset [3]int64     `json:"voxel_offset"`
		Resolution  [3]float64   `json:"resolution"`
		ChunkSizes  [][3]int64   `json:"chunk_sizes"`
		Encoding    string       `json:"encoding"`
		Sharding    *interface{} `json:"sharding"`
	} `json:"scales"`
	Notes struct {
		NmPerUnit []float64 `json:"nanometres_per_unit"`
		Scales    []struct {
			Key   string     `json:"key"`
			Level int        `json:"zvf_level"`
			Voxel [3]float64 `json:"voxel"`
		} `json:"density_scales"`
	} `json:"zvfserve"`
}

// TestDensityVolumeCountsEveryVertex reads every chunk of every scale of
// each store's density volume, as Neuroglancer names them, and compares
// each voxel with the level's vertices binned by the stated rule (see
// checkDensity).
func TestDensityVolumeCountsEveryVertex(t *testing.T) {
	t.Parallel()
	stores := append(fixtureStores(t), demoStores(t, cache.New(256<<20))...)
	_, ts := newServer(t, api.Options{Stores: stores})
	checked := 0
	for _, st := range stores {
		if st.Info().Dims != 3 {
			continue
		}
		t.Run(st.Name(), func(t *testing.T) { checked += len(checkDensity(t, ts, st)) })
	}
	if checked < 8 {
		t.Fatalf("only %d scales checked", checked)
	}
}

// checkDensity reads every chunk of every scale of st's density volume,
// as Neuroglancer names them (the info's keys joined as it joins them),
// and compares each voxel with the level's vertices binned by the stated
// rule: voxel v covers [v·r/u, (v+1)·r/u), a vertex on a boundary in the
// upper voxel and one on the volume's max face in the last; every vertex
// is counted. It returns the levels of the scales it checked.
func checkDensity(t *testing.T, ts *httptest.Server, st *zvf.Store) []int {
	t.Helper()
	var inf ngVolumeInfo
	if err := json.Unmarshal(apitest.MustGet(t, ts, "/ng/"+st.Name()+"/density/info"), &inf); err != nil {
		t.Fatal(err)
	}
	if inf.Type != "neuroglancer_multiscale_volume" || inf.VolumeType != "image" || inf.DataType != "uint32" || inf.NumChannels != 1 || len(inf.Scales) == 0 ||
		len(inf.Notes.Scales) != len(inf.Scales) {
		t.Fatalf("info %+v", inf)
	}
	for si, sc := range inf.Scales {
		note := inf.Notes.Scales[si]
		if sc.Encoding != "raw" || sc.Sharding != nil || len(sc.ChunkSizes) != 1 || note.Key != sc.Key || !strings.HasSuffix(sc.Key, fmt.Sprintf("/%d", note.Level)) {
			t.Fatalf("scale %+v", sc)
		}
		l, err := st.Level(note.Level)
		if err != nil {
			t.Fatal(err)
		}
		var s [3]float64 // voxel edge in store units: r / u
		for a := 0; a < 3; a++ {
			s[a] = note.Voxel[a]
			if math.Abs(sc.Resolution[a]-s[a]*inf.Notes.NmPerUnit[a]) > 1e-9*sc.Resolution[a] {
				t.Fatalf("scale %s: resolution %v for voxels of %v units of %v nm", sc.Key, sc.Resolution, s, inf.Notes.NmPerUnit)
			}
			if si > 0 && sc.Resolution[a] < inf.Scales[si-1].Resolution[a] {
				t.Fatalf("scale %s is finer than the one before", sc.Key)
			}
		}
		// The brute force: each vertex's voxel, the last voxel whose
		// lower bound it reaches, clamped to the volume.
		want := map[[3]int64]uint32{}
		whole := wholeLevel(t, l)
		for _, p := range whole.pos {
			var v [3]int64
			for a := 0; a < 3; a++ {
				x := float64(p[a])
				end := sc.VoxelOffset[a] + sc.Size[a]
				if x < float64(sc.VoxelOffset[a])*s[a] || x > float64(end)*s[a] {
					t.Fatalf("scale %s: vertex %v outside the volume", sc.Key, p)
				}
				v[a] = sc.VoxelOffset[a]
				for c := sc.VoxelOffset[a]; c < end; c++ {
					if float64(c)*s[a] <= x {
						v[a] = c
					}
				}
			}
			want[v]++
		}
		var total uint64
		cs := sc.ChunkSizes[0]
		for z := sc.VoxelOffset[2]; z < sc.VoxelOffset[2]+sc.Size[2]; z += cs[2] {
			for y := sc.VoxelOffset[1]; y < sc.VoxelOffset[1]+sc.Size[1]; y += cs[1] {
				for x := sc.VoxelOffset[0]; x < sc.VoxelOffset[0]+sc.Size[0]; x += cs[0] {
					lo := [3]int64{x, y, z}
					var hi [3]int64
					for a := 0; a < 3; a++ {
						hi[a] = min(lo[a]+cs[a], sc.VoxelOffset[a]+sc.Size[a])
					}
					name := ngChunkName(sc.VoxelOffset, lo, hi)
					b := apitest.MustGet(t, ts, "/ng/"+st.Name()+"/density/"+sc.Key+"/"+name)
					nx, ny, nz := hi[0]-lo[0], hi[1]-lo[1], hi[2]-lo[2]
					if int64(len(b)) != 4*nx*ny*nz {
						t.Fatalf("chunk %s: %d bytes", name, len(b))
					}
					for k := int64(0); k < nz; k++ {
						for j := int64(0); j < ny; j++ {
							for i := int64(0); i < nx; i++ {
								got := binary.LittleEndian.Uint32(b[4*(i+nx*(j+ny*k)):])
								v := [3]int64{lo[0] + i, lo[1] + j, lo[2] + k}
								if got != want[v] {
									t.Fatalf("scale %s voxel %v: %d, want %d", sc.Key, v, got, want[v])
								}
								total += uint64(got)
							}
						}
					}
				}
			}
		}
		if total != uint64(len(whole.pos)) || total == 0 {
			t.Fatalf("scale %s counts %d of level %d's %d vertices", sc.Key, total, note.Level, len(whole.pos))
		}
	}
	levels := make([]int, len(inf.Notes.Scales))
	for i, n := range inf.Notes.Scales {
		levels[i] = n.Level
	}
	return levels
}

// ngChunkName names the chunk of voxels [lo, hi) of a volume at offset
// as Neuroglancer does (sliceview/volume/backend.js computeChunkBounds,
// datasource/precomputed/backend.js): the chunk's start relative to the
// offset and the offset are held in a Float32Array and added there, and
// the end is that start plus the chunk's size.
func ngChunkName(offset, lo, hi [3]int64) string {
	var b strings.Builder
	for a := range 3 {
		rel := float32(lo[a] - offset[a])
		start := float64(float32(float64(rel) + float64(float32(offset[a]))))
		if a > 0 {
			b.WriteByte('_')
		}
		fmt.Fprintf(&b, "%d-%d", int64(start), int64(start)+hi[a]-lo[a])
	}
	return b.String()
}

// TestDensityProblems: a chunk Neuroglancer would not ask for is a 404
// naming the grid, a malformed name a 400, a store of another rank has
// no density source.
func TestDensityProblems(t *testing.T) {
	t.Parallel()
	_, ts := newServer(t, api.Options{Stores: fixtureStores(t)})
	var inf ngVolumeInfo
	if err := json.Unmarshal(apitest.MustGet(t, ts, "/ng/points_pyramid/density/info"), &inf); err != nil {
		t.Fatal(err)
	}
	sc := inf.Scales[0]
	end := func(a int) int64 { return sc.VoxelOffset[a] + min(sc.Size[a], 64) }
	good := fmt.Sprintf("%d-%d_%d-%d_%d-%d", sc.VoxelOffset[0], end(0), sc.VoxelOffset[1], end(1), sc.VoxelOffset[2], end(2))
	apitest.MustGet(t, ts, "/ng/points_pyramid/density/0/"+good)
	wantProblems(t, ts, []problemCase{
		{"/ng/points_pyramid/density/9/" + good, 404, "no scale \"9\""},
		{fmt.Sprintf("/ng/points_pyramid/density/0/%d-%d_%d-%d_%d-%d", sc.VoxelOffset[0]+1, end(0), sc.VoxelOffset[1], end(1), sc.VoxelOffset[2], end(2)), 404, "no chunk"},
		{"/ng/points_pyramid/density/0/0-1_0-1", 400, "x0-x1_y0-y1_z0-z1"},
		{"/ng/points_pyramid/density/0/1-0_0-1_0-1", 400, "not a voxel range"},
		{"/ng/points_pyramid/density/0/a-b_0-1_0-1", 400, "not a voxel range"},
		// Signs: a negative bound is "-n"; nothing else is a number.
		{"/ng/points_pyramid/density/0/-0-1_0-1_0-1", 400, "not a voxel range"},
		{"/ng/points_pyramid/density/0/--1-0_0-1_0-1", 400, "not a voxel range"},
		{"/ng/points_pyramid/density/0/+0-1_0-1_0-1", 400, "not a voxel range"},
		{"/ng/points_pyramid/density/0/-1_0-1_0-1", 400, "not a voxel range"},
		{"/ng/points_pyramid/density/0/-_0-1_0-1", 400, "not a voxel range"},
		{"/ng/points_pyramid/density/0/_0-1_0-1", 400, "not a voxel range"},
		{"/ng/points_pyramid/density/0/0-_0-1_0-1", 400, "not a voxel range"},
		{"/ng/points_pyramid/density/0/0--1_0-1_0-1", 400, "not a voxel range"},
		{"/ng/points_pyramid/density/0/0-99999999999999999999_0-1_0-1", 400, "not a voxel range"},
		// Well formed, outside the grid: no arithmetic may overflow.
		{"/ng/points_pyramid/density/0/-9223372036854775808--9223372036854775744_0-4_0-4", 404, "no chunk"},
		{"/ng/points_pyramid/density/0/9223372036854775743-9223372036854775807_0-4_0-4", 404, "no chunk"},
		{"/ng/points_pyramid/density/0/-64-0_0-4_0-4", 404, "no chunk"},
	})
}

// TestDensityRandomStores checks density volumes (checkDensity) of point
// clouds drawn at random: chunk and bin edges that are not powers of two
// nor exact in binary, coordinates on either side of 0, many vertices
// exactly on voxel boundaries, pyramids of two and three levels, and
// declared bounds past the data.
func TestDensityRandomStores(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem := zvftest.Store(t, "mem://")
	ch := cache.New(64 << 20)
	var stores []*zvf.Store
	for seed := range int64(12) {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		edges := []float64{0.7, 1, 2.5, 10, 33.3}
		o := writer.Options{ChunkShape: make([]float64, 3), BinShape: make([]float64, 3), SparsitySeed: uint64(seed)}
		for a := range 3 {
			o.ChunkShape[a] = edges[rng.IntN(len(edges))]
			o.BinShape[a] = o.ChunkShape[a] / float64([]int{1, 2, 4, 5}[rng.IntN(4)])
		}
		switch seed % 3 {
		case 1:
			o.Pyramid = []writer.PyramidLevel{{Coarsen: 2}}
		case 2:
			o.Pyramid = []writer.PyramidLevel{{Coarsen: 2}, {Coarsen: 8}}
		}
		n := 200 + rng.IntN(800)
		pos := make([]float32, 0, 3*n)
		var lo, hi [3]float64
		for a := range 3 {
			// Up to 6 chunks each side of 0, or all on one side.
			lo[a] = o.ChunkShape[a] * float64(rng.IntN(13)-6-int(seed%2)*3)
			hi[a] = lo[a] + o.ChunkShape[a]*float64(1+rng.IntN(5))
		}
		for range n {
			for a := range 3 {
				x := lo[a] + rng.Float64()*(hi[a]-lo[a])
				if rng.IntN(3) == 0 { // on a bin boundary, as float32 holds it
					x = math.Floor(x/o.BinShape[a]) * o.BinShape[a]
				}
				pos = append(pos, float32(x))
			}
		}
		if seed == 11 {
			// Far from the origin in voxels of level 0 (over 2^24), as
			// a specimen in nanometres is.
			for a := range 3 {
				o.ChunkShape[a], o.BinShape[a] = 32, 1
				lo[a], hi[a] = 2e7+float64(a), 2e7+300
			}
			pos = pos[:0]
			for range n {
				for a := range 3 {
					pos = append(pos, float32(lo[a]+rng.Float64()*(hi[a]-lo[a])))
				}
			}
		}
		if seed%4 == 3 {
			b := [2][]float64{make([]float64, 3), make([]float64, 3)}
			for a := range 3 {
				b[0][a], b[1][a] = lo[a]-3.3*o.ChunkShape[a], hi[a]+1.7*o.ChunkShape[a]
			}
			o.Bounds = &b
		}
		prefix := fmt.Sprintf("r%d.zarrvectors", seed)
		if _, err := writer.WritePoints(ctx, mem, prefix, &writer.PointCloud{Positions: pos}, o); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		st, err := zvf.Open(ctx, storage.Sub(mem, prefix), zvf.Options{Name: fmt.Sprintf("r%d", seed), Cache: ch})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		stores = append(stores, st)
	}
	_, ts := newServer(t, api.Options{Stores: stores})
	for _, st := range stores {
		t.Run(st.Name(), func(t *testing.T) {
			levels := checkDensity(t, ts, st)
			// The far store's level 0 has voxel indices past 2^24, which
			// Neuroglancer cannot name: its volume starts at level 1.
			if want := []int{0, 1, 2}[:len(st.Levels())]; st.Name() == "r11" {
				if !slices.Equal(levels, want[1:]) {
					t.Errorf("scales of levels %v, want %v", levels, want[1:])
				}
			} else if !slices.Equal(levels, want) {
				t.Errorf("scales of levels %v, want %v", levels, want)
			}
		})
	}
}
