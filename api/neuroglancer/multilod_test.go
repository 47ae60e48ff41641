package neuroglancer_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/api/neuroglancer"
	"github.com/zvfserve/zvfserve/api/neuroglancer/draco/dracotest"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// ngMultilod is a manifest ({id}.index) as Neuroglancer reads it, decoded
// from the format description (independently of the server's encoder).
type ngMultilod struct {
	chunk, origin [3]float32
	scales        []float32
	offsets       [][3]float32
	lods          [][]ngNode
}

// ngNode is one octree node: its grid position at its LOD and where its
// fragment is in the data file.
type ngNode struct {
	pos         [3]uint32
	start, size int
	triangles   [][3][3]float64 // dequantized corners
}

func decodeManifest(b []byte) (*ngMultilod, error) {
	le := binary.LittleEndian
	if len(b) < 28 || len(b)%4 != 0 {
		return nil, fmt.Errorf("%d bytes", len(b))
	}
	f32 := func(off int) float32 { return math.Float32frombits(le.Uint32(b[off:])) }
	m := &ngMultilod{}
	for a := range 3 {
		m.chunk[a], m.origin[a] = f32(4*a), f32(12+4*a)
	}
	n := int(le.Uint32(b[24:]))
	off := 28
	if n > (len(b)-off)/20 {
		return nil, fmt.Errorf("%d LODs in %d bytes", n, len(b))
	}
	for i := range n {
		m.scales = append(m.scales, f32(off+4*i))
	}
	off += 4 * n
	for i := range n {
		m.offsets = append(m.offsets, [3]float32{f32(off + 12*i), f32(off + 12*i + 4), f32(off + 12*i + 8)})
	}
	off += 12 * n
	counts := make([]int, n)
	total := 0
	for i := range n {
		counts[i] = int(le.Uint32(b[off+4*i:]))
		total += counts[i]
	}
	off += 4 * n
	if len(b) != off+16*total {
		return nil, fmt.Errorf("%d bytes for %d fragments", len(b), total)
	}
	start := 0
	for _, k := range counts {
		nodes := make([]ngNode, k)
		for i := range k {
			for a := range 3 {
				nodes[i].pos[a] = le.Uint32(b[off+4*(a*k+i):])
			}
			nodes[i].size = int(le.Uint32(b[off+4*(3*k+i):]))
			nodes[i].start = start
			start += nodes[i].size
		}
		off += 16 * k
		m.lods = append(m.lods, nodes)
	}
	return m, nil
}

// zLess orders grid positions along the Z-curve (x in bit 3i, y in 3i+1, z
// in 3i+2): by the axis of the highest interleaved bit where they differ.
func zLess(p, q [3]uint32) bool {
	axis, top := -1, -1
	for a := range 3 {
		if d := p[a] ^ q[a]; d != 0 {
			if bit := 3*(31-bits.LeadingZeros32(d)) + a; bit > top {
				axis, top = a, bit
			}
		}
	}
	return axis >= 0 && p[axis] < q[axis]
}

// checkManifest checks what Neuroglancer needs of a manifest: positive,
// strictly increasing lod_scales; nodes of each LOD in strictly increasing
// Z-order; every node below the top LOD with its parent at the next one;
// fragment sizes summing to the data file's length.
func checkManifest(m *ngMultilod, dataLen int) error {
	for i, s := range m.scales {
		if !(s > 0) || i > 0 && s <= m.scales[i-1] {
			return fmt.Errorf("lod_scales %v are not positive and strictly increasing", m.scales)
		}
	}
	for a := range 3 {
		if !(m.chunk[a] > 0) {
			return fmt.Errorf("chunk_shape %v", m.chunk)
		}
	}
	sum := 0
	for lod, nodes := range m.lods {
		for i, n := range nodes {
			sum += n.size
			if i > 0 && !zLess(nodes[i-1].pos, n.pos) {
				return fmt.Errorf("LOD %d: node %v after %v, not in Z-order", lod, n.pos, nodes[i-1].pos)
			}
			if lod+1 < len(m.lods) {
				parent := [3]uint32{n.pos[0] >> 1, n.pos[1] >> 1, n.pos[2] >> 1}
				found := false
				for _, p := range m.lods[lod+1] {
					found = found || p.pos == parent
				}
				if !found {
					return fmt.Errorf("LOD %d: node %v has no parent %v at LOD %d", lod, n.pos, parent, lod+1)
				}
			}
		}
	}
	if sum != dataLen {
		return fmt.Errorf("fragment sizes sum to %d, the data file has %d bytes", sum, dataLen)
	}
	return nil
}

