package zvf_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/fragindex"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/ragged"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// copyFixture copies a reference store into a temp dir for mutation.
func copyFixture(t *testing.T, name string) string {
	return zvftest.CopyTree(t, filepath.Join(fixtures, name+".zarrvectors"))
}

// mutate rewrites the file at path with f of its bytes until t ends, when
// the file gets its bytes back: cases mutate one copy in turn (copying a
// store costs far more than a case).
func mutate(t *testing.T, path string, f func([]byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	orig := bytes.Clone(b)
	t.Cleanup(func() {
		if err := os.WriteFile(path, orig, 0o644); err != nil {
			t.Error(err)
		}
	})
	if err := os.WriteFile(path, f(b), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCorruptChunks: a damaged chunk fails the queries that touch it with a
// typed error naming store, level, array and chunk; the rest keeps working;
// validate reports it with its path.
func TestCorruptChunks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := copyFixture(t, "graph")
	for _, tc := range []struct {
		name, file string
		f          func([]byte) []byte
		array      string
		kind       error
	}{
		{"odd vertex blob", "0/vertices/3.4.2/c/0", func(b []byte) []byte { return b[:len(b)-5] }, "vertices", zvf.ErrCorrupt},
		{"fragment index F lies", "0/vertex_fragments/3.4.2/c/0", func(b []byte) []byte { b[8] = 0xff; b[9] = 0xff; return b }, "vertex_fragments", zvf.ErrCorrupt},
		{"fragment index wrong magic", "0/vertex_fragments/3.4.2/c/0", func(b []byte) []byte { b[0] = 'X'; return b }, "vertex_fragments", zvf.ErrCorrupt},
		{"range past the rows", "0/vertex_fragments/3.4.2/c/0", func(b []byte) []byte {
			x, err := fragindex.Decode(b, -1)
			if err != nil {
				t.Fatal(err)
			}
			fr := x.Fragments()
			fr[0].Count += 1000
			out, _ := fragindex.Encode(fr)
			return out
		}, "vertex_fragments", zvf.ErrCorrupt},
		{"links past the chunk", "0/links/0/3.4.2/c/0", func(b []byte) []byte { b[0] = 0xff; b[1] = 0x7f; return b }, "links/0", zvf.ErrCorrupt},
		{"bad chunk zarr.json", "0/vertices/3.4.2/zarr.json", func(b []byte) []byte { return []byte("{nope") }, "vertices", zvf.ErrCorrupt},
		{"unknown codec", "0/vertices/3.4.2/zarr.json", func(b []byte) []byte {
			return []byte(strings.Replace(string(b), `"name":"bytes"`, `"name":"lzma9"`, 1))
		}, "vertices", zvf.ErrUnsupported},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mutate(t, filepath.Join(dir, tc.file), tc.f)
			st := zvftest.Store(t, dir)
			l := zvftest.OpenLevel(t, st, zvf.Options{Name: "graph"}, 0)
			// chunk 3.4.2 spans [300,400)×[400,500)×[200,300)
			_, err := l.BBox(ctx, zvf.BBoxQuery{Min: []float64{300, 400, 200}, Max: []float64{399, 499, 299}, Connectivity: true}, func(*zvf.Batch) error { return nil })
			var ze *zvf.Error
			if !errors.As(err, &ze) || !errors.Is(err, tc.kind) {
				t.Fatalf("err = %v, want a *zvf.Error of kind %v", err, tc.kind)
			}
			if ze.Store != "graph" || ze.Level != 0 || ze.Chunk != "3.4.2" || !strings.HasPrefix(ze.Array, tc.array) {
				t.Fatalf("error names store %q level %d array %q chunk %q", ze.Store, ze.Level, ze.Array, ze.Chunk)
			}
			// Elsewhere the store still answers.
			res, err := l.BBox(ctx, zvf.BBoxQuery{Min: []float64{390, 223, 585}, Max: []float64{480, 313, 675}}, func(*zvf.Batch) error { return nil })
			if err != nil || res.Count == 0 {
				t.Fatalf("healthy part: %d rows, %v", res.Count, err)
			}
			rep := zvf.Validate(ctx, st, "graph", 5, nil)
			found := false
			for _, p := range rep.Problems {
				if p.Severity == "error" && strings.Contains(p.Path+p.Message, "3.4.2") {
					found = true
				}
			}
			if rep.OK() || !found {
				t.Fatalf("validate did not report the chunk: %+v", rep.Problems)
			}
		})
	}
}

func TestUnsupportedVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := copyFixture(t, "skeleton")
	for _, v := range []string{"0.8.0", "0.5.2", "1.0"} {
		t.Run(v, func(t *testing.T) {
			mutate(t, filepath.Join(dir, "zarr.json"), func(b []byte) []byte {
				return []byte(strings.Replace(string(b), `"0.7.0"`, `"`+v+`"`, 1))
			})
			st, _ := blobstore.Open(ctx, dir)
			_, err := zvf.Open(ctx, st, zvf.Options{Name: "s"})
			if !errors.Is(err, zvf.ErrUnsupported) || !strings.Contains(err.Error(), v) {
				t.Errorf("version %s: %v", v, err)
			}
			_ = st.Close()
		})
	}
}

func TestManifestNamesMissingChunk(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := copyFixture(t, "graph")
	// Remove a chunk that object 0's manifest names (its first block).
	if err := os.RemoveAll(filepath.Join(dir, "0/vertices/3.4.2")); err != nil {
		t.Fatal(err)
	}
	st, _ := blobstore.Open(ctx, dir)
	defer st.Close()
	l := zvftest.OpenLevel(t, st, zvf.Options{Name: "graph"}, 0)
	if _, err := l.Object(ctx, 0, nil); !errors.Is(err, zvf.ErrCorrupt) || !strings.Contains(err.Error(), "3.4.2") {
		t.Fatalf("object 0: %v", err)
	}
	if _, err := l.Object(ctx, 2, nil); err != nil {
		t.Fatalf("object 2 should still read: %v", err)
	}
}

// oneCell is the payload of a vlen-bytes chunk of one cell (a u32 count,
// then a u32 length before the cell's bytes); withCell builds one.
func oneCell(t *testing.T, b []byte) []byte {
	t.Helper()
	if len(b) < 8 || binary.LittleEndian.Uint32(b) != 1 || int(binary.LittleEndian.Uint32(b[4:])) != len(b)-8 {
		t.Fatalf("not a one-cell vlen-bytes chunk: % x", b[:min(len(b), 16)])
	}
	return b[8:]
}

func withCell(p []byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 1)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(p)))
	return append(b, p...)
}

// removeFile deletes path until t ends, when it gets its bytes back.
func removeFile(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Error(err)
		}
	})
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

