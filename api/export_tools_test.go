package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// The domain exports are read by the field's own tools: nibabel (TRK,
// TCK), open3d (PLY), assimp (OBJ, STL, GLB), the Khronos glTF validator
// (GLB), pandas and numpy (the recipes of docs/exports.md). .ci/run
// installs them (Debian python3-nibabel, python3-open3d, python3-pandas,
// assimp-utils; npm gltf-validator, pinned, into the cache outside the
// checkout) and sets ZVFSERVE_REQUIRE_EXPORT_TOOLS, which makes a missing
// tool a failure; elsewhere these tests skip without them.

// gltfValidatorVersion is the npm gltf-validator the tests run; .ci/run
// installs the same.
const gltfValidatorVersion = "2.0.0-dev.3.10"

// requireTools, set, makes a missing tool a failure.
const requireTools = "ZVFSERVE_REQUIRE_EXPORT_TOOLS"

// exportPython is a Python that imports modules: $ZVFSERVE_PYTHON, else
// Debian's /usr/bin/python3 (where the python3-* packages install), else
// python3 on PATH.
func exportPython(t *testing.T, modules ...string) string {
	t.Helper()
	for _, c := range []string{os.Getenv("ZVFSERVE_PYTHON"), "/usr/bin/python3", "python3"} {
		if c == "" {
			continue
		}
		p, err := exec.LookPath(c)
		if err != nil {
			continue
		}
		// find_spec looks the modules up without importing them: an
		// import of open3d or pandas costs a second of CPU, and the test's
		// own script imports them anyway (a broken install then fails it).
		probe := "import importlib.util, sys; sys.exit(any(importlib.util.find_spec(m) is None for m in sys.argv[1:]))"
		if exec.Command(p, append([]string{"-c", probe}, modules...)...).Run() == nil {
			return p
		}
	}
	zvftest.SkipOrFail(t, requireTools, "no python3 imports "+strings.Join(modules, ", "))
	return ""
}

// runPython runs a script with args in dir; its output is the test's
// log, a failure the test's failure.
func runPython(t *testing.T, python, dir, script string, args ...string) string {
	t.Helper()
	cmd := exec.Command(python, append([]string{"-c", script}, args...)...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	return out.String()
}

func exportHTTP(t *testing.T) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(exportServer(t, api.Options{}).Handler())
	t.Cleanup(ts.Close)
	return ts
}

// nibabelCheck loads each TRK or TCK with nibabel and compares it with
// the JSON answer of the same request: every point is a vertex of the
// answer at its coordinates (TCK exactly, TRK to float32 precision of the
// half-voxel shift and the affine), every row is in some streamline, and
// the steps between consecutive points are the answer's edges, each once.
const nibabelCheck = `
import json, sys, urllib.request
import numpy as np, nibabel as nib
for path in sys.argv[2:]:
    url = sys.argv[1] + path
    for fmt in ("trk", "tck"):
        name = "x." + fmt
        urllib.request.urlretrieve(url + ("&" if "?" in url else "?") + "f=" + fmt, name)
        sl = nib.streamlines.load(name).streamlines
        ans = json.load(urllib.request.urlopen(url))
        v = np.array(ans["vertices"], dtype=np.float32).reshape(-1, 3)
        edges = {}
        for a, b in ans["edges"]:
            edges[(a, b)] = edges.get((a, b), 0) + 1
        seen, steps = set(), {}
        tol = 0 if fmt == "tck" else 1e-4
        for s in sl:
            s = np.asarray(s)
            d = np.abs(s[:, None, :].astype(np.float64) - v[None, :, :]).max(axis=2)
            idx = d.argmin(axis=1)
            err = d[np.arange(len(s)), idx] / np.maximum(1, np.abs(s).max(axis=1))
            assert (err <= tol).all(), (path, fmt, "point off its vertex by", err.max())
            seen.update(idx.tolist())
            for a, b in zip(idx[:-1], idx[1:]):
                steps[(int(a), int(b))] = steps.get((int(a), int(b)), 0) + 1
        assert seen == set(range(len(v))), (path, fmt, "rows in no streamline", set(range(len(v))) - seen)
        assert steps == edges, (path, fmt, "steps are not the edges")
        print(path, fmt, len(sl), "streamlines,", sum(len(s) for s in sl), "points,", len(v), "vertices: ok")
`

