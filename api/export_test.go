package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/writer"
)

// The export tests run on the demo stores and on small stores built here
// for what the demo lacks: a graph with a cycle, a graph stored parent
// first with swc_type, streamlines with a TRK or NIfTI header, a quad
// mesh with z, y, x axes in nanometres, points with NaN, multi-channel,
// int64 and categorical attributes.

// obliqueAffine is a vox_to_ras with rotation, anisotropic voxels and a
// flip (row-major), as a TRK header keeps it.
var obliqueAffine = []float64{
	-1.2 * 0.96, -1.2 * 0.28, 0, 90,
	2.0 * 0.28, -2.0 * 0.96 * 0.9, 2.0 * 0.436, -126,
	0, 1.5 * 0.436 * -0.3, 1.5 * 0.9, -72,
	0, 0, 0, 1,
}

var exportStores = sync.OnceValues(func() ([]*zvf.Store, error) {
	ctx := context.Background()
	mem, err := blobstore.Open(ctx, "mem://")
	if err != nil {
		return nil, err
	}
	o := writer.Options{ChunkShape: []float64{50, 50, 50}}
	put := func(prefix, format string, attrs map[string]any) error {
		b, err := json.Marshal(map[string]any{"zarr_format": 3, "node_type": "group", "attributes": attrs})
		if err != nil {
			return err
		}
		return mem.Put(ctx, prefix+"/headers/"+format+"/zarr.json", b)
	}
	// cycle: a triangle (0 1 2) and a chain (3 4 5).
	if _, err := writer.WriteGraph(ctx, mem, "cycle", &writer.Graph{
		Positions: []float32{1, 1, 1, 20, 1, 1, 10, 20, 1, 60, 60, 60, 70, 60, 60, 80, 60, 60},
		Edges:     []int64{0, 1, 1, 2, 2, 0, 3, 4, 4, 5},
		ObjectIDs: []int64{0, 0, 0, 1, 1, 1},
	}, o); err != nil {
		return nil, err
	}
	// tree: edges stored (parent, child); swc_type and radius attributes.
	tree := &writer.Graph{ObjectIDs: make([]int64, 9)}
	var radius []float32
	var types []int32
	for i := range 9 {
		tree.Positions = append(tree.Positions, float32(i)*7.25+0.1, float32(i%3)*3.3, 1.0/3)
		radius = append(radius, 0.5+float32(i)/7)
		types = append(types, int32(1+i%3))
	}
	tree.Edges = []int64{0, 1, 1, 2, 1, 3, 0, 4, 4, 5, 5, 6, 6, 7, 4, 8}
	tree.Attributes = []writer.Attribute{writer.Float32Attribute("radius", 1, radius), writer.Int32Attribute("swc_type", 1, types)}
	if _, err := writer.WriteGraph(ctx, mem, "tree", tree, o); err != nil {
		return nil, err
	}
	// tracts: three streamlines, one crossing chunks; TRK, NIfTI and
	// voxmm-space copies.
	pl := &writer.Polylines{Offsets: []int{0}}
	for s := range 3 {
		for k := range 12 + 5*s {
			pl.Positions = append(pl.Positions, 3+float32(k)*7.7, 10+float32(s)*11.1+float32(k%4), 25+float32(k)*0.37)
		}
		pl.Offsets = append(pl.Offsets, len(pl.Positions)/3)
	}
	for _, name := range []string{"tracts", "tracts_nifti", "tracts_voxmm"} {
		if _, err := writer.WritePolylines(ctx, mem, name, pl, o); err != nil {
			return nil, err
		}
	}
	if err := put("tracts", "trk", map[string]any{"format_name": "trk", "vox_to_ras": obliqueAffine, "voxel_size": []float64{1.2, 2, 1.5},
		"dimensions": []int{160, 128, 96}, "voxel_order": "LAS", "space": "rasmm"}); err != nil {
		return nil, err
	}
	if err := put("tracts_nifti", "nifti", map[string]any{"format_name": "nifti", "affine": obliqueAffine, "voxel_sizes": []float64{1.2, 2, 1.5},
		"dimensions": []int{160, 128, 96}}); err != nil {
		return nil, err
	}
	if err := put("tracts_voxmm", "trk", map[string]any{"format_name": "trk", "vox_to_ras": obliqueAffine, "space": "voxmm"}); err != nil {
		return nil, err
	}
	// quads: a 4×3 grid of quads, axes z, y, x in nanometres, and two
	// vertices no face uses.
	quads := &writer.Mesh{FaceWidth: 4}
	for j := range 4 {
		for i := range 5 {
			quads.Positions = append(quads.Positions, 5+float32(j)*4, 5+float32(i)*4.5, 5+float32(i*j)*0.25)
		}
	}
	quads.Positions = append(quads.Positions, 40, 40, 40, 41, 41, 41)
	for j := range 3 {
		for i := range 4 {
			v := int64(j*5 + i)
			quads.Faces = append(quads.Faces, v, v+1, v+6, v+5)
		}
	}
	if _, err := writer.WriteMesh(ctx, mem, "quads", quads, writer.Options{ChunkShape: []float64{50, 50, 50}, Axes: []string{"z", "y", "x"}, Unit: "nanometer"}); err != nil {
		return nil, err
	}
	// pts: points with awkward attributes.
	pts := &writer.PointCloud{}
	var f32 []float32
	var rgb []float32
	var big []int64
	var kind []string
	for i := range 40 {
		pts.Positions = append(pts.Positions, float32(i)*1.1+0.123456789, float32(i%7)*2.2, float32(i%5)*3.3)
		v := float32(i) / 3
		if i%6 == 0 {
			v = float32(math.NaN())
		}
		if i == 7 {
			v = float32(math.Inf(-1))
		}
		f32 = append(f32, v)
		rgb = append(rgb, float32(i), float32(i)/10, 1e-7*float32(i))
		big = append(big, int64(i)*1_000_000_007-(1<<40))
		kind = append(kind, []string{"a, b", `q"uote`, "plain"}[i%3])
		pts.ObjectIDs = append(pts.ObjectIDs, int64(i%4))
	}
	pts.Attributes = []writer.Attribute{writer.Float32Attribute("value", 1, f32), writer.Float32Attribute("rgb", 3, rgb),
		writer.Int64Attribute("big", 1, big), writer.CategoricalAttribute("kind", kind)}
	if _, err := writer.WritePoints(ctx, mem, "pts", pts, o); err != nil {
		return nil, err
	}
	ch := cache.New(64 << 20)
	var out []*zvf.Store
	for _, name := range []string{"cycle", "tree", "tracts", "tracts_nifti", "tracts_voxmm", "quads", "pts"} {
		s, err := zvf.Open(ctx, storage.Sub(mem, name), zvf.Options{Name: name, Cache: ch})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out = append(out, s)
	}
	return out, nil
})

