package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

func runCmd(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return out.String(), errb.String(), code
}

func TestZarrCat(t *testing.T) {
	t.Parallel()
	abs, err := filepath.Abs("../../testdata/zarr-codecs/fill/float64_fill_nan.zarr")
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"../../testdata/zarr-codecs/fill/float64_fill_nan.zarr", "file://" + abs, "file://" + abs + "/"} {
		out, errs, code := runCmd(t, "zarr-cat", target)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", target, code, errs)
		}
		var got struct {
			Shape    []int  `json:"shape"`
			DataType string `json:"data_type"`
			Fill     any    `json:"fill_value"`
			Values   []any  `json:"values"`
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if got.DataType != "float64" || got.Fill != "NaN" || len(got.Values) != 24 || got.Values[0] != -2.5 || got.Values[3] != "NaN" {
			t.Fatalf("%s: %+v", target, got)
		}
	}
	out, _, code := runCmd(t, "zarr-cat", "../../testdata/zarr-codecs/vlen/bytes_1d_zstd.zarr")
	if code != 0 || !strings.Contains(out, `"values":["","AA==","//4AAQ==",`) {
		t.Fatalf("vlen bytes: %d %.200s", code, out)
	}
	if _, _, code := runCmd(t, "zarr-cat", "../../testdata/zarr-codecs/nope"); code != 1 {
		t.Fatalf("missing array: exit %d", code)
	}
	if _, _, code := runCmd(t, "zarr-cat"); code != 2 {
		t.Fatalf("no argument: exit %d", code)
	}
}

func TestInspectAndQuery(t *testing.T) {
	t.Parallel()
	store := "../../testdata/zvf-reference/graph.zarrvectors"
	out, errs, code := runCmd(t, "inspect", store)
	if code != 0 || !strings.Contains(out, "zv_version   0.7.0") || !strings.Contains(out, "graph") {
		t.Fatalf("inspect: %d %s %s", code, out, errs)
	}
	out, errs, code = runCmd(t, "query", store, "--level", "0", "--bbox", "390,223,585,480,313,675")
	if code != 0 {
		t.Fatalf("query: %d %s", code, errs)
	}
	var p struct {
		Count    int         `json:"count"`
		Vertices [][]float64 `json:"vertices"`
		Edges    [][]int     `json:"edges"`
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	// The fixture's expected answer: 79 nodes and 81 edges in this box.
	if p.Count != 79 || len(p.Vertices) != 79 || len(p.Edges) != 81 {
		t.Fatalf("count %d, %d vertices, %d edges", p.Count, len(p.Vertices), len(p.Edges))
	}
	out, errs, code = runCmd(t, "query", store, "--object", "0")
	if code != 0 || !strings.Contains(out, `"object_id":0`) || !strings.Contains(out, `"count":150`) {
		t.Fatalf("query object: %d %s %.300s", code, errs, out)
	}
	if _, _, code := runCmd(t, "query", store, "--bbox", "1,2,3"); code != 2 {
		t.Fatalf("short bbox: exit %d", code)
	}
}

func TestStoreArg(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, name, target string }{
		{"/data/brain.zarrvectors", "brain", "/data/brain.zarrvectors"},
		{"tracts=s3://b/x.zarr?region=x", "tracts", "s3://b/x.zarr?region=x"},
		{"s3://b/hcp/tracts.zarrvectors?endpoint=http://127.0.0.1:9000&use_path_style=true", "tracts", "s3://b/hcp/tracts.zarrvectors?endpoint=http://127.0.0.1:9000&use_path_style=true"},
		{"./cells/", "cells", "./cells/"},
		// README lists mem:// as a STORE: it was named "mem:", which
		// serve refused as a name.
		{"mem://", "mem", "mem://"},
		{"s3://bucket", "bucket", "s3://bucket"},
	} {
		n, tg := storeArg(tc.in)
		if n != tc.name || tg != tc.target {
			t.Errorf("storeArg(%q) = %q, %q", tc.in, n, tg)
		}
	}
}

// TestZarrCatOnAGroup: zarr-cat pointed at a group (a store, a level, a
// 0.7 store's per-chunk vertices folder) said "zarr array \"vertices\":
// invalid metadata: node is a group, not an array" (exit 1), leaving the
// user to find the arrays. Now it names the group's members and their
// kinds, to pick one (exit 2, a command-line mistake).
func TestZarrCatOnAGroup(t *testing.T) {
	t.Parallel()
	const store = "../../testdata/zvf-reference/graph.zarrvectors"
	for _, tc := range []struct{ arg, want string }{
		{store + "/0/vertices", "zvfserve zarr-cat: " + store + "/0/vertices is a Zarr group, not an array; its members: 3.2.5 (array), 3.3.6 (array), 3.4.2 (array), 3.4.3 (array), 3.5.2 (array), 3.5.3 (array), 4.1.6 (array), 4.2.5 (array) and 40 more\n"},
		{store, "zvfserve zarr-cat: " + store + " is a Zarr group, not an array; its members: 0 (group)\n"},
	} {
		out, errs, code := runCmd(t, "zarr-cat", tc.arg)
		if code != 2 || out != "" || errs != tc.want {
			t.Errorf("zarr-cat %s: exit %d, stdout %q, stderr %q; want 2 and %q", tc.arg, code, out, errs, tc.want)
		}
	}
}
