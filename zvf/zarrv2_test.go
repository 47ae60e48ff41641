package zvf_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
)

// TestOpenZarrV2: a Zarr v2 store (on disk, where listings hide dot files)
// is refused as unsupported with a sentence that says so, not as corrupt;
// a folder without any Zarr metadata stays "not a ZVF store".
func TestOpenZarrV2(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		files []string
		kind  error
		want  string
	}{
		{"v2 group", []string{".zgroup", ".zattrs"}, zvf.ErrUnsupported, "Zarr v2 store; ZVF needs Zarr v3"},
		{"v2 array", []string{".zarray"}, zvf.ErrUnsupported, "Zarr v2 store; ZVF needs Zarr v3"},
		{"v2 attributes only", []string{".zattrs"}, zvf.ErrUnsupported, "Zarr v2 store; ZVF needs Zarr v3"},
		{"no metadata", []string{"readme.txt"}, zvf.ErrCorrupt, "no root zarr.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, f), []byte(`{"zarr_format": 2}`), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			st, err := blobstore.Open(context.Background(), dir)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			_, err = zvf.Open(context.Background(), st, zvf.Options{Name: "old"})
			if !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want a %v error saying %q", err, tc.kind, tc.want)
			}
		})
	}
}