func TestExportNibabel(t *testing.T) {
	t.Parallel()
	python := exportPython(t, "nibabel", "numpy")
	ts := exportHTTP(t)
	out := runPython(t, python, t.TempDir(), nibabelCheck, ts.URL+"/api/v1/stores/",
		"axons/objects/3", "axons/objects/40?level=1", "axons/bbox?min=0,0,0&max=400,400,300&level=1",
		"axons/bbox?min=200,200,100&max=400,500,300", "tracts/objects/1", "tracts/bbox?min=0,0,0&max=60,100,100",
		"tracts_nifti/objects/2")
	t.Log(out)
}

// open3dCheck reads point and mesh PLY files with open3d and compares
// them with the JSON answers: positions (float32-exact), attributes by
// name, categorical codes into the labels, object ids, triangles.
const open3dCheck = `
import json, sys, urllib.request
import numpy as np, open3d as o3d
base = sys.argv[1]
def get(path, name):
    urllib.request.urlretrieve(base + path + "&f=ply", name)
    return json.load(urllib.request.urlopen(base + path))
ans = get("cells/bbox?min=0,0,0&max=300,300,300&attributes=*", "p.ply")
pcd = o3d.t.io.read_point_cloud("p.ply")
v = np.array(ans["vertices"], dtype=np.float32)
assert (pcd.point.positions.numpy() == v).all(), "positions"
assert (pcd.point.intensity.numpy()[:, 0] == np.array(ans["attributes"]["intensity"], dtype=np.float32)).all(), "intensity"
assert (pcd.point.object_id.numpy()[:, 0] == np.array(ans["object_ids"])).all(), "object ids"
labels = json.loads(open("p.ply", "rb").read().split(b"comment categories cell_type ")[1].split(b"\n")[0])
assert [labels[c] for c in pcd.point.cell_type.numpy()[:, 0]] == ans["attributes"]["cell_type"], "cell_type"
print("points:", len(v), "ok")
for path in ("meshes/objects/1?x", "meshes/bbox?min=0,0,0&max=700,700,400"):
    ans = get(path.replace("?x", "?level=0"), "m.ply")
    m = o3d.io.read_triangle_mesh("m.ply")
    assert (np.asarray(m.vertices).astype(np.float32) == np.array(ans["vertices"], dtype=np.float32)).all(), "mesh vertices"
    assert (np.asarray(m.triangles) == np.array(ans["faces"]).reshape(-1, 3)).all(), "triangles"
    print(path, len(m.vertices), "vertices", len(m.triangles), "triangles: ok")
`

func TestExportOpen3D(t *testing.T) {
	t.Parallel()
	python := exportPython(t, "open3d", "numpy")
	ts := exportHTTP(t)
	t.Log(runPython(t, python, t.TempDir(), open3dCheck, ts.URL+"/api/v1/stores/"))
}

// assimpCounts is what `assimp info -r` reports of a file.
func assimpCounts(t *testing.T, bin, file string) (vertices, faces int) {
	t.Helper()
	out, err := exec.Command(bin, "info", file, "-r").CombinedOutput()
	if err != nil {
		t.Fatalf("assimp info %s: %v\n%s", filepath.Base(file), err, out)
	}
	num := func(key string) int {
		m := regexp.MustCompile(`(?m)^` + key + `:\s+(\d+)`).FindSubmatch(out)
		if m == nil {
			t.Fatalf("assimp info %s: no %s\n%s", filepath.Base(file), key, out)
		}
		n, _ := strconv.Atoi(string(m[1]))
		return n
	}
	return num("Vertices"), num("Faces")
}