const ngBits = 16

// decodeFragments decodes every fragment with the Go decoder, checks what
// Neuroglancer checks (int32 × 3 positions within the quantization range)
// and that no triangle at LOD > 0 crosses its node's 2×2×2 split, and
// dequantizes the triangles.
func decodeFragments(m *ngMultilod, data []byte) error {
	steps := float64(uint32(1)<<ngBits - 1)
	split := uint32(1) << (ngBits - 1) // Neuroglancer's partition point: a corner on it goes either way
	for lod := range m.lods {
		for i := range m.lods[lod] {
			n := &m.lods[lod][i]
			if n.size == 0 {
				continue
			}
			d, err := dracotest.Decode(data[n.start : n.start+n.size])
			if err != nil {
				return fmt.Errorf("LOD %d node %v: %w", lod, n.pos, err)
			}
			if d.DataType != 5 || d.Components != 3 {
				return fmt.Errorf("LOD %d: position data type %d × %d, want int32 × 3", lod, d.DataType, d.Components)
			}
			for _, q := range d.Positions {
				if q > uint32(steps) {
					return fmt.Errorf("LOD %d: position %d outside [0, 2^%d−1]", lod, q, ngBits)
				}
			}
			scale := float64(uint64(1) << lod)
			for t := 0; t+3 <= len(d.Faces); t += 3 {
				var tri [3][3]float64
				var qt [3][3]uint32
				for c := range 3 {
					v := d.Faces[t+c]
					for a := range 3 {
						q := d.Positions[3*int(v)+a]
						qt[c][a] = q
						tri[c][a] = float64(m.origin[a]) + float64(m.offsets[lod][a]) +
							float64(m.chunk[a])*scale*(float64(n.pos[a])+float64(q)/steps)
					}
				}
				if lod > 0 {
					for a := range 3 {
						below := qt[0][a] < split || qt[1][a] < split || qt[2][a] < split
						above := qt[0][a] > split || qt[1][a] > split || qt[2][a] > split
						if below && above {
							return fmt.Errorf("LOD %d node %v: triangle %v crosses the split on axis %d", lod, n.pos, qt, a)
						}
					}
				}
				n.triangles = append(n.triangles, tri)
			}
		}
	}
	return nil
}

// step is the quantization step of LOD lod on each axis.
func (m *ngMultilod) step(lod int) [3]float64 {
	var s [3]float64
	for a := range 3 {
		s[a] = float64(m.chunk[a]) * float64(uint64(1)<<lod) / float64(uint32(1)<<ngBits-1)
	}
	return s
}

// triangles lists LOD lod's triangles, node by node.
func (m *ngMultilod) triangles(lod int) [][3][3]float64 {
	var out [][3][3]float64
	for _, n := range m.lods[lod] {
		out = append(out, n.triangles...)
	}
	return out
}

// faceTriangles is an object's faces as triangles (a polygon as a fan),
// with their corners' positions.
func faceTriangles(o *zvf.Object) [][3][3]float64 {
	var out [][3][3]float64
	w := o.FaceWidth
	if w < 3 {
		return nil
	}
	at := func(v int64) [3]float64 {
		return [3]float64{o.Vertices.At(3 * int(v)).Float64(), o.Vertices.At(3*int(v) + 1).Float64(), o.Vertices.At(3*int(v) + 2).Float64()}
	}
	for f := 0; f+w <= len(o.Faces); f += w {
		for k := 1; k+1 < w; k++ {
			out = append(out, [3][3]float64{at(o.Faces[f]), at(o.Faces[f+k]), at(o.Faces[f+k+1])})
		}
	}
	return out
}

// within reports whether p and q differ by at most step on every axis
// (with room for float32 rounding of the manifest's values).
func within(p, q, step [3]float64) bool {
	for a := range 3 {
		if math.Abs(p[a]-q[a]) > step[a]*(1+1e-6)+1e-9*max(1, math.Abs(q[a])) {
			return false
		}
	}
	return true
}