// TestCorruptCells09: a damaged ZVF 0.9 cell — plain, zstd-compressed or
// inside a shard — fails the queries that touch its chunk with a typed
// error naming store, level, family and chunk; the rest of the store keeps
// answering; validate reports the chunk.
func TestCorruptCells09(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	type corruption struct {
		name  string
		file  string
		f     func(*testing.T, []byte) []byte // nil: the file is removed
		array string
		kind  error
	}
	stores := []struct {
		name           string
		chunk          float64 // chunk edge
		broken, intact string  // chunk keys
		cases          []corruption
	}{
		{"graph_v09", 100, "3.4.5", "7.5.5", []corruption{
			{"vlen length past the chunk", "0/vertices/c/3/4/5", func(_ *testing.T, b []byte) []byte { return b[:len(b)-5] }, "vertices", zvf.ErrCorrupt},
			{"vertex cell not whole rows", "0/vertices/c/3/4/5", func(t *testing.T, b []byte) []byte {
				p := oneCell(t, b)
				return withCell(p[:len(p)-5])
			}, "vertices", zvf.ErrCorrupt},
			{"listed in nonempty_chunks, not stored", "0/vertices/c/3/4/5", nil, "vertices", zvf.ErrCorrupt},
			{"fragment index wrong magic", "0/vertex_fragments/c/3/4/5", func(t *testing.T, b []byte) []byte {
				oneCell(t, b)[0] = 'X'
				return b
			}, "vertex_fragments", zvf.ErrCorrupt},
			{"intra link past the chunk", "0/links/0/0.0.0/c/3/4/5", func(t *testing.T, b []byte) []byte {
				binary.LittleEndian.PutUint64(oneCell(t, b), 1<<40)
				return b
			}, "links/0/0.0.0", zvf.ErrCorrupt},
			{"cross link cell cut to 5 bytes", "0/links/0/0.0.+1/c/3/4/5", func(t *testing.T, b []byte) []byte {
				return withCell(oneCell(t, b)[:5])
			}, "links/0/0.0.+1", zvf.ErrCorrupt},
			{"cross link cell's group count zeroed", "0/links/0/0.0.+1/c/3/4/5", func(t *testing.T, b []byte) []byte {
				clear(oneCell(t, b)[:8])
				return b
			}, "links/0/0.0.+1", zvf.ErrCorrupt},
			{"perm_idx not a permutation", "0/links/0/0.0.+1/c/3/4/5", func(t *testing.T, b []byte) []byte {
				rows, sigma, err := ragged.DecodeLinkCell(oneCell(t, b), false, 2, true)
				if err != nil || len(rows) == 0 {
					t.Fatalf("the fixture's cell: %d rows, %v", len(rows), err)
				}
				perms := make([]int64, len(rows)/2)
				for r := range perms {
					perms[r] = ragged.LehmerCode([]int{int(sigma[2*r]), int(sigma[2*r+1])})
				}
				perms[0] = 2 // 2! = 2 orders of two endpoints: codes 0 and 1
				p, err := ragged.EncodeLinkCell(rows, 2, perms, false)
				if err != nil {
					t.Fatal(err)
				}
				return withCell(p)
			}, "links/0/0.0.+1", zvf.ErrCorrupt},
			{"vertex family metadata unknown codec", "0/vertices/zarr.json", func(_ *testing.T, b []byte) []byte {
				return []byte(strings.Replace(string(b), `"vlen-bytes"`, `"vlen-lzma9"`, 1))
			}, "vertices", zvf.ErrUnsupported},
		}},
		{"streamlines_zstd_v09", 200, "3.3.3", "1.1.1", []corruption{
			{"zstd frame cut short", "0/vertices/c/3/3/3", func(_ *testing.T, b []byte) []byte { return b[:len(b)-10] }, "vertices", zvf.ErrCorrupt},
		}},
		{"mesh_sharded_v09", 100, "2.2.2", "5.5.4", []corruption{
			{"shard index checksum", "0/vertices/c/0/0/0", func(_ *testing.T, b []byte) []byte { b[len(b)-1] ^= 0xff; return b }, "vertices", zvf.ErrCorrupt},
			{"shard cut short", "0/vertices/c/0/0/0", func(_ *testing.T, b []byte) []byte { return b[:len(b)/2] }, "vertices", zvf.ErrCorrupt},
		}},
	}
	box := func(key string, edge float64) ([]float64, []float64) {
		lo, hi := make([]float64, 3), make([]float64, 3)
		for i, s := range strings.Split(key, ".") {
			var k float64
			for _, c := range s {
				k = 10*k + float64(c-'0')
			}
			lo[i], hi[i] = k*edge, (k+1)*edge-1
		}
		return lo, hi
	}
	for _, sc := range stores {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			dir := zvftest.CopyTree(t, filepath.Join(fixtures09, sc.name+".zarrvectors"))
			for _, tc := range sc.cases {
				t.Run(tc.name, func(t *testing.T) {
					path := filepath.Join(dir, tc.file)
					if tc.f == nil {
						removeFile(t, path)
					} else {
						mutate(t, path, func(b []byte) []byte { return tc.f(t, b) })
					}
					st := zvftest.Store(t, dir)
					var ze *zvf.Error
					s, err := zvf.Open(ctx, st, zvf.Options{Name: sc.name})
					if strings.HasSuffix(tc.file, "zarr.json") {
						// Family metadata is read at open: the store does
						// not open, and says which document failed.
						if dir := strings.TrimSuffix(tc.file, "/zarr.json"); !errors.As(err, &ze) || !errors.Is(err, tc.kind) || ze.Array != tc.array || !strings.Contains(err.Error(), `"`+dir+`"`) {
							t.Fatalf("open: %v, want a *zvf.Error of kind %v naming %s", err, tc.kind, dir)
						}
						return
					}
					if err != nil {
						t.Fatal(err)
					}
					l, _ := s.Level(0)
					lo, hi := box(sc.broken, sc.chunk)
					_, err = l.BBox(ctx, zvf.BBoxQuery{Min: lo, Max: hi, Connectivity: true}, func(*zvf.Batch) error { return nil })
					if !errors.As(err, &ze) || !errors.Is(err, tc.kind) {
						t.Fatalf("err = %v, want a *zvf.Error of kind %v", err, tc.kind)
					}
					if ze.Store != sc.name || ze.Level != 0 || ze.Chunk != sc.broken || ze.Array != tc.array {
						t.Fatalf("error names store %q level %d array %q chunk %q: %v", ze.Store, ze.Level, ze.Array, ze.Chunk, err)
					}
					lo, hi = box(sc.intact, sc.chunk)
					res, err := l.BBox(ctx, zvf.BBoxQuery{Min: lo, Max: hi, Connectivity: true}, func(*zvf.Batch) error { return nil })
					if err != nil || res.Count == 0 {
						t.Fatalf("healthy chunk %s: %d rows, %v", sc.intact, res.Count, err)
					}
					rep := zvf.Validate(ctx, st, sc.name, 5, nil)
					found := false
					for _, p := range rep.Problems {
						if p.Severity == "error" && strings.Contains(p.Path+p.Message, sc.broken) {
							found = true
						}
					}
					if rep.OK() || !found {
						t.Fatalf("validate did not report chunk %s: %+v", sc.broken, rep.Problems)
					}
				})
			}
		})
	}
}