// exportServer serves the demo stores and the export test stores.
func exportServer(t testing.TB, o api.Options) *api.Server {
	t.Helper()
	demo, err := demoStores()
	if err != nil {
		t.Fatal(err)
	}
	mine, err := exportStores()
	if err != nil {
		t.Fatal(err)
	}
	o.Stores = append(slices.Clone(demo), mine...)
	srv := apitest.New(t, o)
	return srv
}

// jsonAnswer is the part of a JSON vertex payload the export tests
// compare with.
type jsonAnswer struct {
	Count      int64                        `json:"count"`
	Vertices   [][]json.Number              `json:"vertices"`
	ObjectIDs  []int64                      `json:"object_ids"`
	Attributes map[string][]json.RawMessage `json:"attributes"`
	Edges      [][2]int64                   `json:"edges"`
	Faces      [][]int64                    `json:"faces"`
	Next       *string                      `json:"next"`
}

func getJSON(t *testing.T, h http.Handler, path string) jsonAnswer {
	t.Helper()
	code, _, body := serve(t, h, path)
	if code != 200 {
		t.Fatalf("%s: %d %s", path, code, body)
	}
	var a jsonAnswer
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	if err := d.Decode(&a); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return a
}

// asF32 parses a number as float32 (the stores are float32: the JSON text
// and a file's text must read back to the same float32). Called per
// value, it calls t.Helper (a stack walk) only on failure.
func asF32(t *testing.T, s string) float32 {
	v, err := strconv.ParseFloat(s, 32)
	if err != nil {
		t.Helper()
		t.Fatalf("%q: %v", s, err)
	}
	return float32(v)
}

// matrixRow is one row of docs/exports.md's format/route matrix.
type matrixRow struct {
	formats []string
	media   []string
	routes  map[string][]string // geometry -> routes
}

