package zvf_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/fragindex"
	"github.com/zvfserve/zvfserve/zvf"
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
			st, err := blobstore.Open(ctx, dir)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			s, err := zvf.Open(ctx, st, zvf.Options{Name: "graph"})
			if err != nil {
				t.Fatal(err)
			}
			l, _ := s.Level(0)
			// chunk 3.4.2 spans [300,400)×[400,500)×[200,300)
			_, err = l.BBox(ctx, zvf.BBoxQuery{Min: []float64{300, 400, 200}, Max: []float64{399, 499, 299}, Connectivity: true}, func(*zvf.Batch) error { return nil })
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
	s, err := zvf.Open(ctx, st, zvf.Options{Name: "graph"})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := s.Level(0)
	if _, err := l.Object(ctx, 0, nil); !errors.Is(err, zvf.ErrCorrupt) || !strings.Contains(err.Error(), "3.4.2") {
		t.Fatalf("object 0: %v", err)
	}
	if _, err := l.Object(ctx, 2, nil); err != nil {
		t.Fatalf("object 2 should still read: %v", err)
	}
}
