package neuroglancer

import (
	"slices"
	"testing"

	"github.com/zvfserve/zvfserve/zvf"
)

// TestUnits: axis units become Neuroglancer's [scale, unit] and the
// skeleton transform's nanometres per unit; an axis without a unit is
// taken as nanometres (and says so), one with another kind of unit is
// unitless; names become identifiers.
func TestUnits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		axis  zvf.Axis
		scale float64
		unit  string
		nm    float64
		noted bool
	}{
		{zvf.Axis{Name: "x", Unit: "micrometer"}, 1e-6, "m", 1000, false},
		{zvf.Axis{Name: "y", Unit: "nanometer"}, 1e-9, "m", 1, false},
		{zvf.Axis{Name: "z", Unit: "angstrom"}, 1e-10, "m", 0.1, false},
		{zvf.Axis{Name: "z", Unit: "mm"}, 1e-3, "m", 1e6, false},
		{zvf.Axis{Name: "t", Unit: "millisecond"}, 1e-3, "s", 1, false},
		{zvf.Axis{Name: "x"}, 1e-9, "m", 1, true},
		{zvf.Axis{Name: "c", Unit: "furlong"}, 1, "", 1, true},
		{zvf.Axis{Name: "Depth (µm)", Unit: "um"}, 1e-6, "m", 1000, true},
	} {
		dims, notes := dimensions([]zvf.Axis{tc.axis})
		d := dims[0]
		if d.scale != tc.scale || d.unit != tc.unit || nanometresPer(dims)[0] != tc.nm || (len(notes) > 0) != tc.noted {
			t.Errorf("%+v: %+v, %g nm, notes %v", tc.axis, d, nanometresPer(dims)[0], notes)
		}
	}
	used := map[string]bool{"object_id": true}
	var got []string
	for _, n := range []string{"intensity", "Intensity", "cell type", "3d", "", "object_id", "x", "x"} {
		id := identifier(n, "a", used)
		used[id] = true
		got = append(got, id)
	}
	want := []string{"intensity", "intensity_2", "cell_type", "a_3d", "a", "object_id_2", "x", "x_2"}
	if !slices.Equal(got, want) {
		t.Fatalf("identifiers %v, want %v", got, want)
	}
	if string(dimensionsJSON([]dimension{{"z", 1e-9, "m"}, {"a", 1, ""}})) != `{"z":[1e-09,"m"],"a":[1,""]}` {
		t.Fatal("dimensions lose the axis order")
	}
}
