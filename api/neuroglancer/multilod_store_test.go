package neuroglancer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path"
	"sync"
	"testing"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/writer"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// The connectome store is a mesh store at the scale multilod is for:
// neurons (a soma and two neurites each) meshed with edges of about
// connectomeEdge nanometres in a box connectomeSide nanometres wide, so
// that at Neuroglancer's default view of the whole box (about 100 nm a
// pixel) dozens of triangles fall in one pixel, as connectome meshes at a
// whole-dataset view do. Its pyramid's bins step by 2× from the edge
// length to several pixels, so some level is about a pixel coarse
// wherever a neuron is. Small enough for SwiftShader (legacy meshes of a
// few MB).
const (
	connectomeSide    = 60000.0 // nm
	connectomeEdge    = 12.0    // nm, the level-0 edge length and bin
	connectomeNeurons = 14
)

// connectomeMesh builds the neurons, deterministically.
func connectomeMesh() *writer.Mesh {
	r := rand.New(rand.NewPCG(28, 1))
	m := &writer.Mesh{FaceWidth: 3, FragmentPerObject: true}
	for id := range int64(connectomeNeurons) {
		var c [3]float64
		for a := range c {
			c[a] = connectomeSide * (0.1 + 0.8*r.Float64())
		}
		// The soma: a sphere with edges of about connectomeEdge.
		const somaR = 150.0
		rings := int(math.Ceil(math.Pi * somaR / connectomeEdge))
		segs := 2 * rings
		base := int64(len(m.Positions) / 3)
		for i := 0; i <= rings; i++ {
			th := math.Pi * float64(i) / float64(rings)
			for j := range segs {
				ph := 2 * math.Pi * float64(j) / float64(segs)
				addVertex(m, id, [3]float64{c[0] + somaR*math.Sin(th)*math.Cos(ph), c[1] + somaR*math.Sin(th)*math.Sin(ph), c[2] + somaR*math.Cos(th)})
			}
		}
		tubeFaces(m, base, rings, segs, true)
		// Two neurites: tubes from the soma's surface along a gently
		// bending path.
		for range 2 {
			const tubeR, length = 50.0, 2500.0
			dir := unitVec(r)
			bend := unitVec(r)
			along := int(math.Round(length / connectomeEdge))
			segs := int(math.Ceil(2 * math.Pi * tubeR / connectomeEdge))
			base := int64(len(m.Positions) / 3)
			for i := 0; i <= along; i++ {
				s := float64(i) / float64(along)
				p, tan := [3]float64{}, [3]float64{}
				for a := range 3 {
					p[a] = c[a] + dir[a]*(somaR*0.9+s*length) + bend[a]*0.2*length*math.Sin(math.Pi*s)
					tan[a] = dir[a]*length + bend[a]*0.2*length*math.Pi*math.Cos(math.Pi*s)
				}
				n1 := normalize(cross(tan, [3]float64{0.3, 0.5, 0.8}))
				n2 := normalize(cross(tan, n1))
				for j := range segs {
					ph := 2 * math.Pi * float64(j) / float64(segs)
					var q [3]float64
					for a := range 3 {
						q[a] = p[a] + tubeR*(math.Cos(ph)*n1[a]+math.Sin(ph)*n2[a])
					}
					addVertex(m, id, q)
				}
			}
			tubeFaces(m, base, along, segs, false)
		}
	}
	return m
}

func addVertex(m *writer.Mesh, id int64, p [3]float64) {
	for _, v := range p {
		m.Positions = append(m.Positions, float32(min(max(v, 0), connectomeSide)))
	}
	m.ObjectIDs = append(m.ObjectIDs, id)
}

// tubeFaces adds the triangles of a (rings+1) × segs vertex grid wrapped
// around its segment axis; a sphere's pole rings (one point each) get no
// degenerate faces.
func tubeFaces(m *writer.Mesh, base int64, rings, segs int, sphere bool) {
	for i := range rings {
		for j := range segs {
			a := base + int64(i*segs+j)
			b := base + int64(i*segs+(j+1)%segs)
			c, d := a+int64(segs), b+int64(segs)
			if !sphere || i > 0 {
				m.Faces = append(m.Faces, a, c, b)
			}
			if !sphere || i < rings-1 {
				m.Faces = append(m.Faces, b, c, d)
			}
		}
	}
}

