package neuroglancer_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/api/neuroglancer"
)

// TestDescriptorOffersSources: each store's descriptor lists its sources
// as absolute URLs (on --public-url, else on the address the request came
// to: Neuroglancer takes nothing else) and a state with a layer for them
// whose sources are those URLs, colouring by the first attribute and
// showing objects that exist.
func TestDescriptorOffersSources(t *testing.T) {
	t.Parallel()
	stores := fixtureStores(t)
	for _, public := range []string{"", "https://zvf.example/data"} {
		_, ts := newServer(t, api.Options{Stores: stores, PublicURL: public})
		base := public
		if base == "" {
			base = ts.URL
		}
		for _, tc := range []struct {
			store    string
			routes   []string
			layers   []string // type and source route of each layer
			contains string   // in some layer's shader
			segments []string
		}{
			{"points_pyramid", []string{"annotations", "density"}, []string{"annotation annotations"}, `property="cell_type", range=[0, 3]`, nil},
			{"points_bins", []string{"annotations", "density"}, []string{"annotation annotations"}, "setColor(prop_color())", nil},
			{"polylines", []string{"annotations", "lines", "skeletons", "segments", "density"}, []string{"annotation annotations", "segmentation segments"}, `property="fa"`, nil},
			{"skeleton", []string{"annotations", "lines", "skeletons", "segments", "density"}, []string{"segmentation segments", "annotation annotations"}, "float(radius) / top", []string{"0", "1", "2"}},
			{"mesh", []string{"meshes", "multilod", "segments", "density"}, []string{"segmentation segments"}, "", []string{"0", "1", "2", "3"}},
		} {
			resp, body := apitest.Get(t, ts, "/api/v1/stores/"+tc.store)
			var d struct {
				Neuroglancer *neuroglancer.Description `json:"neuroglancer"`
			}
			if resp.StatusCode != 200 || json.Unmarshal(body, &d) != nil || d.Neuroglancer == nil {
				t.Fatalf("%s: %d %.300s", tc.store, resp.StatusCode, body)
			}
			ng := d.Neuroglancer
			var routes []string
			for r, u := range ng.Sources {
				routes = append(routes, r)
				if u != base+"/ng/"+tc.store+"/"+r {
					t.Errorf("%s: source %s is %q", tc.store, r, u)
				}
			}
			slices.Sort(routes)
			if want := slices.Sorted(slices.Values(tc.routes)); !slices.Equal(routes, want) {
				t.Errorf("%s: sources %v, want %v", tc.store, routes, want)
			}
			var layers []string
			shaders := ""
			for _, l := range ng.State.Layers {
				route := l.Source[strings.LastIndexByte(l.Source, '/')+1:]
				layers = append(layers, l.Type+" "+route)
				if l.Source != "precomputed://"+ng.Sources[route] {
					t.Errorf("%s: layer source %q", tc.store, l.Source)
				}
				shaders += l.Shader + l.SkeletonShader
				if l.Type == "segmentation" && !slices.Equal(l.Segments, tc.segments) && tc.segments != nil {
					t.Errorf("%s: segments %v, want %v", tc.store, l.Segments, tc.segments)
				}
			}
			if !slices.Equal(layers, tc.layers) || !strings.Contains(shaders, tc.contains) {
				t.Errorf("%s: layers %v with shaders %q; want %v and %q", tc.store, layers, shaders, tc.layers, tc.contains)
			}
		}
	}
}