// sameTriangles checks got holds want's triangles in order, each corner
// within one quantization step, winding kept.
func sameTriangles(got, want [][3][3]float64, step [3]float64) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d triangles, the reader's faces make %d", len(got), len(want))
	}
	for i := range want {
		for c := range 3 {
			if !within(got[i][c], want[i][c], step) {
				return fmt.Errorf("triangle %d corner %d at %v, the reader's at %v (step %v)", i, c, got[i][c], want[i][c], step)
			}
		}
	}
	return nil
}

// vertexGrid finds whether an object has a vertex within one
// quantization step of a point: its vertices filed in cells two steps
// wide, so such a vertex is in the point's cell or a neighbour.
type vertexGrid struct {
	step  [3]float64
	cells map[[3]int64][][3]float64
}

func newVertexGrid(o *zvf.Object, step [3]float64) *vertexGrid {
	g := &vertexGrid{step: step, cells: map[[3]int64][][3]float64{}}
	for i := range int(o.Count) {
		v := [3]float64{o.Vertices.At(3 * i).Float64(), o.Vertices.At(3*i + 1).Float64(), o.Vertices.At(3*i + 2).Float64()}
		k := g.cell(v)
		g.cells[k] = append(g.cells[k], v)
	}
	return g
}

func (g *vertexGrid) cell(p [3]float64) [3]int64 {
	var k [3]int64
	for a := range 3 {
		k[a] = int64(math.Floor(p[a] / (2 * g.step[a])))
	}
	return k
}

func (g *vertexGrid) has(p [3]float64) bool {
	c := g.cell(p)
	for dx := int64(-1); dx <= 1; dx++ {
		for dy := int64(-1); dy <= 1; dy++ {
			for dz := int64(-1); dz <= 1; dz++ {
				for _, v := range g.cells[[3]int64{c[0] + dx, c[1] + dy, c[2] + dz}] {
					if within(p, v, g.step) {
						return true
					}
				}
			}
		}
	}
	return false
}

// allMeshStores are meshStores and the connectome store (seven levels,
// level 0 far finer than its coarse levels).
func allMeshStores(t testing.TB) []*zvf.Store {
	return append(meshStores(t), connectomeStore(t, cache.New(256<<20)))
}

// meshStores are mesh stores of one, two and three levels: the reference
// mesh (level 0 only), the ZVF 0.9 meshes (level 1 has faces of its own)
// and the demo's meshes (levels 1 and 2 hold metavertices, no faces).
func meshStores(t testing.TB) []*zvf.Store {
	ch := cache.New(256 << 20)
	out := []*zvf.Store{storeNamed(t, fixtureStores(t), "mesh")}
	for _, name := range []string{"mesh_v09", "mesh_sharded_v09"} {
		out = append(out, apitest.Open(t, filepath.Join("../../testdata/zvf-0.9", name+".zarrvectors"), name, ch))
	}
	for _, st := range demoStores(t, ch) {
		if st.Name() == "meshes" {
			out = append(out, st)
		}
	}
	return out
}

