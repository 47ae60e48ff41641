package neuroglancer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/zvfserve/zvfserve/zvf"
)

// unitScale maps an axis unit (an OME-NGFF unit name, or an SI symbol) to
// Neuroglancer's [scale, base unit].
func unitScale(unit string) (float64, string, bool) {
	if v, ok := lengthUnits[unit]; ok {
		return v, "m", true
	}
	if v, ok := timeUnits[unit]; ok {
		return v, "s", true
	}
	return 0, "", false
}

var lengthUnits = map[string]float64{
	"angstrom": 1e-10, "attometer": 1e-18, "centimeter": 1e-2, "decimeter": 1e-1, "exameter": 1e18,
	"femtometer": 1e-15, "foot": 0.3048, "gigameter": 1e9, "hectometer": 1e2, "inch": 0.0254, "kilometer": 1e3,
	"megameter": 1e6, "meter": 1, "micrometer": 1e-6, "mile": 1609.344, "millimeter": 1e-3, "nanometer": 1e-9,
	"parsec": 3.0856775814913673e16, "petameter": 1e15, "picometer": 1e-12, "terameter": 1e12, "yard": 0.9144,
	"yoctometer": 1e-24, "yottameter": 1e24, "zeptometer": 1e-21, "zettameter": 1e21,
	"m": 1, "mm": 1e-3, "um": 1e-6, "µm": 1e-6, "nm": 1e-9, "pm": 1e-12, "km": 1e3,
}

var timeUnits = map[string]float64{
	"attosecond": 1e-18, "centisecond": 1e-2, "day": 86400, "decisecond": 1e-1, "exasecond": 1e18,
	"femtosecond": 1e-15, "gigasecond": 1e9, "hectosecond": 1e2, "hour": 3600, "kilosecond": 1e3,
	"megasecond": 1e6, "microsecond": 1e-6, "millisecond": 1e-3, "minute": 60, "nanosecond": 1e-9,
	"petasecond": 1e15, "picosecond": 1e-12, "second": 1, "terasecond": 1e12, "yoctosecond": 1e-24,
	"yottasecond": 1e24, "zeptosecond": 1e-21, "zettasecond": 1e21,
	"s": 1, "ms": 1e-3, "us": 1e-6, "ns": 1e-9,
}

// dimension is one axis of a source's coordinate space.
type dimension struct {
	name  string
	scale float64
	unit  string
}

// dimensions maps the store's axes to Neuroglancer's coordinate space. An
// axis without a unit is taken to be in nanometres: Neuroglancer aligns
// layers by unit, and skeletons and meshes are always in nanometres, so
// this keeps every source of a store in one place. An axis whose unit is
// not a length or a time is unitless. Notes say what was assumed.
func dimensions(axes []zvf.Axis) ([]dimension, []string) {
	var notes []string
	out := make([]dimension, len(axes))
	used := map[string]bool{}
	for i, a := range axes {
		name := identifier(a.Name, "d", used)
		used[name] = true
		if name != a.Name {
			notes = append(notes, fmt.Sprintf("axis %q is named %q (Neuroglancer's dimension names are identifiers)", a.Name, name))
		}
		scale, unit, ok := unitScale(a.Unit)
		switch {
		case ok:
		case a.Unit == "":
			scale, unit = 1e-9, "m"
			notes = append(notes, fmt.Sprintf("axis %q has no unit: taken as nanometres", a.Name))
		default:
			scale, unit = 1, ""
			notes = append(notes, fmt.Sprintf("axis %q has unit %q, which is not a length or time: unitless", a.Name, a.Unit))
		}
		out[i] = dimension{name: name, scale: scale, unit: unit}
	}
	return out, notes
}

// nanometresPer is how many nanometres one store unit of each axis spans
// (1 for an axis whose unit is not a length, as for an axis without one).
func nanometresPer(dims []dimension) []float64 {
	out := make([]float64, len(dims))
	for i, d := range dims {
		out[i] = 1
		if d.unit == "m" {
			// 15 digits: 1e-6 m is 1000 nm, not 999.9999999999999.
			out[i], _ = strconv.ParseFloat(strconv.FormatFloat(d.scale*1e9, 'g', 15, 64), 64)
		}
	}
	return out
}

// dimensionsJSON is the "dimensions" member: an object whose key order is
// the axis order (so it cannot be a Go map).
func dimensionsJSON(dims []dimension) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, d := range dims {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(d.name)
		u, _ := json.Marshal(d.unit)
		fmt.Fprintf(&b, "%s:[%s,%s]", k, strconv.FormatFloat(d.scale, 'g', -1, 64), u)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// identifier turns name into one Neuroglancer accepts for a property,
// vertex attribute or dimension (^[a-z][a-zA-Z0-9_]*$), different from
// every name in used: other characters become '_', a leading capital is
// lowered, anything else that cannot start one gets prefix+"_".
func identifier(name, prefix string, used map[string]bool) string {
	var b strings.Builder
	for _, r := range name {
		if r < 128 && (r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	s := b.String()
	switch {
	case s == "":
		s = prefix
	case s[0] >= 'A' && s[0] <= 'Z':
		s = strings.ToLower(s[:1]) + s[1:]
	case s[0] < 'a' || s[0] > 'z':
		s = prefix + "_" + s
	}
	if len(s) > 64 {
		s = s[:64]
	}
	base := s
	for i := 2; used[s]; i++ {
		s = base + "_" + strconv.Itoa(i)
	}
	return s
}
