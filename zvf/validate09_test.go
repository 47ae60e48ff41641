package zvf_test

import (
	"context"
	"encoding/json"
	"errors"
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

// TestValidateGroupsAndObjectAttributes09: what the server refuses of a
// level's groups and object attributes (422 on every group or object
// request) validate reports, naming the array — before, it read neither
// and called such a store valid — and a group num_groups declares but the
// groups array lacks is corrupt, not "no such group".
func TestValidateGroupsAndObjectAttributes09(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const name = "points_pyramid_v09"
	for _, tc := range []struct {
		name, doc   string
		edit        func(doc map[string]any)
		path, msg   string
		group       int64 // a group request that fails as corrupt (-1: none)
		objectFails bool
	}{
		{"object attribute data_type", "0/object_attributes/volume/zarr.json", func(doc map[string]any) { doc["data_type"] = "float64" },
			"0/object_attributes/volume", "data_type float64, the attributes say float32", -1, true},
		{"object attribute rows", "0/object_attributes/volume/zarr.json", func(doc map[string]any) { doc["attributes"].(map[string]any)["shape"] = []int{5} },
			"0/object_attributes/volume", "24 bytes are not shape [5]", -1, true},
		{"group with members and a range", "0/groups/zarr.json", func(doc map[string]any) {
			doc["attributes"].(map[string]any)["group_ranges"] = map[string]any{"1": []int{0, 2}}
		}, "0/groups", "group 1 has members and a range", 0, false},
		{"range of no group", "0/groups/zarr.json", func(doc map[string]any) {
			doc["attributes"].(map[string]any)["group_ranges"] = map[string]any{"7": []int{0, 2}}
		}, "0/groups", "group_ranges names group 7 of 2", 0, false},
		{"num_groups past the array", "0/groups/zarr.json", func(doc map[string]any) { doc["attributes"].(map[string]any)["num_groups"] = 5 },
			"0/groups", "num_groups is 5, the groups array holds 2", 3, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := memFixture09(t, name)
			editMemJSON(t, st, tc.doc, tc.edit)
			s, err := zvf.Open(ctx, st, zvf.Options{Name: name})
			if err != nil {
				t.Fatal(err)
			}
			l, _ := s.Level(0)
			if tc.group >= 0 {
				if _, err := l.Group(ctx, tc.group); !errors.Is(err, zvf.ErrCorrupt) || !strings.Contains(err.Error(), tc.msg) {
					t.Fatalf("group %d: %v, want a corrupt-data error saying %q", tc.group, err, tc.msg)
				}
			}
			if _, err := l.Object(ctx, 0, nil); (err != nil) != tc.objectFails {
				t.Fatalf("object 0: %v", err)
			}
			rep := validateWithin(t, st, name, 20*time.Second)
			found := false
			for _, p := range rep.Problems {
				found = found || (p.Severity == "error" && p.Path == tc.path && strings.Contains(p.Message, tc.msg))
			}
			if rep.OK() || !found {
				t.Fatalf("validate did not report %s saying %q: %+v", tc.path, tc.msg, rep.Problems)
			}
		})
	}
}

// TestValidateStaleNonemptyChunks09: the server reads the cells an
// array's nonempty_chunks lists, which a decentralised writer may leave
// stale (zvf-0.9-format §5.6). Validate lists each array's stored cells
// and reports one that holds bytes but is not listed — its data no answer
// holds — naming the array and the cell; a stored empty cell is no
// omission.
func TestValidateStaleNonemptyChunks09(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const name = "graph_v09"
	for _, tc := range []struct {
		name, from, to, path string
		empty                bool
	}{
		{"vertices", "0/vertices/c/3/4/5", "0/vertices/c/0/0/0", "0/vertices", false},
		{"cross-chunk links", "0/links/0/0.0.+1/c/3/4/5", "0/links/0/0.0.+1/c/9/9/9", "0/links/0/0.0.+1", false},
		{"an empty cell", "", "0/vertices/c/0/0/0", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := memFixture09(t, name)
			b := withCell(nil)
			if !tc.empty {
				var err error
				if b, err = storage.ReadAll(ctx, st, tc.from, 1<<20); err != nil {
					t.Fatal(err)
				}
			}
			if err := st.Put(ctx, tc.to, b); err != nil {
				t.Fatal(err)
			}
			rep := validateWithin(t, st, name, 20*time.Second)
			if tc.empty {
				if !rep.OK() {
					t.Fatalf("a stored empty cell reported: %+v", rep.Problems)
				}
				return
			}
			cell := strings.ReplaceAll(strings.TrimPrefix(tc.to, tc.path+"/c/"), "/", ".")
			found := false
			for _, p := range rep.Problems {
				found = found || (p.Severity == "error" && p.Path == tc.path && strings.Contains(p.Message, "nonempty_chunks") && strings.Contains(p.Message, cell))
			}
			if !found {
				t.Fatalf("validate did not report cell %s of %s: %+v", cell, tc.path, rep.Problems)
			}
		})
	}
}

// TestValidateHasPerm09: the reader trusts a links array's has_perm, and
// a wrong one misreads every row of it (a row of 1+L values read as L, or
// L as 1+L) with nothing to catch it where the row counts happen to fit.
// Validate warns where has_perm disagrees with the format's rule
// (links_has_perm: not intra, delta 0, and duplicate or undirected); the
// fixtures, which follow it, draw no warning.
func TestValidateHasPerm09(t *testing.T) {
	t.Parallel()
	const name = "graph_v09"
	for _, tc := range []struct {
		name, doc string
		hasPerm   bool
		warn      bool
	}{
		{"as the rule says", "0/links/0/0.0.+1/zarr.json", true, false},
		{"cross array without", "0/links/0/0.0.+1/zarr.json", false, true},
		{"intra array with", "0/links/0/0.0.0/zarr.json", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := memFixture09(t, name)
			editMemJSON(t, st, tc.doc, func(doc map[string]any) { doc["attributes"].(map[string]any)["has_perm"] = tc.hasPerm })
			rep := validateWithin(t, st, name, 20*time.Second)
			path := strings.TrimSuffix(tc.doc, "/zarr.json")
			found := false
			for _, p := range rep.Problems {
				found = found || (p.Severity == "warning" && p.Path == path && strings.Contains(p.Message, "has_perm"))
			}
			if found != tc.warn {
				t.Fatalf("warned %v, want %v: %+v", found, tc.warn, rep.Problems)
			}
		})
	}
}