// TestChunkGridFillValue09: a ZVF 0.9 chunk-grid array's unwritten cells
// are empty (fill_value ""), which is how a cell nonempty_chunks lists but
// the store lacks is told from one that holds bytes. An array whose fill
// value holds bytes is refused at open, naming it. Before, a vertices
// array with a 12-byte fill value and a listed cell missing answered a
// phantom vertex made of the fill's bytes where the cell should have been
// reported corrupt.
func TestChunkGridFillValue09(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const name = "graph_v09"
	for _, array := range []string{"vertices", "vertex_fragments", "links/0/0.0.+1", "vertex_attributes/radius"} {
		t.Run(array, func(t *testing.T) {
			t.Parallel()
			st := memFixture09(t, name)
			editMemJSON(t, st, "0/"+array+"/zarr.json", func(doc map[string]any) { doc["fill_value"] = "AAAAAAAAAAAA" })
			if err := st.Delete(ctx, "0/"+array+"/c/3/4/5"); err != nil {
				t.Fatal(err)
			}
			_, err := zvf.Open(ctx, st, zvf.Options{Name: name})
			var ze *zvf.Error
			if !errors.As(err, &ze) || !errors.Is(err, zvf.ErrCorrupt) || ze.Array != array || !strings.Contains(err.Error(), "fill_value") {
				t.Fatalf("open: %v, want a corrupt-data error naming %s and its fill_value", err, array)
			}
		})
	}
}