// readMatrix parses the format/route matrix of docs/exports.md.
func readMatrix(t *testing.T) []matrixRow {
	t.Helper()
	b, err := os.ReadFile("../docs/exports.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "## Format and route matrix")
	if !ok {
		t.Fatal("docs/exports.md has no format and route matrix")
	}
	var geoms []string
	var rows []matrixRow
	ticked := func(cell string) []string {
		var out []string
		for _, p := range strings.Split(cell, ",") {
			out = append(out, strings.Trim(strings.TrimSpace(p), "`"))
		}
		return out
	}
	for _, line := range strings.Split(after, "\n") {
		if !strings.HasPrefix(line, "|") {
			if len(rows) > 0 {
				break
			}
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		switch {
		case cells[0] == "`f=`":
			geoms = cells[1 : len(cells)-1]
		case strings.HasPrefix(cells[0], "---"):
		default:
			r := matrixRow{formats: ticked(cells[0]), media: ticked(cells[len(cells)-1]), routes: map[string][]string{}}
			for i, g := range geoms {
				if cells[1+i] != "—" {
					r.routes[g] = ticked(cells[1+i])
				}
			}
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 || len(geoms) == 0 {
		t.Fatal("the matrix in docs/exports.md is empty")
	}
	return rows
}

// TestExportMatrix holds the server to docs/exports.md's matrix: every
// format it lists on every geometry and route answers 200 with the media
// type and a download name, every other pair 406 (400 on the chunk
// route, whose f= takes the payload formats only), and the matrix lists
// every format the bbox and object routes take.
func TestExportMatrix(t *testing.T) {
	t.Parallel()
	h := exportServer(t, api.Options{}).Handler()
	stores := map[string]struct{ name, box, id string }{
		"point_cloud": {"cells", "min=0,0,0&max=250,250,250&level=1", "3"},
		"streamline":  {"axons", "min=0,0,0&max=250,250,250&level=1", "3"},
		"skeleton":    {"skeletons", "min=0,0,0&max=1000,1000,600&level=2", "3"},
		"graph":       {"tree", "min=0,0,0&max=100,100,100", "0"},
		"mesh":        {"meshes", "min=0,0,0&max=1000,1000,600&level=2", "1"},
	}
	listed := map[string]bool{}
	for _, row := range readMatrix(t) {
		for fi, f := range row.formats {
			listed[f] = true
			media := row.media[min(fi, len(row.media)-1)]
			for geom, st := range stores {
				for _, route := range []string{"bbox", "object", "chunk"} {
					path := "/api/v1/stores/" + st.name
					switch route {
					case "bbox":
						path += "/bbox?" + st.box
					case "object":
						path += "/objects/" + st.id + "?level=0"
					case "chunk":
						code, _, body := serve(t, h, path+"/levels/0/chunks")
						var l struct{ Chunks []string }
						if code != 200 || json.Unmarshal(body, &l) != nil || len(l.Chunks) == 0 {
							t.Fatalf("%s chunks: %d %s", st.name, code, body)
						}
						path += "/levels/0/chunks/" + l.Chunks[0]
					}
					if strings.Contains(path, "?") {
						path += "&f=" + f
					} else {
						path += "?f=" + f
					}
					code, hdr, body := serveFull(t, h, path)
					want := slices.Contains(row.routes[geom], route)
					switch {
					case want && code != 200:
						t.Errorf("%s (%s): %d %s, the matrix says 200", path, geom, code, body)
					case want && hdr.Get("Content-Type") != media:
						t.Errorf("%s: Content-Type %q, want %q", path, hdr.Get("Content-Type"), media)
					case want && !strings.HasPrefix(f, "json") && f != "ndjson" && f != "bin" && f != "arrow" && f != "geoarrow" &&
						!strings.Contains(hdr.Get("Content-Disposition"), `filename="`+st.name+"-"):
						t.Errorf("%s: Content-Disposition %q", path, hdr.Get("Content-Disposition"))
					case !want && route == "chunk":
						problemOf(t, 400, body)
					case !want:
						p := problemOf(t, 406, body)
						if !strings.Contains(p.Detail, "f="+f+" cannot hold") || hdr.Get("Content-Disposition") != "" {
							t.Errorf("%s: 406 %q, Content-Disposition %q", path, p.Detail, hdr.Get("Content-Disposition"))
						}
					}
				}
			}
		}
	}
	// Every format the routes take is in the matrix.
	code, _, body := serve(t, h, "/api/v1/stores/cells/bbox?min=0,0,0&max=1,1,1&f=nope")
	p := problemOf(t, 400, body)
	for _, f := range strings.FieldsFunc(p.Detail[strings.Index(p.Detail, "use ")+4:], func(r rune) bool { return r == ',' || r == ' ' }) {
		if f != "or" && !listed[strings.Trim(f, `"`)] {
			t.Errorf("f=%s is served (%d: %s) but not in docs/exports.md's matrix", f, code, p.Detail)
		}
	}
}

// TestExportNeverTruncated: a file format answer is never cut short. CSV
// and point PLY page only when asked (limit= or cursor=), with the cursor
// in the headers, and the pages join to the whole answer; unasked, a box
// over the limit is a 413 before any byte. The formats with connectivity
// are never paged: over the limit is a 413, a cursor a 400.
func TestExportNeverTruncated(t *testing.T) {
	t.Parallel()
	h := exportServer(t, api.Options{MaxVertices: 500}).Handler()
	const box = "/api/v1/stores/cells/bbox?min=0,0,0&max=300,300,300&attributes=*"
	code, hdr, body := serveFull(t, h, box+"&f=csv")
	if p := problemOf(t, 413, body); !strings.Contains(p.Detail, "limit=") || hdr.Get("Content-Disposition") != "" || code != 413 {
		t.Fatalf("unpaged CSV over the limit: %d %q %q", code, p.Detail, hdr.Get("Content-Disposition"))
	}
	// Paged explicitly: the pages join to the JSON answer's rows.
	var rows [][]string
	next := box + "&f=csv&limit=300"
	pages := 0
	for next != "" {
		code, hdr, body := serveFull(t, h, next)
		if code != 200 {
			t.Fatalf("%s: %d %s", next, code, body)
		}
		recs, err := csv.NewReader(bytes.NewReader(body)).ReadAll()
		if err != nil || len(recs) < 2 || len(recs) > 301 {
			t.Fatalf("page %d: %d records, %v", pages, len(recs), err)
		}
		if vc, _ := strconv.Atoi(hdr.Get("X-Vertex-Count")); vc != len(recs)-1 {
			t.Fatalf("page %d: X-Vertex-Count %q, %d rows", pages, hdr.Get("X-Vertex-Count"), len(recs)-1)
		}
		rows = append(rows, recs[1:]...)
		next = ""
		if c := hdr.Get("X-Next-Cursor"); c != "" {
			next = box + "&f=csv&limit=300&cursor=" + url.QueryEscape(c)
			if !strings.Contains(hdr.Get("Link"), `rel="next"`) {
				t.Fatalf("page %d: Link %q", pages, hdr.Get("Link"))
			}
		}
		pages++
	}
	var all [][]json.Number
	next = box + "&limit=300"
	for next != "" {
		a := getJSON(t, h, next)
		all = append(all, a.Vertices...)
		next = ""
		if a.Next != nil {
			next = box + "&limit=300&cursor=" + url.QueryEscape(*a.Next)
		}
	}
	if pages < 2 || len(rows) != len(all) {
		t.Fatalf("%d CSV pages with %d rows, JSON %d rows", pages, len(rows), len(all))
	}
	for i := range rows {
		for k := range 3 {
			if asF32(t, rows[i][k]) != asF32(t, all[i][k].String()) {
				t.Fatalf("row %d: CSV %v, JSON %v", i, rows[i][:3], all[i])
			}
		}
	}
	// Point PLY pages likewise; its header counts the page.
	code, hdr, body = serveFull(t, h, box+"&f=ply&limit=200")
	if code != 200 || !bytes.Contains(body, []byte("element vertex 200\n")) || hdr.Get("X-Next-Cursor") == "" {
		t.Fatalf("paged PLY: %d, next %q", code, hdr.Get("X-Next-Cursor"))
	}
	_, _, body = serveFull(t, h, box+"&f=ply")
	problemOf(t, 413, body)
	// Connectivity formats: never paged.
	for _, path := range []string{
		"/api/v1/stores/meshes/bbox?min=0,0,0&max=1000,1000,600&f=ply",
		"/api/v1/stores/meshes/bbox?min=0,0,0&max=1000,1000,600&f=glb",
		"/api/v1/stores/meshes/bbox?min=0,0,0&max=1000,1000,600&f=obj&limit=100",
		"/api/v1/stores/skeletons/bbox?min=0,0,0&max=1000,1000,600&f=swc",
		"/api/v1/stores/axons/bbox?min=0,0,0&max=1000,1000,600&f=trk",
		"/api/v1/stores/axons/bbox?min=0,0,0&max=1000,1000,600&f=tck&limit=499",
	} {
		code, hdr, body := serveFull(t, h, path)
		if p := problemOf(t, 413, body); !strings.Contains(p.Detail, "smaller box") || strings.Contains(p.Detail, "Link") ||
			hdr.Get("Content-Disposition") != "" || hdr.Get("X-Next-Cursor") != "" {
			t.Errorf("%s: %d %q, headers %v", path, code, p.Detail, hdr)
		}
	}
	// A cursor of the JSON answer (f= is not part of it) with f=swc.
	const skel = "/api/v1/stores/skeletons/bbox?min=0,0,0&max=1000,1000,600&limit=100"
	cur := getJSON(t, h, skel).Next
	if cur == nil {
		t.Fatal("no next page")
	}
	_, _, body = serveFull(t, h, skel+"&f=swc&cursor="+url.QueryEscape(*cur))
	if p := problemOf(t, 400, body); !strings.Contains(p.Detail, "not paged") {
		t.Errorf("a cursor with f=swc: %q", p.Detail)
	}
}

// swcNode is one parsed SWC line.
type swcNode struct {
	n, parent int
	typ       string
	xyz       [3]string
	radius    string
}

func parseSWC(t *testing.T, body []byte) []swcNode {
	t.Helper()
	var out []swcNode
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 7 {
			t.Fatalf("SWC line %q", line)
		}
		n, err1 := strconv.Atoi(f[0])
		p, err2 := strconv.Atoi(f[6])
		if err1 != nil || err2 != nil {
			t.Fatalf("SWC line %q", line)
		}
		out = append(out, swcNode{n: n, parent: p, typ: f[1], xyz: [3]string{f[2], f[3], f[4]}, radius: f[5]})
	}
	return out
}

// TestSWCRoundTrip: an SWC answer gives back the object's vertices
// (float32-exact), its radius attribute (whatever attributes= says), its
// swc_type, and its edges as parent links, with every parent's line
// before its children's; on a skeleton, a graph stored parent first, and
// boxes.
func TestSWCRoundTrip(t *testing.T) {
	t.Parallel()
	h := exportServer(t, api.Options{}).Handler()
	for _, c := range []struct{ path, radius, typ string }{
		{"/api/v1/stores/skeletons/objects/3", "radius", ""},
		{"/api/v1/stores/skeletons/objects/7", "radius", ""},
		{"/api/v1/stores/skeletons/bbox?min=100,100,100&max=600,600,500", "radius", ""},
		{"/api/v1/stores/tree/objects/0", "radius", "swc_type"},
		{"/api/v1/stores/tree/bbox?min=0,0,0&max=30,30,30", "radius", "swc_type"},
		{"/api/v1/stores/cycle/objects/1", "", ""},
	} {
		sep := "?"
		if strings.Contains(c.path, "?") {
			sep = "&"
		}
		a := getJSON(t, h, c.path+sep+"attributes=*")
		code, _, body := serve(t, h, c.path+sep+"f=swc&attributes=nothing_of_use")
		if code != 200 {
			t.Fatalf("%s: %d %s", c.path, code, body)
		}
		nodes := parseSWC(t, body)
		if len(nodes) != int(a.Count) {
			t.Fatalf("%s: %d nodes, %d vertices", c.path, len(nodes), a.Count)
		}
		seen := map[int]bool{}
		parent := map[int]int{}
		for _, nd := range nodes {
			if nd.parent != -1 && !seen[nd.parent] {
				t.Fatalf("%s: node %d comes before its parent %d", c.path, nd.n, nd.parent)
			}
			seen[nd.n] = true
			row := nd.n - 1
			for k := range 3 {
				if asF32(t, nd.xyz[k]) != asF32(t, a.Vertices[row][k].String()) {
					t.Fatalf("%s: node %d at %v, vertex %v", c.path, nd.n, nd.xyz, a.Vertices[row])
				}
			}
			wantR := "1"
			if c.radius != "" {
				wantR = string(a.Attributes[c.radius][row])
			}
			if asF32(t, nd.radius) != asF32(t, wantR) {
				t.Fatalf("%s: node %d radius %s, want %s", c.path, nd.n, nd.radius, wantR)
			}
			wantT := "0"
			if c.typ != "" {
				wantT = string(a.Attributes[c.typ][row])
			}
			if nd.typ != wantT {
				t.Fatalf("%s: node %d type %s, want %s", c.path, nd.n, nd.typ, wantT)
			}
			if nd.parent != -1 {
				parent[row] = nd.parent - 1
			}
		}
		edges := map[[2]int64]bool{}
		for _, e := range a.Edges {
			edges[[2]int64{min(e[0], e[1]), max(e[0], e[1])}] = true
		}
		if len(parent) != len(edges) {
			t.Fatalf("%s: %d parent links, %d distinct edges", c.path, len(parent), len(edges))
		}
		for ch, p := range parent {
			if !edges[[2]int64{int64(min(ch, p)), int64(max(ch, p))}] {
				t.Fatalf("%s: parent link %d–%d is no edge", c.path, ch, p)
			}
		}
	}
}

// TestSWCCycleIs422: a graph with a cycle has no SWC form: a 422
// problem naming an edge of the cycle, on the object and in a box (a box
// that cuts the cycle open is a tree, and answers).
func TestSWCCycleIs422(t *testing.T) {
	t.Parallel()
	h := exportServer(t, api.Options{}).Handler()
	for _, path := range []string{"/api/v1/stores/cycle/objects/0?f=swc", "/api/v1/stores/cycle/bbox?min=0,0,0&max=100,100,100&f=swc"} {
		code, hdr, body := serveFull(t, h, path)
		p := problemOf(t, 422, body)
		if !strings.HasSuffix(p.Type, "/unrepresentable") || !strings.Contains(p.Detail, "cycle") || hdr.Get("Content-Disposition") != "" {
			t.Errorf("%s: %d %+v", path, code, p)
		}
	}
	code, _, body := serve(t, h, "/api/v1/stores/cycle/bbox?min=0,0,0&max=15,100,100&f=swc")
	if code != 200 || len(parseSWC(t, body)) != 2 {
		t.Errorf("a box cutting the cycle: %d %s", code, body)
	}
}

// ptsAnswers is the pts store's box with every kind of attribute as JSON
// and as format f, which must be answered.
func ptsAnswers(t *testing.T, h http.Handler, f string) (jsonAnswer, []byte) {
	t.Helper()
	const path = "/api/v1/stores/pts/bbox?min=0,0,0&max=100,100,100&attributes=value,rgb,big,kind"
	code, _, body := serve(t, h, path+"&f="+f)
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	return getJSON(t, h, path), body
}

// TestCSVMatchesJSON: CSV's header is the axes, object_id and the
// attributes (multi-channel name_i), and each field is the JSON answer's
// value: float32-exact, int64 exact, categorical labels quoted as
// needed, NaN empty, infinities inf and -inf.
func TestCSVMatchesJSON(t *testing.T) {
	t.Parallel()
	a, body := ptsAnswers(t, exportServer(t, api.Options{}).Handler(), "csv")
	recs, err := csv.NewReader(bytes.NewReader(body)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"x", "y", "z", "object_id", "value", "rgb_0", "rgb_1", "rgb_2", "big", "kind"}
	if !slices.Equal(recs[0], want) || len(recs)-1 != int(a.Count) || a.Count != 40 {
		t.Fatalf("header %q, %d rows; JSON %d", recs[0], len(recs)-1, a.Count)
	}
	num := func(raw json.RawMessage) string { return string(raw) }
	for i, r := range recs[1:] {
		for k := range 3 {
			if asF32(t, r[k]) != asF32(t, a.Vertices[i][k].String()) {
				t.Fatalf("row %d: %v, JSON %v", i, r[:3], a.Vertices[i])
			}
		}
		if r[3] != strconv.FormatInt(a.ObjectIDs[i], 10) {
			t.Fatalf("row %d: object_id %s, JSON %d", i, r[3], a.ObjectIDs[i])
		}
		switch v := num(a.Attributes["value"][i]); {
		case v == "null": // NaN or an infinity in JSON
			if r[4] != "" && r[4] != "-inf" {
				t.Fatalf("row %d: value %q for JSON null", i, r[4])
			}
		case asF32(t, r[4]) != asF32(t, v):
			t.Fatalf("row %d: value %s, JSON %s", i, r[4], v)
		}
		var rgb []json.Number
		if err := json.Unmarshal(a.Attributes["rgb"][i], &rgb); err != nil {
			t.Fatal(err)
		}
		for k := range 3 {
			if asF32(t, r[5+k]) != asF32(t, rgb[k].String()) {
				t.Fatalf("row %d: rgb %v, JSON %v", i, r[5:8], rgb)
			}
		}
		if r[8] != num(a.Attributes["big"][i]) {
			t.Fatalf("row %d: big %s, JSON %s", i, r[8], a.Attributes["big"][i])
		}
		var kind string
		if err := json.Unmarshal(a.Attributes["kind"][i], &kind); err != nil || r[9] != kind {
			t.Fatalf("row %d: kind %q, JSON %s", i, r[9], a.Attributes["kind"][i])
		}
	}
	if !bytes.Contains(body, []byte(",,")) || !bytes.Contains(body, []byte(",-inf,")) || !bytes.Contains(body, []byte(`"a, b"`)) {
		t.Fatalf("CSV lacks an empty NaN, -inf or a quoted label:\n%s", body)
	}
}

// plyHeader splits a binary PLY answer into header lines and body.
func plyHeader(t *testing.T, b []byte) ([]string, []byte) {
	t.Helper()
	head, body, ok := bytes.Cut(b, []byte("end_header\n"))
	if !ok {
		t.Fatalf("no PLY header: %q", b[:min(len(b), 200)])
	}
	return strings.Split(strings.TrimSpace(string(head)), "\n"), body
}

// TestPLYMatchesJSON: a point PLY's properties are the axes, object_id
// and the attributes named as stored (int64 as double, categorical codes
// with their labels in a comment), rows in answer order, every value the
// JSON answer's; a mesh PLY's faces are the answer's.
func TestPLYMatchesJSON(t *testing.T) {
	t.Parallel()
	h := exportServer(t, api.Options{}).Handler()
	a, b := ptsAnswers(t, h, "ply")
	lines, body := plyHeader(t, b)
	want := []string{"ply", "format binary_little_endian 1.0", "", `comment categories kind ["a, b","plain","q\"uote"]`, "element vertex 40",
		"property float x", "property float y", "property float z", "property int object_id", "property float value",
		"property float rgb_0", "property float rgb_1", "property float rgb_2", "property double big", "property uchar kind"}
	lines[2] = "" // the source comment
	if !slices.Equal(lines, want) {
		t.Fatalf("header\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	const row = 4*3 + 4 + 4 + 4*3 + 8 + 1
	if len(body) != 40*row {
		t.Fatalf("%d body bytes, want %d", len(body), 40*row)
	}
	cats := []string{"a, b", "plain", `q"uote`}
	le := binary.LittleEndian
	for i := range 40 {
		r := body[i*row:]
		for k := range 3 {
			if math.Float32frombits(le.Uint32(r[4*k:])) != asF32(t, a.Vertices[i][k].String()) {
				t.Fatalf("row %d: vertex", i)
			}
		}
		if int64(int32(le.Uint32(r[12:]))) != a.ObjectIDs[i] {
			t.Fatalf("row %d: object id", i)
		}
		v := math.Float32frombits(le.Uint32(r[16:]))
		if s := string(a.Attributes["value"][i]); (s == "null") != (math.IsNaN(float64(v)) || math.IsInf(float64(v), 0)) || (s != "null" && v != asF32(t, s)) {
			t.Fatalf("row %d: value %v, JSON %s", i, v, s)
		}
		big, _ := strconv.ParseInt(string(a.Attributes["big"][i]), 10, 64)
		if math.Float64frombits(le.Uint64(r[32:])) != float64(big) {
			t.Fatalf("row %d: big", i)
		}
		var kind string
		_ = json.Unmarshal(a.Attributes["kind"][i], &kind)
		if cats[r[40]] != kind {
			t.Fatalf("row %d: kind code %d, JSON %q", i, r[40], kind)
		}
	}
	// A quad mesh: faces as stored, 4 corners each; unused vertices kept.
	m := getJSON(t, h, "/api/v1/stores/quads/objects/0")
	_, _, b = serve(t, h, "/api/v1/stores/quads/objects/0?f=ply")
	lines, body = plyHeader(t, b)
	if !slices.Contains(lines, "element vertex 22") || !slices.Contains(lines, "element face 12") || !slices.Contains(lines, "property float z") ||
		lines[slices.Index(lines, "element vertex 22")+1] != "property float z" {
		t.Fatalf("quad mesh header %q", lines)
	}
	fb := body[22*12:]
	if len(fb) != 12*(1+16) || m.Count != 22 || len(m.Faces) != 12 {
		t.Fatalf("faces %d bytes; JSON %d vertices %d faces", len(fb), m.Count, len(m.Faces))
	}
	for f, face := range m.Faces {
		r := fb[f*17:]
		if r[0] != 4 {
			t.Fatalf("face %d has %d corners", f, r[0])
		}
		for k, v := range face {
			if int64(le.Uint32(r[1+4*k:])) != v {
				t.Fatalf("face %d: %v", f, face)
			}
		}
	}
}

// TestMeshFilesKeepEveryVertex: OBJ's v lines, GLB's POSITION and the
// answer have one count; OBJ's values are the JSON answer's, its faces
// the answer's (1-based), STL holds each face as fan triangles, and the
// GLB's node carries the unit and axis change while POSITION holds the
// store's coordinates.
func TestMeshFilesKeepEveryVertex(t *testing.T) {
	t.Parallel()
	h := exportServer(t, api.Options{}).Handler()
	for _, path := range []string{"/api/v1/stores/quads/objects/0", "/api/v1/stores/meshes/objects/1", "/api/v1/stores/meshes/bbox?min=0,0,0&max=600,600,600&level=1"} {
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		a := getJSON(t, h, path)
		_, _, obj := serve(t, h, path+sep+"f=obj")
		var v, f int
		sc := bufio.NewScanner(bytes.NewReader(obj))
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			switch {
			case len(fs) == 4 && fs[0] == "v":
				for k := range 3 {
					if asF32(t, fs[1+k]) != asF32(t, a.Vertices[v][k].String()) {
						t.Fatalf("%s: v %d %v, JSON %v", path, v, fs, a.Vertices[v])
					}
				}
				v++
			case len(fs) > 3 && fs[0] == "f":
				for k, s := range fs[1:] {
					if s != strconv.FormatInt(a.Faces[f][k]+1, 10) {
						t.Fatalf("%s: f %d %v, JSON %v", path, f, fs, a.Faces[f])
					}
				}
				f++
			}
		}
		if v != int(a.Count) || f != len(a.Faces) {
			t.Fatalf("%s: OBJ %d v %d f, JSON %d %d", path, v, f, a.Count, len(a.Faces))
		}
		_, _, stl := serve(t, h, path+sep+"f=stl")
		tris := 0
		for _, face := range a.Faces {
			tris += len(face) - 2
		}
		if len(stl) != 84+50*tris || int(binary.LittleEndian.Uint32(stl[80:])) != tris || bytes.HasPrefix(stl, []byte("solid")) {
			t.Fatalf("%s: STL of %d bytes for %d triangles", path, len(stl), tris)
		}
		_, _, glb := serve(t, h, path+sep+"f=glb")
		doc := glbJSON(t, glb)
		if doc.Accessors[0].Count != int(a.Count) || (len(a.Faces) > 0 && doc.Accessors[1].Count != 3*tris) {
			t.Fatalf("%s: GLB accessors %+v, JSON %d vertices %d triangles", path, doc.Accessors, a.Count, tris)
		}
	}
	_, _, glb := serve(t, h, "/api/v1/stores/quads/objects/0?f=glb")
	// Axes z, y, x in nanometres: store axis 0 (z) is glTF's z.
	want := []float64{0, 0, 1e-9, 0, 0, 1e-9, 0, 0, 1e-9, 0, 0, 0, 0, 0, 0, 1}
	if got := glbJSON(t, glb).Nodes[0].Matrix; !slices.Equal(got, want) {
		t.Fatalf("node matrix %v, want %v", got, want)
	}
}

type glbDoc struct {
	Nodes []struct {
		Matrix []float64 `json:"matrix"`
	} `json:"nodes"`
	Accessors []struct {
		Count int       `json:"count"`
		Min   []float64 `json:"min"`
		Max   []float64 `json:"max"`
	} `json:"accessors"`
}

func glbJSON(t *testing.T, b []byte) glbDoc {
	t.Helper()
	if len(b) < 20 || string(b[:4]) != "glTF" || int(binary.LittleEndian.Uint32(b[8:])) != len(b) {
		t.Fatalf("not a GLB of its declared length (%d bytes)", len(b))
	}
	n := binary.LittleEndian.Uint32(b[12:])
	var d glbDoc
	if err := json.NewDecoder(io.LimitReader(bytes.NewReader(b[20:]), int64(n))).Decode(&d); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestTRKSpaceFromStoreHeaders: the TRK header carries the store's
// transform — headers/trk, else headers/nifti, else the identity — and
// its points, mapped back as nibabel maps them, are the store's
// coordinates; a voxmm store is refused for TRK and TCK.
func TestTRKSpaceFromStoreHeaders(t *testing.T) {
	t.Parallel()
	h := exportServer(t, api.Options{}).Handler()
	for _, c := range []struct {
		store string
		aff   []float64
	}{{"tracts", obliqueAffine}, {"tracts_nifti", obliqueAffine}, {"axons", nil}} {
		path := "/api/v1/stores/" + c.store + "/objects/1"
		a := getJSON(t, h, path)
		_, _, b := serve(t, h, path+"?f=trk")
		if len(b) < 1000 || string(b[:6]) != "TRACK\x00" || binary.LittleEndian.Uint32(b[996:]) != 1000 {
			t.Fatalf("%s: not a TRK file", c.store)
		}
		le := binary.LittleEndian
		var aff [16]float64
		for i := range aff {
			aff[i] = float64(math.Float32frombits(le.Uint32(b[440+4*i:])))
		}
		var vs [3]float64
		for i := range vs {
			vs[i] = float64(math.Float32frombits(le.Uint32(b[12+4*i:])))
		}
		for i := range 16 {
			want := 0.0
			if c.aff != nil {
				want = float64(float32(c.aff[i]))
			} else if i%5 == 0 {
				want = 1
			}
			if aff[i] != want {
				t.Fatalf("%s: vox_to_ras %v", c.store, aff)
			}
		}
		if le.Uint32(b[988:]) != 1 || int(le.Uint32(b[1000:])) != int(a.Count) {
			t.Fatalf("%s: %d streamlines, first of %d points; JSON %d", c.store, le.Uint32(b[988:]), le.Uint32(b[1000:]), a.Count)
		}
		for i := range int(a.Count) {
			var vox [3]float64
			for k := range 3 {
				vox[k] = float64(math.Float32frombits(le.Uint32(b[1004+12*i+4*k:])))/vs[k] - 0.5
			}
			for r := range 3 {
				got := aff[4*r]*vox[0] + aff[4*r+1]*vox[1] + aff[4*r+2]*vox[2] + aff[4*r+3]
				want := float64(asF32(t, a.Vertices[i][r].String()))
				if math.Abs(got-want) > 1e-4*max(1, math.Abs(want)) {
					t.Fatalf("%s: point %d axis %d: %v, store %v", c.store, i, r, got, want)
				}
			}
		}
	}
	for _, f := range []string{"trk", "tck"} {
		code, _, body := serve(t, h, "/api/v1/stores/tracts_voxmm/objects/1?f="+f)
		if p := problemOf(t, 422, body); !strings.Contains(p.Detail, "voxmm") {
			t.Errorf("voxmm store as %s: %d %q", f, code, p.Detail)
		}
	}
}

// TestOpenAPIListsEveryFormat: for the bbox, object and chunk routes,
// openapi.yaml's f= enum is the formats docs/exports.md's matrix gives the
// route, and its 200 answer lists each of their media types.
func TestOpenAPIListsEveryFormat(t *testing.T) {
	t.Parallel()
	spec, _ := loadSpec(t)
	rows := readMatrix(t)
	for route, path := range map[string]string{"bbox": "/api/v1/stores/{store}/bbox", "object": "/api/v1/stores/{store}/objects/{id}",
		"chunk": "/api/v1/stores/{store}/levels/{level}/chunks/{key}"} {
		op := spec.Paths.Find(path).Get
		var enum []string
		for _, p := range op.Parameters {
			if p.Value.Name == "f" {
				for _, v := range p.Value.Schema.Value.Enum {
					enum = append(enum, v.(string))
				}
			}
		}
		content := op.Responses.Status(200).Value.Content
		var want []string
		for _, r := range rows {
			served := false
			for _, routes := range r.routes {
				served = served || slices.Contains(routes, route)
			}
			if !served {
				continue
			}
			want = append(want, r.formats...)
			for _, m := range r.media {
				if content.Get(m) == nil {
					t.Errorf("%s: 200 does not list %s (f=%v)", path, m, r.formats)
				}
			}
		}
		slices.Sort(enum)
		slices.Sort(want)
		if !slices.Equal(enum, want) {
			t.Errorf("%s: openapi.yaml's f= takes %v, the matrix %v", path, enum, want)
		}
	}
}
