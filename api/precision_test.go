package api_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/synth"
	"github.com/zvfserve/zvfserve/zvf/writer"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

var updateUnquantized = flag.Bool("update-unquantized", false, "rewrite testdata/unquantized-bin.sha256 from this code's answers")

// binaryPaths are object and chunk answers in the binary format over the
// demo stores (paging's, every geometry): three objects and three chunks
// at every level. The bbox route's are in TestUnpagedAnswersUnchanged.
func binaryPaths(t *testing.T) []string {
	t.Helper()
	stores, err := pagingStores()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range stores {
		for _, n := range s.Levels() {
			l, err := s.Level(n)
			if err != nil {
				t.Fatal(err)
			}
			for id := range min(l.Info().ObjectCount, 3) {
				out = append(out, fmt.Sprintf("/api/v1/stores/%s/objects/%d?level=%d&attributes=*&f=bin", s.Name(), id, n))
			}
			keys := l.Keys()
			for _, k := range keys[:min(len(keys), 3)] {
				out = append(out, fmt.Sprintf("/api/v1/stores/%s/levels/%d/chunks/%s?attributes=*&f=bin", s.Name(), n, k))
			}
		}
	}
	return out
}

// TestBinaryWithoutPrecisionUnchanged: without precision= a binary object
// or chunk answer is byte for byte what it was before precision= existed
// (the SHA-256 of each body, against testdata written by the code before
// that change).
func TestBinaryWithoutPrecisionUnchanged(t *testing.T) {
	t.Parallel()
	_, srv := pagingServer(t, 1<<40)
	var got strings.Builder
	for _, path := range binaryPaths(t) {
		code, _, body := serveFull(t, srv.Handler(), path)
		if code != http.StatusOK {
			t.Fatalf("%s: %d %.300s", path, code, body)
		}
		fmt.Fprintf(&got, "%x %s\n", sha256.Sum256(body), path)
	}
	checkGolden(t, "testdata/unquantized-bin.sha256", got.String(), *updateUnquantized)
}

// binBlock is one block of a binary answer.
type binBlock struct {
	kind, aux uint32
	payload   []byte
}

// binBlocks splits a binary answer into its header JSON and blocks,
// checking the framing (docs/binary-format.md).
func binBlocks(t *testing.T, b []byte) (header []byte, blocks []binBlock) {
	t.Helper()
	if len(b) < 16 || string(b[:8]) != "ZVFBIN\x00\x01" {
		t.Fatalf("not a binary answer: %.40q", b)
	}
	hl := int(binary.LittleEndian.Uint64(b[8:]))
	header = b[16 : 16+hl]
	for p := 16 + (hl+7)/8*8; p < len(b); {
		if p%8 != 0 || p+16 > len(b) {
			t.Fatalf("block at %d of %d bytes", p, len(b))
		}
		n := int(binary.LittleEndian.Uint64(b[p+8:]))
		if n > len(b)-p-16 {
			t.Fatalf("block at %d runs past the end", p)
		}
		blocks = append(blocks, binBlock{binary.LittleEndian.Uint32(b[p:]), binary.LittleEndian.Uint32(b[p+4:]), b[p+16 : p+16+n]})
		p += 16 + (n+7)/8*8
	}
	return header, blocks
}

// sameButQuantized holds a quantized answer to its exact twin: the same
// header, the same blocks in the same order except each vertices block
// (kind 1) replaced by a kind 6 one of the same rows, whose values decode
// to within p of the exact ones. It returns the vertices and bytes of the
// vertex blocks of both.
func sameButQuantized(t *testing.T, what string, exact, quant []byte, p float64) (rows int, exactBytes, quantBytes int) {
	t.Helper()
	eh, eb := binBlocks(t, exact)
	qh, qb := binBlocks(t, quant)
	if !bytes.Equal(eh, qh) {
		t.Fatalf("%s: headers differ:\n%s\n%s", what, eh, qh)
	}
	var meta struct {
		Dims  int    `json:"dims"`
		DType string `json:"vertex_dtype"`
	}
	if err := json.Unmarshal(eh, &meta); err != nil {
		t.Fatal(err)
	}
	if len(eb) != len(qb) {
		t.Fatalf("%s: %d blocks exact, %d quantized", what, len(eb), len(qb))
	}
	for i := range eb {
		e, q := eb[i], qb[i]
		if e.kind != 1 {
			if q.kind != e.kind || q.aux != e.aux || !bytes.Equal(q.payload, e.payload) {
				t.Fatalf("%s: block %d (kind %d) differs", what, i, e.kind)
			}
			continue
		}
		if q.kind != 6 {
			t.Fatalf("%s: block %d is kind %d, want the quantized vertices (6)", what, i, q.kind)
		}
		n, dims := int(e.aux), meta.Dims
		if meta.DType != "float32" {
			t.Fatalf("%s: vertex type %s", what, meta.DType)
		}
		got, err := api.Dequantize(q.payload, int(q.aux), n, dims)
		if err != nil {
			t.Fatalf("%s: block %d: %v", what, i, err)
		}
		for r := range n {
			for a := range dims {
				want := float64(math.Float32frombits(binary.LittleEndian.Uint32(e.payload[4*(r*dims+a):])))
				if got := got[r*dims+a]; !(math.Abs(got-want) <= p) {
					t.Fatalf("%s: block %d row %d axis %d: %v decodes to %v, over %g away", what, i, r, a, want, got, p)
				}
			}
		}
		rows += n
		exactBytes += len(e.payload)
		quantBytes += len(q.payload)
	}
	return rows, exactBytes, quantBytes
}