// TestMultilodMatchesTheReader decodes every multilod manifest and
// fragment of every mesh store (Go decoder) and checks them against the
// reader: LOD 0 holds exactly the object's level-0 faces (dequantized,
// within a quantization step, in order, winding kept); LOD z holds level
// z's own faces where the store has no more of them than LOD z−1 has
// triangles, and otherwise triangles on level z's vertices; triangle counts
// never grow with the LOD; the manifest holds what Neuroglancer needs.
func TestMultilodMatchesTheReader(t *testing.T) {
	ctx := context.Background()
	for _, st := range allMeshStores(t) {
		t.Run(st.Name(), func(t *testing.T) {
			_, ts := newServer(t, api.Options{Stores: []*zvf.Store{st}})
			base := "/ng/" + st.Name() + "/multilod"
			var inf struct {
				Type      string    `json:"@type"`
				Bits      int       `json:"vertex_quantization_bits"`
				Transform []float64 `json:"transform"`
				Mult      float64   `json:"lod_scale_multiplier"`
				SegProps  string    `json:"segment_properties"`
			}
			if err := json.Unmarshal(apitest.MustGet(t, ts, base+"/info"), &inf); err != nil {
				t.Fatal(err)
			}
			nm := 1.0
			if strings.HasPrefix(st.Info().Axes[0].Unit, "micro") {
				nm = 1000
			}
			if inf.Type != "neuroglancer_multilod_draco" || inf.Bits != ngBits || !(inf.Mult > 0) || !strings.HasSuffix(inf.SegProps, "/seg_props") ||
				fmt.Sprint(inf.Transform) != fmt.Sprint([]float64{nm, 0, 0, 0, 0, nm, 0, 0, 0, 0, nm, 0}) {
				t.Fatalf("info %+v", inf)
			}
			var levels []*zvf.Level
			for _, n := range st.Levels() {
				l, _ := st.Level(n)
				levels = append(levels, l)
			}
			coarse := 0 // triangles at LOD > 0, over every object
			l0 := levels[0]
			for id := range l0.Info().ObjectCount + 1 {
				has, err := l0.HasObject(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				path := fmt.Sprintf("%s/%d", base, id)
				if !has {
					for _, p := range []string{path, path + ".index"} {
						if resp, _ := apitest.Get(t, ts, p); resp.StatusCode != http.StatusNotFound {
							t.Fatalf("%s: %d for an object that does not exist", p, resp.StatusCode)
						}
					}
					continue
				}
				resp, index := apitest.Get(t, ts, path+".index")
				if resp.StatusCode != http.StatusOK || resp.ContentLength != int64(len(index)) {
					t.Fatalf("%s: %d, Content-Length %d for %d bytes", path, resp.StatusCode, resp.ContentLength, len(index))
				}
				data := apitest.MustGet(t, ts, path)
				m, err := decodeManifest(index)
				if err != nil {
					t.Fatalf("%s.index: %v", path, err)
				}
				if err := checkManifest(m, len(data)); err != nil {
					t.Fatalf("%s.index: %v", path, err)
				}
				if len(m.lods) != len(levels) {
					t.Fatalf("%s: %d LODs for a store of %d levels", path, len(m.lods), len(levels))
				}
				if err := decodeFragments(m, data); err != nil {
					t.Fatalf("%s: %v", path, err)
				}
				o, err := l0.Object(ctx, id, nil)
				if err != nil {
					t.Fatal(err)
				}
				if err := sameTriangles(m.triangles(0), faceTriangles(o), m.step(0)); err != nil {
					t.Fatalf("%s LOD 0: %v", path, err)
				}
				for z := 1; z < len(m.lods); z++ {
					got, finer := m.triangles(z), m.triangles(z-1)
					if len(got) > len(finer) {
						t.Fatalf("%s: %d triangles at LOD %d, %d at LOD %d", path, len(got), z, len(finer), z-1)
					}
					coarse += len(got)
					if len(got) == 0 {
						continue
					}
					oz, err := levels[z].Object(ctx, id, nil)
					if err != nil {
						t.Fatal(err)
					}
					if own := faceTriangles(oz); len(own) > 0 && len(own) <= len(finer) {
						if err := sameTriangles(got, own, m.step(z)); err != nil {
							t.Fatalf("%s LOD %d against level %d's faces: %v", path, z, z, err)
						}
						continue
					}
					// Triangles on level z's vertices, each once.
					near := newVertexGrid(oz, m.step(z))
					seen := map[[3][3]float64]bool{}
					for _, tri := range got {
						k := tri
						for _, r := range [][3][3]float64{{tri[1], tri[2], tri[0]}, {tri[2], tri[0], tri[1]}} {
							if cornersLess(r, k) {
								k = r
							}
						}
						if seen[k] {
							t.Fatalf("%s LOD %d: triangle %v twice", path, z, tri)
						}
						seen[k] = true
						for _, p := range tri {
							if !near.has(p) {
								t.Fatalf("%s LOD %d: corner %v is no vertex of the object at level %d", path, z, p, z)
							}
						}
					}
				}
			}
			if len(levels) > 1 && coarse == 0 {
				t.Fatal("no object has a triangle at a coarse LOD")
			}
		})
	}
}

// TestMultilodRanges: Neuroglancer fetches each fragment with a Range
// request: 206 with exactly those bytes, Content-Range giving the total,
// never content-encoded, readable across origins; the index is whole.
func TestMultilodRanges(t *testing.T) {
	st := meshStores(t)[1] // mesh_v09: two LODs
	_, ts := newServer(t, api.Options{Stores: []*zvf.Store{st}})
	base := "/ng/" + st.Name() + "/multilod/2"
	origin := "http://viewer.example"
	resp, _ := apitest.Do(t, ts, http.MethodOptions, base, "Origin", origin, "Access-Control-Request-Method", "GET", "Access-Control-Request-Headers", "range")
	if resp.StatusCode != http.StatusNoContent || !strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "Range") {
		t.Fatalf("preflight: %d %v", resp.StatusCode, resp.Header)
	}
	data := apitest.MustGet(t, ts, base)
	m, err := decodeManifest(apitest.MustGet(t, ts, base+".index"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, nodes := range m.lods {
		for _, nd := range nodes {
			if nd.size == 0 {
				continue
			}
			n++
			rng := fmt.Sprintf("bytes=%d-%d", nd.start, nd.start+nd.size-1)
			resp, body := apitest.Get(t, ts, base, "Range", rng, "Origin", origin, "Accept-Encoding", "gzip, deflate, br, zstd")
			want := fmt.Sprintf("bytes %d-%d/%d", nd.start, nd.start+nd.size-1, len(data))
			if resp.StatusCode != http.StatusPartialContent || string(body) != string(data[nd.start:nd.start+nd.size]) ||
				resp.Header.Get("Content-Range") != want || resp.Header.Get("Content-Encoding") != "" ||
				!strings.Contains(resp.Header.Get("Access-Control-Expose-Headers"), "Content-Range") {
				t.Fatalf("%s: %d, %d bytes, Content-Range %q (want %q), Content-Encoding %q, headers %v", rng, resp.StatusCode, len(body),
					resp.Header.Get("Content-Range"), want, resp.Header.Get("Content-Encoding"), resp.Header)
			}
		}
	}
	if n < 2 {
		t.Fatalf("%d fragments with data", n)
	}
	if resp, _ := apitest.Get(t, ts, base, "Range", fmt.Sprintf("bytes=%d-", len(data)+10)); resp.StatusCode != http.StatusRequestedRangeNotSatisfiable {
		t.Fatalf("a range past the end: %d", resp.StatusCode)
	}
}

// countingCache counts the loads of each key.
type countingCache struct {
	*cache.Cache
	mu    sync.Mutex
	loads map[string]int
	sizes map[string]int64
}

func (c *countingCache) Get(ctx context.Context, key string, load func(context.Context) (any, int64, error)) (any, error) {
	return c.Cache.Get(ctx, key, c.counted(key, load))
}

// GetDetached counts too (the package builds its values detached).
func (c *countingCache) GetDetached(ctx context.Context, key string, load func(context.Context) (any, int64, error)) (any, error) {
	return c.Cache.GetDetached(ctx, key, c.counted(key, load))
}

func (c *countingCache) counted(key string, load func(context.Context) (any, int64, error)) func(context.Context) (any, int64, error) {
	return func(ctx context.Context) (any, int64, error) {
		v, n, err := load(ctx)
		c.mu.Lock()
		c.loads[key]++
		c.sizes[key] = n
		c.mu.Unlock()
		return v, n, err
	}
}

// TestMultilodBuiltOncePerSegment: a segment's manifest and fragments are
// built once, on its first request, and kept in the cache at their size;
// no other segment is built with it.
func TestMultilodBuiltOncePerSegment(t *testing.T) {
	st := meshStores(t)[1]
	ch := &countingCache{Cache: cache.New(64 << 20), loads: map[string]int{}, sizes: map[string]int64{}}
	// The package's routes alone, so that the cache is the counting one.
	ng := neuroglancer.New(neuroglancer.Options{
		Store: func(*http.Request) (*zvf.Store, error) { return st, nil },
		Serve: func(h func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) {
				if err := h(w, r); err != nil {
					http.Error(w, err.Error(), http.StatusInternalServerError)
				}
			}
		},
		NotModified: func(http.ResponseWriter, *http.Request, string) bool { return false },
		Cache:       ch,
	})
	r := chi.NewRouter()
	r.Route("/ng/{store}", ng.Routes)
	ts := httptest.NewServer(r)
	t.Cleanup(ts.Close)
	base := "/ng/" + st.Name() + "/multilod/1"
	index := apitest.MustGet(t, ts, base+".index")
	data := apitest.MustGet(t, ts, base)
	if resp, _ := apitest.Get(t, ts, base, "Range", "bytes=0-9"); resp.StatusCode != http.StatusPartialContent {
		t.Fatalf("range: %d", resp.StatusCode)
	}
	apitest.MustGet(t, ts, base+".index")
	var built []string
	for k, n := range ch.loads {
		if _, id, ok := strings.Cut(k, ";scale=1\x00multilod\x00"); ok && !strings.Contains(id, "\x00") {
			built = append(built, strconv.Quote(id))
			if n != 1 || ch.sizes[k] < int64(len(index)+len(data)) {
				t.Errorf("segment %s built %d times, cached as %d bytes for %d", id, n, ch.sizes[k], len(index)+len(data))
			}
		}
	}
	if len(built) != 1 || built[0] != `"1"` {
		t.Fatalf("segments built: %v", built)
	}
}

// TestMultilodProblems: what a multilod route cannot answer.
func TestMultilodProblems(t *testing.T) {
	stores := fixtureStores(t)
	_, ts := newServer(t, api.Options{Stores: stores, MaxVertices: 100})
	wantProblems(t, ts, []problemCase{
		{"/ng/points_pyramid/multilod/info", 404, "these Neuroglancer sources: /ng/points_pyramid/annotations"},
		{"/ng/mesh/multilod/99.index", 404, "no object 99"},
		{"/ng/mesh/multilod/99", 404, "no object 99"},
		{"/ng/mesh/multilod/x.index", 400, "not a decimal integer"},
		{"/ng/mesh/multilod/01", 400, "not a decimal integer"},
		{"/ng/mesh/multilod/1.index", 413, "more than this server's 100"},
		{"/ng/mesh/multilod/1", 413, "more than this server's 100"},
	})
	if resp, body := apitest.Get(t, ts, "/ng/mesh/multilod/seg_props/info"); resp.StatusCode != 200 || !strings.Contains(string(body), "neuroglancer_segment_properties") {
		t.Errorf("seg_props: %d %.200s", resp.StatusCode, body)
	}
}

// TestDracoDecoderDecodesEveryFragment runs Draco's own decoder
// (draco_decoder, Debian's draco) over every multilod fragment of every
// mesh store, and compares what it reads with the Go decoder's reading.
// Without the tool the test is skipped, unless ZVFSERVE_REQUIRE_DRACO is
// set (CI sets it): then it fails.
func TestDracoDecoderDecodesEveryFragment(t *testing.T) {
	bin := zvftest.Tool(t, "ZVFSERVE_REQUIRE_DRACO", "draco_decoder is not on PATH (apt-get install draco)", "draco_decoder")
	ctx := context.Background()
	dir := t.TempDir()
	n := 0
	for _, st := range allMeshStores(t) {
		_, ts := newServer(t, api.Options{Stores: []*zvf.Store{st}})
		l0, _ := st.Level(0)
		for id := range l0.Info().ObjectCount {
			if has, err := l0.HasObject(ctx, id); err != nil || !has {
				continue
			}
			path := fmt.Sprintf("/ng/%s/multilod/%d", st.Name(), id)
			m, err := decodeManifest(apitest.MustGet(t, ts, path+".index"))
			if err != nil {
				t.Fatal(err)
			}
			data := apitest.MustGet(t, ts, path)
			for lod, nodes := range m.lods {
				for _, nd := range nodes {
					if nd.size == 0 {
						continue
					}
					frag := data[nd.start : nd.start+nd.size]
					f := filepath.Join(dir, fmt.Sprintf("%s-%d-%d.drc", st.Name(), id, lod))
					if err := os.WriteFile(f, frag, 0o644); err != nil {
						t.Fatal(err)
					}
					out, err := exec.Command(bin, "-i", f, "-o", f+".ply").CombinedOutput()
					if err != nil {
						t.Fatalf("%s LOD %d: draco_decoder: %v\n%s", path, lod, err, out)
					}
					ply, err := os.ReadFile(f + ".ply")
					if err != nil {
						t.Fatal(err)
					}
					np, pos, faces, err := dracotest.ReadPLY(ply)
					if err != nil {
						t.Fatalf("%s LOD %d: draco_decoder's PLY: %v", path, lod, err)
					}
					d, err := dracotest.Decode(frag)
					if err != nil {
						t.Fatal(err)
					}
					if np != d.NumPoints || !slices.Equal(pos, d.Positions) || !slices.Equal(faces, d.Faces) || len(faces) == 0 {
						t.Fatalf("%s LOD %d: draco_decoder reads %d points and %d faces, the Go decoder %d and %d, or they differ",
							path, lod, np, len(faces)/3, d.NumPoints, len(d.Faces)/3)
					}
					n++
				}
			}
		}
	}
	t.Logf("%d fragments", n)
}

// TestMultilodLevelsKeepObjectIDs: a coarse level whose objects are not
// level 0's (no preserves_object_ids) ends the levels of detail there.
func TestMultilodLevelsKeepObjectIDs(t *testing.T) {
	dir := zvftest.CopyTree(t, "../../testdata/zvf-0.9/mesh_v09.zarrvectors")
	meta := filepath.Join(dir, "1", "zarr.json")
	b, err := os.ReadFile(meta)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(b), `"preserves_object_ids": true`, `"preserves_object_ids": false`, 1)
	if edited == string(b) {
		t.Fatal("level 1 does not say it preserves object ids")
	}
	if err := os.WriteFile(meta, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		lods int
	}{{"../../testdata/zvf-0.9/mesh_v09.zarrvectors", 2}, {dir, 1}} {
		st := apitest.Open(t, tc.path, "m", cache.New(64<<20))
		_, ts := newServer(t, api.Options{Stores: []*zvf.Store{st}})
		m, err := decodeManifest(apitest.MustGet(t, ts, "/ng/m/multilod/0.index"))
		if err != nil {
			t.Fatal(err)
		}
		var inf struct {
			ZVF struct {
				Levels []int `json:"lod_levels"`
			} `json:"zvfserve"`
		}
		if err := json.Unmarshal(apitest.MustGet(t, ts, "/ng/m/multilod/info"), &inf); err != nil {
			t.Fatal(err)
		}
		if len(m.lods) != tc.lods || len(inf.ZVF.Levels) != tc.lods {
			t.Errorf("%s: %d LODs, info lists levels %v; want %d", tc.path, len(m.lods), inf.ZVF.Levels, tc.lods)
		}
	}
}

