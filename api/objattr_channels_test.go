package api_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/demo"
	"github.com/zvfserve/zvfserve/zvf/zvftest"
)

// TestObjectAttributeChannelCountIsBounded: an object attribute whose
// metadata declares a second dimension (channels) of 2^31 or 2^61+1 is
// corrupt data, refused with a 422 problem, whatever the format. The
// count was taken as it was: f=geoarrow built an Arrow fixed-size list of
// 2^31 values before reading a byte and panicked ("arrow: invalid size",
// a 500), and the size check rows × channels × item size overflowed, so
// 5 rows of 2^61+1 uint64 channels "needed" the 40 bytes stored and were
// read as one value a row with a channel count of 2^61+1.
func TestObjectAttributeChannelCountIsBounded(t *testing.T) {
	t.Parallel()
	// The demo's cells (ZVF 0.7: the shape is the group's attribute) and
	// the 0.9 skeleton fixture (the array's attributes).
	demoDir := t.TempDir()
	if _, err := demo.Build(t.Context(), zvftest.Store(t, demoDir), demo.Options{Seed: 1, Scale: 0.2}); err != nil {
		t.Fatal(err)
	}
	type target struct{ dir, file, attr string }
	var cases []target
	for _, ch := range []uint64{1 << 31, 1<<61 + 1} {
		d := zvftest.CopyTree(t, filepath.Join(demoDir, "cells"))
		cases = append(cases, target{d, "0/object_attributes/radius/zarr.json", fmt.Sprint(ch)})
		d = zvftest.CopyTree(t, filepath.Join(fixtures09, "skeleton_v09.zarrvectors"))
		cases = append(cases, target{d, "0/object_attributes/segment_id/zarr.json", fmt.Sprint(ch)})
	}
	for _, tc := range cases {
		dir, name := tc.dir, filepath.Base(filepath.Dir(tc.file))
		var ch uint64
		fmt.Sscan(tc.attr, &ch)
		p := filepath.Join(dir, filepath.FromSlash(tc.file))
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var meta map[string]any
		if err := json.Unmarshal(b, &meta); err != nil {
			t.Fatal(err)
		}
		attrs := meta["attributes"].(map[string]any)
		rows := attrs["shape"].([]any)[0]
		attrs["shape"] = []any{rows, ch}
		if b, err = json.Marshal(meta); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		st, err := zvf.Open(t.Context(), zvftest.Store(t, dir), zvf.Options{Name: "s"})
		if err != nil {
			// Refused when it opens: every route says so.
			var ze *zvf.Error
			if !errors.As(err, &ze) || !errors.Is(err, zvf.ErrCorrupt) {
				t.Fatalf("channels %d: open: %v, want corrupt", ch, err)
			}
			continue
		}
		srv := apitest.New(t, api.Options{Stores: []*zvf.Store{st}})
		for _, path := range []string{
			"/api/v1/stores/s/bbox?min=-1e9,-1e9,-1e9&max=1e9,1e9,1e9&f=geoarrow",
			"/api/v1/stores/s/objects/0?attributes=*",
			"/api/v1/stores/s/objects/0?f=geoarrow",
		} {
			done := make(chan struct{})
			rec := httptest.NewRecorder()
			go func() {
				defer close(done)
				srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
			}()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatalf("channels %d: %s: no answer after 30 s", ch, path)
			}
			var pr api.Problem
			if rec.Code != http.StatusUnprocessableEntity || json.Unmarshal(rec.Body.Bytes(), &pr) != nil ||
				!strings.HasSuffix(pr.Type, "/corrupt-data") || !strings.Contains(pr.Detail, name) {
				t.Errorf("%s, channels %d: %s: %d %.300s, want a 422 corrupt-data problem naming %s", name, ch, path, rec.Code, rec.Body.String(), name)
			}
		}
	}
}