func unitVec(r *rand.Rand) [3]float64 {
	return normalize([3]float64{r.NormFloat64(), r.NormFloat64(), r.NormFloat64()})
}

func cross(u, v [3]float64) [3]float64 {
	return [3]float64{u[1]*v[2] - u[2]*v[1], u[2]*v[0] - u[0]*v[2], u[0]*v[1] - u[1]*v[0]}
}

func normalize(v [3]float64) [3]float64 {
	n := math.Sqrt(v[0]*v[0] + v[1]*v[1] + v[2]*v[2])
	return [3]float64{v[0] / n, v[1] / n, v[2] / n}
}

// connectomeBucket is the connectome mesh store (in nanometres, level 0
// binned at the edge length, coarse levels binned 2×, 4×, … 64× that)
// written once into memory under "connectome": writing it costs seconds,
// and the tests only read it.
var connectomeBucket = sync.OnceValues(func() (storage.Store, error) {
	ctx := context.Background()
	mem, err := blobstore.Open(ctx, "mem://")
	if err != nil {
		return nil, err
	}
	o := writer.Options{ChunkShape: []float64{15000, 15000, 15000}, BinShape: []float64{connectomeEdge, connectomeEdge, connectomeEdge},
		Bounds: &[2][]float64{{0, 0, 0}, {connectomeSide, connectomeSide, connectomeSide}}, Unit: "nanometer"}
	for c := 2.0; c <= 64; c *= 2 {
		o.Pyramid = append(o.Pyramid, writer.PyramidLevel{Coarsen: c})
	}
	if _, err := writer.WriteMesh(ctx, mem, "connectome", connectomeMesh(), o); err != nil {
		return nil, err
	}
	return mem, nil
})

// connectomeStore opens the connectome mesh store as "connectome" with
// its own cache.
func connectomeStore(t testing.TB, ch *cache.Cache) *zvf.Store {
	t.Helper()
	mem, err := connectomeBucket()
	if err != nil {
		t.Fatal(err)
	}
	return zvftest.OpenSub(t, mem, "connectome", ch)
}

// ngPanel is the size in CSS pixels of the 3-D panel of the browser
// test's Neuroglancer (layout "3d" in a 1000 × 700 window, less the
// viewer's bars), as its screenshots have it; the browser test checks it.
var ngPanel = [2]int{1000, 510}

// meshView is a view of a mesh store as Neuroglancer's perspective panel
// has it, for replaying which LODs it fetches: either every segment at one
// pixel size px (store units), or the panel ngPanel looking along +z at
// centre with projectionScale (the panel's height at centre, store units)
// and no rotation, as a store's ready state opens it.
type meshView struct {
	px              float64
	centre          [3]float64
	projectionScale float64
}

// readyView is the view a store descriptor's ready state opens on.
type readyView struct {
	Dimensions      map[string][2]any `json:"dimensions"`
	Position        []float64         `json:"position"`
	ProjectionScale float64           `json:"projectionScale"`
}

// decodeReadyView reads the ready state's view from a store descriptor.
func decodeReadyView(descriptor []byte) (readyView, error) {
	var d struct {
		Neuroglancer struct {
			State readyView `json:"state"`
		} `json:"neuroglancer"`
	}
	err := json.Unmarshal(descriptor, &d)
	return d.Neuroglancer.State, err
}

// stateMeshView is the view the ready state of store name (as h serves
// its descriptor) opens on, with Neuroglancer's perspective panel; its
// axes must share one unit, so the state's units are store units.
func stateMeshView(t testing.TB, h http.Handler, name string) meshView {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "http://x/api/v1/stores/"+name, nil)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	s, err := decodeReadyView(w.Body.Bytes())
	if err != nil {
		t.Fatalf("descriptor of %s: %d %v", name, w.Code, err)
	}
	if len(s.Position) != 3 || !(s.ProjectionScale > 0) || s.Dimensions["x"] != s.Dimensions["y"] || s.Dimensions["x"] != s.Dimensions["z"] {
		t.Fatalf("store %s's state opens on no view of one unit: %+v", name, s)
	}
	return meshView{centre: [3]float64(s.Position), projectionScale: s.ProjectionScale}
}

func (v meshView) String() string {
	if v.px > 0 {
		return fmt.Sprintf("px=%g", v.px)
	}
	return "view=default"
}

