package synth_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/synth"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// TestOnDiskReuse: a store is written once (built, copied into a hidden
// folder, renamed into place), then reused without building; a folder
// holding no store is an error rather than silently reused.
func TestOnDiskReuse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	builds := 0
	build := func() (storage.Writer, error) {
		builds++
		return synth.Streamlines(ctx, 2000, 1)
	}
	for i := 0; i < 2; i++ {
		if err := synth.OnDisk(ctx, dir, "streamlines", build); err != nil {
			t.Fatal(err)
		}
	}
	if builds != 1 {
		t.Errorf("built %d times, want once", builds)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Name() != "streamlines" {
		t.Errorf("folder holds %v, want only streamlines/", ents)
	}
	disk := zvftest.Store(t, filepath.Join(dir, "streamlines"))
	st, err := zvf.Open(ctx, disk, zvf.Options{Name: "streamlines"})
	if err != nil {
		t.Fatal(err)
	}
	if n := st.Info().Levels[0].VertexCount; n != 2000 || len(st.Levels()) != 3 {
		t.Errorf("reopened: %d vertices, levels %v", n, st.Levels())
	}
	if err := os.Mkdir(filepath.Join(dir, "points"), 0o755); err != nil {
		t.Fatal(err)
	}
	err = synth.OnDisk(ctx, dir, "points", func() (storage.Writer, error) { t.Fatal("built over a folder"); return nil, nil })
	if err == nil || !strings.Contains(err.Error(), "holds no store") {
		t.Errorf("folder without a store: %v", err)
	}
}
