package draco

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/api/neuroglancer/draco/dracotest"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// Draco's own decoders check every encoding: draco_decoder (Debian's draco
// package, the C++ library, 1.5.5), npm draco3d (the library compiled to
// WebAssembly, 1.5.7) and Neuroglancer's fragment decoder (Draco 1.4.1 with
// Neuroglancer's glue, compiled to WebAssembly, from the npm neuroglancer
// package .ci/build-neuroglancer installs beside ZVFSERVE_NEUROGLANCER_DIST),
// each over the whole table and the golden file. Without them the tests are skipped, unless
// ZVFSERVE_REQUIRE_DRACO is set (CI sets it, and installs draco_decoder and
// draco3d), or for Neuroglancer's ZVFSERVE_REQUIRE_NEUROGLANCER: then they
// fail.

// draco3dVersion is the npm draco3d the tests run; .ci/run installs the same.
const draco3dVersion = "1.5.7"

// requireDraco, set, makes a missing decoder a failure.
const requireDraco = "ZVFSERVE_REQUIRE_DRACO"

// nodeResult is one line of the node decoders' output.
type nodeResult struct {
	File       string `json:"file"`
	Error      string `json:"error"`
	Code       int    `json:"code"` // Neuroglancer's decoder: 0 is success
	NumPoints  int    `json:"numPoints"`
	NumVerts   int    `json:"numVertices"`
	NumFaces   int    `json:"numFaces"`
	DataType   string `json:"dataType"`
	Components int    `json:"components"`
	Positions  string `json:"positions"`
	Faces      string `json:"faces"`
}

// runNode runs a decoder script over files and checks it answered for each
// in turn; check runs as a subtest per file.
func runNode(t *testing.T, files []string, check func(t *testing.T, i int, r nodeResult), args ...string) {
	t.Helper()
	node := zvftest.Tool(t, requireDraco, "node is not on PATH", "node")
	cmd := exec.Command(node, append(args, files...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, stderr.Bytes())
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<30)
	i := 0
	for ; sc.Scan(); i++ {
		var r nodeResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if i >= len(files) || r.File != files[i] {
			t.Fatalf("result for %s, want %s", r.File, files[min(i, len(files)-1)])
		}
		t.Run(filepath.Base(r.File), func(t *testing.T) { check(t, i, r) })
	}
	if i != len(files) {
		t.Fatalf("answers for %d of %d files\n%s", i, len(files), stderr.Bytes())
	}
}

// encodedCases writes every case and the golden file into a temporary
// folder and returns the files with the meshes they hold.
func encodedCases(t *testing.T) ([]string, []Mesh) {
	t.Helper()
	dir := t.TempDir()
	var files []string
	var meshes []Mesh
	var e Encoder
	add := func(name string, b []byte, m Mesh) {
		f := filepath.Join(dir, fmt.Sprintf("%02d-%s.drc", len(files), strings.ReplaceAll(name, " ", "_")))
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
		meshes = append(meshes, m)
	}
	for _, tc := range cases(t) {
		b, err := e.Append(nil, tc.mesh)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		add(tc.name, b, tc.mesh)
	}
	golden, err := os.ReadFile(filepath.Join("testdata", "tetra.drc"))
	if err != nil {
		t.Fatal(err)
	}
	add("golden", golden, tetra)
	return files, meshes
}

func TestDracoDecoderDecodesEveryCase(t *testing.T) {
	bin := zvftest.Tool(t, requireDraco, "draco_decoder is not on PATH (apt-get install draco)", "draco_decoder")
	files, meshes := encodedCases(t)
	for i, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			ply := strings.TrimSuffix(f, ".drc") + ".ply"
			out, err := exec.Command(bin, "-i", f, "-o", ply).CombinedOutput()
			if err != nil {
				t.Fatalf("draco_decoder: %v\n%s", err, out)
			}
			b, err := os.ReadFile(ply)
			if err != nil {
				t.Fatal(err)
			}
			np, pos, faces, err := dracotest.ReadPLY(b)
			if err != nil {
				t.Fatalf("draco_decoder's PLY: %v", err)
			}
			checkDecoded(t, meshes[i], np, pos, faces)
		})
	}
}

// draco3dDir finds npm draco3d where .ci/run installs it: the cache folder
// outside the checkout, or ZVFSERVE_DRACO3D.
func draco3dDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("ZVFSERVE_DRACO3D")
	if dir == "" {
		dir = filepath.Join(zvftest.CICache(t), "draco3d-"+draco3dVersion, "node_modules", "draco3d")
	}
	if _, err := os.Stat(filepath.Join(dir, "draco3d.js")); err != nil {
		zvftest.SkipOrFail(t, requireDraco, fmt.Sprintf("npm draco3d is not installed in %s (npm install --prefix %s draco3d@%s)",
			dir, filepath.Dir(filepath.Dir(dir)), draco3dVersion))
	}
	return dir
}

func TestDraco3dDecodesEveryCase(t *testing.T) {
	dir := draco3dDir(t)
	files, meshes := encodedCases(t)
	runNode(t, files, func(t *testing.T, i int, r nodeResult) {
		if r.Error != "" {
			t.Fatalf("draco3d: %s", r.Error)
		}
		if r.DataType != "int32" || r.Components != 3 {
			t.Fatalf("position attribute %s × %d, want int32 × 3 (what Neuroglancer accepts)", r.DataType, r.Components)
		}
		pos, faces := words(t, r.Positions), words(t, r.Faces)
		if len(faces) != 3*r.NumFaces {
			t.Fatalf("%d indices for %d faces", len(faces), r.NumFaces)
		}
		checkDecoded(t, meshes[i], r.NumPoints, pos, faces)
	}, filepath.Join("testdata", "draco3d_decode.js"), dir)
}

// neuroglancerDracoWasm is neuroglancer_draco.wasm in the npm
// neuroglancer package .ci/build-neuroglancer installs.
func neuroglancerDracoWasm(t *testing.T) string {
	t.Helper()
	wasm := filepath.Join("mesh", "draco", "neuroglancer_draco.wasm")
	return filepath.Join(zvftest.NeuroglancerLib(t, wasm), wasm)
}

// TestNeuroglancerDecodesEveryCase runs the decoder Neuroglancer runs on
// every multilod fragment, with its checks (an int32 or float32 POSITION of
// 3 components, a corner attribute with one value per point).
func TestNeuroglancerDecodesEveryCase(t *testing.T) {
	wasm := neuroglancerDracoWasm(t)
	files, meshes := encodedCases(t)
	runNode(t, files, func(t *testing.T, i int, r nodeResult) {
		if r.Code != 0 {
			t.Fatalf("neuroglancer_draco_decode returned %d", r.Code)
		}
		pos, faces := words(t, r.Positions), words(t, r.Faces)
		if len(faces) != 3*r.NumFaces {
			t.Fatalf("%d indices for %d faces", len(faces), r.NumFaces)
		}
		checkDecoded(t, meshes[i], r.NumVerts, pos, faces)
	}, filepath.Join("testdata", "ngdraco_decode.js"), wasm, "16")
}

func words(t *testing.T, s string) []uint32 {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b)%4 != 0 {
		t.Fatalf("base64: %v (%d bytes)", err, len(b))
	}
	w := make([]uint32, len(b)/4)
	for i := range w {
		w[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return w
}