// pixel is the pixel size Neuroglancer gives a segment whose box's low
// corner is lo (mesh/multiscale.ts getDesiredMultiscaleMeshChunks): the
// depth of the box's nearest point divided by f·height, f = 1/tan(fovy/2)
// with fovy 45° and the camera 1.2071 projectionScale in front of the
// centre (perspective_view/panel.ts) — half the screen pixel there.
func (v meshView) pixel(lo [3]float64) float64 {
	if v.px > 0 {
		return v.px
	}
	f := 1 / math.Tan(math.Pi/8)
	camera := v.centre[2] - v.projectionScale/2*f
	return (lo[2] - camera) / (f * float64(ngPanel[1]))
}

// fetchPlain is h's answer to a GET of p, which must be a 200.
func fetchPlain(t testing.TB, h http.Handler, p string) []byte {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "http://x"+p, nil))
	if w.Code != http.StatusOK {
		t.Fatalf("%s: %d %s", p, w.Code, w.Body.Bytes())
	}
	return w.Body.Bytes()
}

// replayMeshView sums the bytes each mesh source of st sends (as h
// answers) for Neuroglancer to show every segment in view v: legacy (the
// info, seg_props info, each object's fragment list and fragment,
// zstd-encoded as Chromium takes them) against multilod (read through
// the segments source, as the ready state's layer reads them: the info and
// seg_props info it names, each object's manifest and, by Range, the fragments of
// the LODs Neuroglancer passes: from the top LOD down, each finer one
// while the segment's pixel size is below the coarser LOD's lod_scale).
func replayMeshView(t testing.TB, h http.Handler, st *zvf.Store, v meshView) (legacy, multilod int64) {
	t.Helper()
	ctx := context.Background()
	fetch := func(path string, hdr ...string) []byte {
		req := httptest.NewRequest(http.MethodGet, "http://x"+path, nil)
		req.Header.Set("Accept-Encoding", "gzip, deflate, br, zstd")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK && w.Code != http.StatusPartialContent {
			t.Fatalf("%s: %d %s", path, w.Code, w.Body.Bytes())
		}
		return w.Body.Bytes()
	}
	l0, err := st.Level(0)
	if err != nil {
		t.Fatal(err)
	}
	base := "/ng/" + st.Name()
	legacy += int64(len(fetch(base+"/meshes/info")) + len(fetch(base+"/meshes/seg_props/info")))
	// The ready state's layer reads the multilod meshes through the
	// segments source: where its info names them, under the version.
	var seg struct {
		Mesh  string `json:"mesh"`
		Props string `json:"segment_properties"`
	}
	if err := json.Unmarshal(fetchPlain(t, h, base+"/segments/info"), &seg); err != nil || seg.Mesh == "" {
		t.Fatalf("the segments info names no meshes: %v", err)
	}
	mesh := path.Join(base+"/segments", seg.Mesh)
	multilod += int64(len(fetch(mesh+"/info")) + len(fetch(path.Join(base+"/segments", seg.Props, "info"))))
	for id := range l0.Info().ObjectCount {
		if ok, err := l0.HasObject(ctx, id); err != nil || !ok {
			continue
		}
		legacy += int64(len(fetch(fmt.Sprintf("%s/meshes/%d:0", base, id))))
		legacy += int64(len(fetch(fmt.Sprintf("%s/meshes/frag/%d", base, id))))
		index := fetch(fmt.Sprintf("%s/%d.index", mesh, id))
		multilod += int64(len(index))
		m, err := decodeManifest(index)
		if err != nil {
			t.Fatal(err)
		}
		// Every LOD's nodes are clipped to the LOD-0 nodes' box, whose
		// low corner sets the segment's pixel size.
		lo := [3]float64{math.Inf(1), math.Inf(1), math.Inf(1)}
		for _, nd := range m.lods[0] {
			for a := range 3 {
				lo[a] = min(lo[a], float64(m.origin[a])+float64(nd.pos[a])*float64(m.chunk[a]))
			}
		}
		px := v.pixel(lo)
		for z := len(m.lods) - 1; z >= 0; z-- {
			for _, nd := range m.lods[z] {
				if nd.size > 0 {
					multilod += int64(len(fetch(fmt.Sprintf("%s/%d", mesh, id), "Range", fmt.Sprintf("bytes=%d-%d", nd.start, nd.start+nd.size-1))))
				}
			}
			if !(px < float64(m.scales[z])) {
				break
			}
		}
	}
	return legacy, multilod
}
