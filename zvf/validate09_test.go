package zvf_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage"
)

// editMemJSON rewrites the zarr.json at key of a mem:// store through f.
func editMemJSON(t *testing.T, st storage.Writer, key string, f func(doc map[string]any)) {
	t.Helper()
	ctx := context.Background()
	b, err := storage.ReadAll(ctx, st, key, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	f(doc)
	if b, err = json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, key, b); err != nil {
		t.Fatal(err)
	}
}

// validateWithin runs Validate, failing t when it takes longer than d
// (the old loop over num_objects rows never ended, nor looked at ctx).
func validateWithin(t *testing.T, st storage.Store, name string, d time.Duration) *zvf.Report {
	t.Helper()
	done := make(chan *zvf.Report, 1)
	go func() { done <- zvf.Validate(context.Background(), st, name, 5, nil) }()
	select {
	case rep := <-done:
		return rep
	case <-time.After(d):
		t.Fatalf("validate did not end within %v", d)
		return nil
	}
}

// TestValidateDeclaredObjects: validate walks the manifests a level
// stores, as the server does, not the rows num_objects declares — a store
// declaring 2^50 objects is one problem found at once (its manifests array
// is too short) or, when the array declares the rows too and stores four,
// checked in the time four manifests take; objects in a run of fill-value
// rows are counted.
func TestValidateDeclaredObjects(t *testing.T) {
	t.Parallel()
	const name = "graph_v09"
	for _, tc := range []struct {
		name    string
		shape   bool // the manifests array declares the rows too
		ok      bool
		objects int64
		msg     string
	}{
		{"num_objects past the manifests", false, false, 0, "holds 4 manifests, num_objects is 1125899906842624"},
		{"manifests array as long", true, true, 1 << 50, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := memFixture09(t, name)
			editMemJSON(t, st, "0/object_index/zarr.json", func(doc map[string]any) {
				doc["attributes"].(map[string]any)["num_objects"] = int64(1) << 50
			})
			if tc.shape {
				editMemJSON(t, st, "0/object_index/manifests/zarr.json", func(doc map[string]any) {
					doc["shape"] = []int64{1 << 50}
				})
			}
			rep := validateWithin(t, st, name, 20*time.Second)
			if rep.OK() != tc.ok {
				t.Fatalf("ok = %v: %+v", rep.OK(), rep.Problems)
			}
			if tc.msg != "" {
				n := 0
				for _, p := range rep.Problems {
					if strings.Contains(p.Message, tc.msg) {
						n += p.Count
					}
				}
				if n != 1 {
					t.Fatalf("%d problems saying %q, want 1: %+v", n, tc.msg, rep.Problems)
				}
			}
			if tc.objects != 0 && rep.Objects < tc.objects {
				t.Fatalf("%d objects checked, want %d", rep.Objects, tc.objects)
			}
		})
	}
}