// TestMeshStateOpensOnTheStore: a mesh source tells Neuroglancer no
// bounds, so a mesh store's ready state says where to look, or
// Neuroglancer opens on a 1 µm box at the origin. The state names the mesh
// source's dimensions (x, y, z) in the store's unit, centres the store's
// box and shows its widest extent rounded up to a power of two, as
// Neuroglancer opens on a box it knows.
func TestMeshStateOpensOnTheStore(t *testing.T) {
	ch := cache.New(256 << 20)
	for _, tc := range []struct {
		st       *zvf.Store
		unit     float64
		position []float64
		scale    float64
	}{
		{storeNamed(t, demoStores(t, ch), "meshes"), 1e-6, nil, 1024},
		{connectomeStore(t, ch), 1e-9, []float64{30000, 30000, 30000}, 65536},
	} {
		t.Run(tc.st.Name(), func(t *testing.T) {
			_, ts := newServer(t, api.Options{Stores: []*zvf.Store{tc.st}})
			s, err := decodeReadyView(apitest.MustGet(t, ts, "/api/v1/stores/"+tc.st.Name()))
			if err != nil {
				t.Fatal(err)
			}
			want := tc.position
			if want == nil {
				b := tc.st.Info().Bounds
				for a := range 3 {
					want = append(want, (b[0][a]+b[1][a])/2)
				}
			}
			if fmt.Sprint(s.Dimensions) != fmt.Sprint(map[string][2]any{"x": {tc.unit, "m"}, "y": {tc.unit, "m"}, "z": {tc.unit, "m"}}) ||
				!slices.Equal(s.Position, want) || s.ProjectionScale != tc.scale {
				t.Errorf("state dimensions %v, position %v, projectionScale %v; want %g m, %v, %v", s.Dimensions, s.Position, s.ProjectionScale, tc.unit, want, tc.scale)
			}
		})
	}
}

// cornersLess orders triangles by their corners' coordinates in turn: the
// least of a triangle's rotations names it whichever corner comes first.
func cornersLess(a, b [3][3]float64) bool {
	for i := range a {
		if c := slices.Compare(a[i][:], b[i][:]); c != 0 {
			return c < 0
		}
	}
	return false
}