// TestPrecisionQuantizesOnlyVertices: with precision= a binary answer of
// the bbox (whole and partial boxes, a paged one), object and chunk
// routes is its exact twin with every vertices block replaced by a kind 6
// block of the same rows within the precision: same header, same other
// blocks (object ids, attributes, edges, faces), same trailer (counts,
// cursor), for every demo geometry and level and precisions from a
// tenth of a unit to a thousandth, a power of two among them. At a tenth
// of a unit (the demo spans 1,000) the vertices take under 60 % of the
// bytes (16 bits and each block's offsets and scales).
func TestPrecisionQuantizesOnlyVertices(t *testing.T) {
	t.Parallel()
	stores, srv := pagingServer(t, 1<<40)
	paths := binaryPaths(t)
	for _, s := range stores {
		for _, n := range s.Levels() {
			for _, box := range pagingBoxes {
				paths = append(paths, fmt.Sprintf("/api/v1/stores/%s/bbox?%s&level=%d&attributes=*&f=bin", s.Name(), box, n),
					fmt.Sprintf("/api/v1/stores/%s/bbox?%s&level=%d&f=bin&limit=50", s.Name(), box, n))
			}
		}
	}
	// Vertices and bytes of their blocks at a tenth of a unit.
	rows, exactBytes, quantBytes := 0, 0, 0
	for _, path := range paths {
		code, _, exact := serveFull(t, srv.Handler(), path)
		if code != http.StatusOK {
			t.Fatalf("%s: %d %.300s", path, code, exact)
		}
		for _, p := range []float64{0.1, 1.0 / 64, 1e-3} {
			qpath := path + "&precision=" + strconv.FormatFloat(p, 'g', -1, 64)
			code, _, quant := serveFull(t, srv.Handler(), qpath)
			if code != http.StatusOK {
				t.Fatalf("%s: %d %.300s", qpath, code, quant)
			}
			r, e, q := sameButQuantized(t, qpath, exact, quant, p)
			if p == 0.1 {
				rows, exactBytes, quantBytes = rows+r, exactBytes+e, quantBytes+q
			}
		}
	}
	if rows == 0 || quantBytes*10 > exactBytes*6 {
		t.Errorf("%d vertices: %d bytes quantized, %d exact", rows, quantBytes, exactBytes)
	}
}

// TestPrecisionRefused: precision= is a positive number, and only the
// binary format carries it; anything else is a 400 that says so, on each
// route that takes it, whether the format came from f= or Accept. With
// Accept naming the binary format it applies.
func TestPrecisionRefused(t *testing.T) {
	t.Parallel()
	h := demoServer(t, api.Options{}).Handler()
	routes := []string{"/api/v1/stores/cells/bbox?min=0,0,0&max=300,300,300", "/api/v1/stores/axons/objects/3?level=0",
		"/api/v1/stores/cells/levels/1/chunks/0.0.0?attributes=*"}
	for _, route := range routes {
		for _, tc := range []struct {
			query, accept, detail string
		}{
			{"&f=json&precision=0.5", "", "precision= needs the binary format (f=bin); f=json"},
			{"&f=ndjson&precision=0.5", "", "f=ndjson sends coordinates as stored"},
			{"&f=arrow&precision=0.5", "", "f=arrow sends coordinates as stored"},
			{"&precision=0.5", "application/json", "f=json sends"},
			{"&precision=0.5", "", "f=json sends"},
			{"&f=bin&precision=0", "", `precision="0": give the largest error`},
			{"&f=bin&precision=-1", "", `precision="-1"`},
			{"&f=bin&precision=abc", "", `precision="abc"`},
			{"&f=bin&precision=NaN", "", `precision="NaN"`},
			{"&f=bin&precision=Inf", "", `precision="Inf"`},
			{"&f=bin&precision=1e301", "", `precision="1e301": give the largest error per coordinate you accept, a positive number in store units, at most 1e300`},
		} {
			var hdr []string
			if tc.accept != "" {
				hdr = []string{"Accept", tc.accept}
			}
			resp := do(t, h, http.MethodGet, route+tc.query, hdr...)
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), strings.ReplaceAll(tc.detail, `"`, `\"`)) {
				t.Errorf("%s%s (Accept %q): %d %s; want 400 saying %q", route, tc.query, tc.accept, resp.StatusCode, body, tc.detail)
			}
		}
		resp := do(t, h, http.MethodGet, route+"&precision=0.5", "Accept", "application/vnd.zvf.v1+octet-stream")
		body, _ := io.ReadAll(resp.Body)
		if _, blocks := binBlocks(t, body); resp.StatusCode != http.StatusOK || blocks[0].kind != 6 {
			t.Errorf("%s with Accept binary: %d, first block kind %d", route, resp.StatusCode, blocks[0].kind)
		}
	}
	// A route without vertices takes no precision.
	resp := do(t, h, http.MethodGet, "/api/v1/stores/axons/objects/3/manifest?precision=1")
	if body, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "unknown parameter precision") {
		t.Errorf("manifest with precision: %d %s", resp.StatusCode, body)
	}
}

