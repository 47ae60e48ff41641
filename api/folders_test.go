package api_test

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// TestEmptyChunkFoldersAnswer: a store holding empty chunk and level
// folders (a crashed writer, a delete that keeps folders) answers the box
// of its whole bounds, at a level and at level=auto, exactly as without
// them. Before, both were 404 "no such cell", and level=auto with a small
// limit answered 200 from the empty "level" 7: no vertices.
func TestEmptyChunkFoldersAnswer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := zvftest.CopyTree(t, filepath.Join(fixtures, "points_pyramid.zarrvectors"))
	for _, f := range []string{"0/vertices/9.9.9", "1/vertices/4.4.4/c", "7"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.FromSlash(f)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	st, err := blobstore.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	s, err := zvf.Open(ctx, st, zvf.Options{Name: "points_pyramid", Cache: cache.New(32 << 20)})
	if err != nil {
		t.Fatal(err)
	}
	stray, err := api.New(api.Options{Stores: []*zvf.Store{s}})
	if err != nil {
		t.Fatal(err)
	}
	clean, err := api.New(api.Options{Stores: openStores(t, "points_pyramid")})
	if err != nil {
		t.Fatal(err)
	}
	b := s.Info().Bounds
	box := "/api/v1/stores/points_pyramid/bbox?min=" + corner(b[0]) + "&max=" + corner(b[1])
	for _, q := range []string{"&level=0", "&level=1", "&level=auto&limit=5", "&level=auto&limit=100", "&level=auto&limit=100000"} {
		code, _, got := serveFull(t, stray.Handler(), box+q)
		_, _, want := serveFull(t, clean.Handler(), box+q)
		if code != http.StatusOK || !bytes.Equal(got, want) {
			t.Errorf("%s: %d %.300s\nwant %.300s", q, code, got, want)
		}
	}
}