// TestExportAssimp: assimp reads OBJ, STL and GLB with the answer's
// counts (without post-processing: OBJ and STL as one vertex per face
// corner, as assimp loads them; GLB's vertices the answer's, unused ones
// included), and converts them.
func TestExportAssimp(t *testing.T) {
	t.Parallel()
	bin := zvftest.Tool(t, requireTools, "assimp is not on PATH", "assimp")
	h := exportServer(t, api.Options{}).Handler()
	dir := t.TempDir()
	for i, path := range []string{"/api/v1/stores/meshes/objects/1", "/api/v1/stores/quads/objects/0", "/api/v1/stores/meshes/bbox?min=0,0,0&max=700,700,400"} {
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		a := getJSON(t, h, path)
		corners, tris := 0, 0
		for _, f := range a.Faces {
			corners += len(f)
			tris += len(f) - 2
		}
		for _, f := range []string{"obj", "stl", "glb"} {
			_, _, body := serve(t, h, path+sep+"f="+f)
			file := filepath.Join(dir, fmt.Sprintf("%d.%s", i, f))
			if err := os.WriteFile(file, body, 0o644); err != nil {
				t.Fatal(err)
			}
			v, fc := assimpCounts(t, bin, file)
			want := map[string][2]int{"obj": {corners, len(a.Faces)}, "stl": {3 * tris, tris}, "glb": {int(a.Count), tris}}[f]
			if v != want[0] || fc != want[1] {
				t.Errorf("%s as %s: assimp reads %d vertices %d faces, want %v", path, f, v, fc, want)
			}
			if out, err := exec.Command(bin, "export", file, file+".ply").CombinedOutput(); err != nil {
				t.Errorf("assimp export %s: %v\n%s", filepath.Base(file), err, out)
			}
		}
	}
}

// validatorScript prints the Khronos validator's report of each file.
const validatorScript = `
const v = require(process.argv[2]);
const fs = require('fs');
(async () => {
  for (const f of process.argv.slice(3)) {
    const r = await v.validateBytes(new Uint8Array(fs.readFileSync(f)), {maxIssues: 50});
    console.log(JSON.stringify({file: f, issues: r.issues, vertices: r.info.totalVertexCount || 0}));
  }
})().catch(e => { console.error(e); process.exit(1); });
`