// TestBinaryContentCoding: a binary answer is compressed with the coding
// the client accepts (zstd preferred), decodes to the identical body, and
// each coding has its own ETag; a quantized one too. Before, binary was
// never compressed.
func TestBinaryContentCoding(t *testing.T) {
	t.Parallel()
	h := demoServer(t, api.Options{}).Handler()
	for _, path := range []string{"/api/v1/stores/cells/bbox?min=0,0,0&max=1000,1000,1000&attributes=*&f=bin",
		"/api/v1/stores/axons/bbox?min=0,0,0&max=1000,1000,1000&f=bin&precision=0.01",
		"/api/v1/stores/meshes/objects/2?f=bin&precision=0.05", "/api/v1/stores/cells/levels/0/chunks/0.0.0?f=bin"} {
		ident := do(t, h, http.MethodGet, path, "Accept-Encoding", "identity")
		plain, _ := io.ReadAll(ident.Body)
		etags := map[string]bool{ident.Header.Get("ETag"): true}
		for _, enc := range []string{"zstd", "gzip"} {
			resp := do(t, h, http.MethodGet, path, "Accept-Encoding", "gzip;q=0.9, "+enc)
			wire, _ := io.ReadAll(resp.Body)
			if got := resp.Header.Get("Content-Encoding"); got != enc || resp.StatusCode != http.StatusOK {
				t.Fatalf("%s, Accept-Encoding %s: %d, Content-Encoding %q", path, enc, resp.StatusCode, got)
			}
			var dec io.Reader
			if enc == "zstd" {
				zr, err := zstd.NewReader(bytes.NewReader(wire))
				if err != nil {
					t.Fatal(err)
				}
				defer zr.Close()
				dec = zr
			} else {
				gr, err := gzip.NewReader(bytes.NewReader(wire))
				if err != nil {
					t.Fatal(err)
				}
				dec = gr
			}
			got, err := io.ReadAll(dec)
			if err != nil || !bytes.Equal(got, plain) {
				t.Fatalf("%s in %s: decodes to %d bytes (%v), identity is %d", path, enc, len(got), err, len(plain))
			}
			// Float32 coordinates alone barely shrink (zstd then stores
			// its blocks raw); quantized ones, ids and edges do.
			if len(wire) > len(plain)+len(plain)/100 || (strings.Contains(path, "precision") && len(wire) > len(plain)*3/4) {
				t.Errorf("%s in %s: %d bytes, identity %d", path, enc, len(wire), len(plain))
			}
			etags[resp.Header.Get("ETag")] = true
		}
		if len(etags) != 3 {
			t.Errorf("%s: ETags %v, want one per coding", path, etags)
		}
	}
}

// TestQuantizedAnswersCompress: zstd shrinks a quantized answer of
// uniformly random points (the worst case: every 16-bit value's low byte
// random, its high byte one of a few). The finding: zstd's fastest level
// stored such blocks as they were, 6.02 bytes a vertex on the wire for
// 6.00 of payload.
func TestQuantizedAnswersCompress(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem, err := synth.PointsChunked(ctx, 40_000, 1, writer.CodecNone, 250) // 5,000 points a chunk, as the bench's 2M in chunks of 125
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	st := zvftest.OpenSub(t, mem, "points", nil)
	srv := apitest.New(t, api.Options{Stores: []*zvf.Store{st}})
	path := "/api/v1/stores/points/bbox?min=0,0,0&max=1000,1000,1000&level=0&f=bin&precision=" + strconv.FormatFloat(synth.Side/65536, 'g', -1, 64)
	plain, _ := io.ReadAll(do(t, srv.Handler(), http.MethodGet, path, "Accept-Encoding", "identity").Body)
	resp := do(t, srv.Handler(), http.MethodGet, path, "Accept-Encoding", "zstd")
	wire, _ := io.ReadAll(resp.Body)
	if resp.Header.Get("Content-Encoding") != "zstd" {
		t.Fatalf("Content-Encoding %q", resp.Header.Get("Content-Encoding"))
	}
	if _, blocks := binBlocks(t, plain); blocks[0].kind != 6 || blocks[0].aux != 16 {
		t.Fatalf("first block kind %d at %d bits; want 6 at 16", blocks[0].kind, blocks[0].aux)
	}
	if len(wire) > len(plain)*19/20 {
		t.Errorf("a quantized answer of %d bytes is %d in zstd: %.2f bytes a vertex", len(plain), len(wire), float64(len(wire))/40_000)
	}
}
