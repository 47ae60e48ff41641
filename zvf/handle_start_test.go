package zvf_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
)

// TestNewHandleOpensOnRefresh: a handle from NewHandle serves "not open
// yet" (ErrUnavailable) until a Refresh opens it; a Refresh that runs out
// of time leaves it so, and the next one opens it.
func TestNewHandleOpensOnRefresh(t *testing.T) {
	t.Parallel()
	st, err := blobstore.Open(context.Background(), filepath.Join(fixtures, "graph.zarrvectors"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	h := zvf.NewHandle(st, zvf.Options{Name: "graph"}, zvf.Watch{Enabled: true})
	if _, err := h.Current(); !errors.Is(err, zvf.ErrUnavailable) {
		t.Fatalf("before its first open: %v, want ErrUnavailable", err)
	}
	gone, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-gone.Done()
	if _, err := h.Refresh(gone); err == nil {
		t.Fatal("a Refresh out of time opened the store")
	}
	if _, err := h.Current(); !errors.Is(err, zvf.ErrUnavailable) {
		t.Fatalf("after a Refresh out of time: %v, want ErrUnavailable", err)
	}
	if changed, err := h.Refresh(context.Background()); !changed || err != nil {
		t.Fatalf("Refresh: %v %v", changed, err)
	}
	if s, err := h.Current(); s == nil || err != nil || s.Name() != "graph" {
		t.Fatalf("after Refresh: %v %v", s, err)
	}
}