// TestExportGLTFValidator: the Khronos glTF validator finds no error and
// no warning in GLB answers: an object, a box, a quad mesh with a node
// matrix (z, y, x axes in nanometres), a box without faces (points) and
// an empty box.
func TestExportGLTFValidator(t *testing.T) {
	t.Parallel()
	dirV := os.Getenv("ZVFSERVE_GLTF_VALIDATOR")
	if dirV == "" {
		dirV = filepath.Join(zvftest.CICache(t), "gltf-validator-"+gltfValidatorVersion)
	}
	mod := filepath.Join(dirV, "node_modules", "gltf-validator")
	if _, err := os.Stat(filepath.Join(mod, "index.js")); err != nil {
		zvftest.SkipOrFail(t, requireTools, "npm gltf-validator@"+gltfValidatorVersion+" is not installed in "+dirV)
	}
	node := zvftest.Tool(t, requireTools, "node is not on PATH", "node")
	h := exportServer(t, api.Options{}).Handler()
	v0 := getJSON(t, h, "/api/v1/stores/meshes/objects/1").Vertices[0]
	point := fmt.Sprintf("%s,%s,%s", v0[0], v0[1], v0[2])
	cases := []string{"/api/v1/stores/meshes/objects/1?level=0", "/api/v1/stores/meshes/bbox?min=0,0,0&max=700,700,400",
		"/api/v1/stores/quads/objects/0?level=0", "/api/v1/stores/meshes/bbox?min=" + point + "&max=" + point,
		"/api/v1/stores/meshes/bbox?min=0,0,0&max=0.5,0.5,0.5"}
	dir := t.TempDir()
	var files []string
	want := map[string]int{}
	for i, path := range cases {
		_, _, body := serve(t, h, path+"&f=glb")
		n := int(getJSON(t, h, path).Count)
		if (i == 3 && len(getJSON(t, h, path).Faces) != 0) || (i == 4 && n != 0) {
			t.Fatalf("%s: not the case it should be", path)
		}
		f := filepath.Join(dir, fmt.Sprintf("%d.glb", i))
		if err := os.WriteFile(f, body, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
		want[f] = n
	}
	script := filepath.Join(dir, "validate.js")
	if err := os.WriteFile(script, []byte(validatorScript), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(node, append([]string{script, mod}, files...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("gltf-validator: %v\n%s", err, out)
	}
	got := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var r struct {
			File   string
			Issues struct {
				NumErrors, NumWarnings int
				Messages               []json.RawMessage
			}
			Vertices int
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		got++
		if r.Issues.NumErrors != 0 || r.Issues.NumWarnings != 0 || r.Vertices != want[r.File] {
			t.Errorf("%s: %d errors %d warnings %s, %d vertices (want %d)", r.File, r.Issues.NumErrors, r.Issues.NumWarnings, r.Issues.Messages, r.Vertices, want[r.File])
		}
	}
	if got != len(files) {
		t.Fatalf("reports for %d of %d files\n%s", got, len(files), out)
	}
}

// recipeChecks are run after each recipe of docs/exports.md (by name),
// with the recipe's variables; %s is the test server's base URL.
var recipeChecks = map[string]string{
	"csv-pandas": `
import json, urllib.request
ans = json.load(urllib.request.urlopen("%s/api/v1/stores/cells/bbox?min=0,0,0&max=300,300,300&attributes=*"))
assert len(cells) == ans["count"] and list(cells.columns) == ["x", "y", "z", "object_id", "cell_type", "intensity"]
assert list(cells.cell_type) == ans["attributes"]["cell_type"] and list(cells.object_id) == ans["object_ids"]`,
	"trk-nibabel": `
import json, urllib.request, numpy as np
ans = json.load(urllib.request.urlopen("%s/api/v1/stores/axons/objects/3"))
assert len(streamlines) == 1 and np.allclose(streamlines[0], np.array(ans["vertices"], dtype=np.float32), rtol=1e-6, atol=1e-4)`,
	"tck-nibabel": `
import json, urllib.request, numpy as np
ans = json.load(urllib.request.urlopen("%s/api/v1/stores/axons/bbox?min=0,0,0&max=400,400,400"))
assert len(streamlines.get_data()) == ans["count"] and len(streamlines) == ans["count"] - len(ans["edges"])`,
	"ply-open3d-points": `
import json, urllib.request
ans = json.load(urllib.request.urlopen("%s/api/v1/stores/cells/bbox?min=0,0,0&max=300,300,300&attributes=*"))
assert pcd.point.positions.shape[0] == ans["count"]`,
	"ply-open3d-mesh": `
import json, urllib.request
ans = json.load(urllib.request.urlopen("%s/api/v1/stores/meshes/objects/1"))
assert len(mesh.vertices) == ans["count"] and len(mesh.triangles) == len(ans["faces"])`,
	"ply-open3d-lines": `
import json, urllib.request
ans = json.load(urllib.request.urlopen("%s/api/v1/stores/skeletons/objects/3"))
assert len(lines.points) == ans["count"] and len(lines.lines) == len(ans["edges"]) > 0`,
	"glb-open3d": `
import json, urllib.request
ans = json.load(urllib.request.urlopen("%s/api/v1/stores/meshes/objects/1"))
assert len(mesh.triangles) == len(ans["faces"])`,
	"swc-numpy": `
import json, urllib.request
ans = json.load(urllib.request.urlopen("%s/api/v1/stores/skeletons/objects/3?attributes=radius"))
assert len(swc) == ans["count"] and len(roots) == ans["count"] - len(ans["edges"])
assert sorted(swc[:, 5].astype(np.float32).tolist()) == sorted(np.array(ans["attributes"]["radius"], dtype=np.float32).tolist())`,
}

// recipeRunner runs each script of the JSON list argv[1] ({name, dir,
// script}) as its own process would: in a fresh namespace (a recipe must
// import what it uses), in its own folder, its prints its output; what
// each printed and its traceback go to the JSON file argv[2]. One
// interpreter for all: importing open3d or pandas costs a second of CPU
// each, and a process per recipe paid it again and again.
const recipeRunner = `
import contextlib, io, json, os, sys, traceback
results = {}
for r in json.load(open(sys.argv[1])):
    os.chdir(r["dir"])
    out, err = io.StringIO(), ""
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(r["script"], r["name"], "exec"), {"__name__": "__main__"})
    except BaseException:
        err = traceback.format_exc()
    results[r["name"]] = {"out": out.getvalue(), "error": err}
json.dump(results, open(sys.argv[2], "w"))
`

// TestExportRecipes runs every Python recipe of docs/exports.md against
// a server with the demo stores, then its check; a recipe without a check
// and a check without a recipe fail.
func TestExportRecipes(t *testing.T) {
	t.Parallel()
	python := exportPython(t, "pandas", "nibabel", "open3d", "numpy")
	doc, err := os.ReadFile("../docs/exports.md")
	if err != nil {
		t.Fatal(err)
	}
	ts := exportHTTP(t)
	blocks := regexp.MustCompile("(?s)```python\n# recipe: ([a-z0-9-]+)\n(.*?)```").FindAllSubmatch(doc, -1)
	type recipe struct {
		Name   string `json:"name"`
		Dir    string `json:"dir"`
		Script string `json:"script"`
	}
	var recipes []recipe
	for _, b := range blocks {
		name, code := string(b[1]), string(b[2])
		check, ok := recipeChecks[name]
		if !ok {
			t.Errorf("recipe %s has no check", name)
			continue
		}
		script := strings.ReplaceAll(code, "http://localhost:8080", ts.URL) + fmt.Sprintf(check, ts.URL) + "\n"
		recipes = append(recipes, recipe{name, t.TempDir(), script})
	}
	for name := range recipeChecks {
		if !slices.ContainsFunc(recipes, func(r recipe) bool { return r.Name == name }) {
			t.Errorf("check %s has no recipe in docs/exports.md", name)
		}
	}
	dir := t.TempDir()
	list, err := json.Marshal(recipes)
	if err != nil {
		t.Fatal(err)
	}
	in, out := filepath.Join(dir, "recipes.json"), filepath.Join(dir, "results.json")
	if err := os.WriteFile(in, list, 0o644); err != nil {
		t.Fatal(err)
	}
	runPython(t, python, dir, recipeRunner, in, out)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var results map[string]struct{ Out, Error string }
	if err := json.Unmarshal(b, &results); err != nil {
		t.Fatal(err)
	}
	for _, r := range recipes {
		t.Run(r.Name, func(t *testing.T) {
			res, ok := results[r.Name]
			switch {
			case !ok:
				t.Fatal("the runner did not run it")
			case res.Error != "":
				t.Fatalf("%s\n%s", res.Out, res.Error)
			}
			t.Log(res.Out)
		})
	}
}

// open3dLinesCheck reads the PLY of lines (streamlines, skeletons,
// graphs) with open3d's line set reader and compares it with the JSON
// answer: points (float32-exact) and lines, which are the answer's edges
// in order (a mis-sized edge property would shift every line after the
// first). open3d reads no other edge property, so the weights are then
// read by numpy from the same bytes, at the offset and in the types the
// header declares, and compared with the JSON values (NaN for null).
const open3dLinesCheck = `
import json, sys, urllib.request
import numpy as np, open3d as o3d
types = {"char": "i1", "uchar": "u1", "short": "<i2", "ushort": "<u2", "int": "<i4", "uint": "<u4", "float": "<f4", "double": "<f8"}
for path in sys.argv[2:]:
    url = sys.argv[1] + path
    sep = "&" if "?" in url else "?"
    print(path, end=": ", flush=True)
    urllib.request.urlretrieve(url + sep + "f=ply&edge_attributes=*", "l.ply")
    ans = json.load(urllib.request.urlopen(url + sep + "edge_attributes=*"))
    ls = o3d.io.read_line_set("l.ply")
    v = np.array(ans["vertices"], dtype=np.float32)
    e = np.array(ans["edges"], dtype=np.int64).reshape(-1, 2)
    assert len(e) > 0, (path, "no edges")
    assert (np.asarray(ls.points).astype(np.float32) == v).all(), (path, "points")
    assert (np.asarray(ls.lines) == e).all(), (path, "lines")
    raw = open("l.ply", "rb").read()
    head, body = raw.split(b"end_header\n", 1)
    elements = []
    for ln in head.decode().split("\n"):
        f = ln.split()
        if f[:1] == ["element"]:
            elements.append((f[1], int(f[2]), []))
        elif f[:1] == ["property"]:
            elements[-1][2].append((f[2], types[f[1]]))
    (vn, vc, vp), (en, ec, ep) = elements
    assert (vn, en, ec) == ("vertex", "edge", len(e)), (path, elements)
    edges = np.frombuffer(body, dtype=np.dtype(ep), count=ec, offset=np.dtype(vp).itemsize * vc)
    assert len(body) == np.dtype(vp).itemsize * vc + np.dtype(ep).itemsize * ec, (path, "trailing bytes")
    names = sorted(ans.get("edge_attributes", {}))
    assert [n for n, _ in ep[2:]] == names, (path, ep, names)
    for n in names:
        want = np.array([np.nan if x is None else x for x in ans["edge_attributes"][n]], dtype=np.float64)
        got = edges[n].astype(np.float64)
        assert np.array_equal(np.isnan(got), np.isnan(want)), (path, n, "missing values")
        ok = ~np.isnan(want)
        assert (got[ok].astype(np.float32) == want[ok].astype(np.float32)).all(), (path, n, "values")
    print(len(v), "points", len(e), "lines", names, int(sum(np.isnan(edges[n].astype(np.float64)).sum() for n in names)), "without a value: ok")
`

// TestExportOpen3DLines: a PLY of lines, with its edges' link attributes,
// as open3d (and numpy, for the values open3d does not read) reads it.
func TestExportOpen3DLines(t *testing.T) {
	t.Parallel()
	python := exportPython(t, "open3d", "numpy")
	ch := cache.New(64 << 20)
	demo, err := demoStores()
	if err != nil {
		t.Fatal(err)
	}
	mine, err := exportStores()
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(apitest.New(t, api.Options{Stores: append(slices.Concat(demo, mine),
		apitest.Open(t, filepath.Join(fixtures, "graph.zarrvectors"), "graph", ch),
		apitest.Open(t, filepath.Join(fixtures09, "graph_v09.zarrvectors"), "graph_v09", ch))}).Handler())
	t.Cleanup(ts.Close)
	t.Log(runPython(t, python, t.TempDir(), open3dLinesCheck, ts.URL+"/api/v1/stores/",
		"graph/bbox?min=0,0,0&max=1000,1000,1000", "graph_v09/bbox?min=0,0,0&max=1000,1000,1000", "graph/objects/2",
		"axons/objects/3", "skeletons/objects/3", "tree/bbox?min=0,0,0&max=100,100,100"))
}
