package neuroglancer

import (
	"context"
	"fmt"
	"math"

	"github.com/zvfserve/zvfserve/zvf"
)

// Description is the "neuroglancer" member of a store's descriptor: the
// URL of each source (absolute, unless the server knows no address for
// itself: then a path on it; Neuroglancer takes "precomputed://" followed
// by it), and a viewer state with a layer for each.
type Description struct {
	Sources map[string]string `json:"sources"`
	State   *State            `json:"state"`
}

// State is a Neuroglancer viewer state (the JSON after "#!" in its URL).
// A mesh store's state also says where to look (see meshView).
type State struct {
	Dimensions      map[string][2]any `json:"dimensions,omitempty"`
	Position        []float64         `json:"position,omitempty"`
	ProjectionScale float64           `json:"projectionScale,omitempty"`
	Layers          []Layer           `json:"layers"`
	Layout          string            `json:"layout"`
}

// Layer is one layer of a State.
type Layer struct {
	Type           string   `json:"type"`
	Name           string   `json:"name"`
	Source         string   `json:"source"`
	Visible        *bool    `json:"visible,omitempty"`
	Shader         string   `json:"shader,omitempty"`
	Segments       []string `json:"segments,omitempty"`
	SkeletonShader string   `json:"skeletonShader,omitempty"`
}

// stateSegments is how many objects a ready state shows at first.
const stateSegments = 32

// Describe returns st's Neuroglancer sources and a ready state, or nil when
// it has none. base is the server's absolute URL as the client reaches it
// ("" for paths). It reads at
// most the first manifests of level 0 (to list objects that exist); when
// those cannot be read it returns the description without them and the
// error, so that the caller can tell it from the whole one (which goes
// out under the version's ETag).
func Describe(ctx context.Context, st *zvf.Store, base string) (*Description, error) {
	routes := RoutesOf(st)
	if len(routes) == 0 {
		return nil, nil
	}
	d := &Description{Sources: map[string]string{}, State: &State{Layers: []Layer{}, Layout: "3d"}}
	for _, r := range routes {
		d.Sources[r] = base + "/ng/" + st.Name() + "/" + r
	}
	l0, err := st.Level(0)
	if err != nil || len(objectRoutes(st)) == 0 {
		return d, nil // the density volume alone: no ready layer
	}
	info := l0.Info()
	hidden := false
	objects, objErr := someObjects(ctx, l0)
	src := func(r string) string { return "precomputed://" + d.Sources[r] }
	// A layer is named after its store, and its source when there are two.
	name := func(r string) string {
		if r == st.Name() {
			return r
		}
		return st.Name() + " " + r
	}
	switch geometry(st.Info()) {
	case "point_cloud":
		d.State.Layers = append(d.State.Layers, Layer{Type: "annotation", Name: st.Name(), Source: src("annotations"),
			Shader: annotationShader(kindPoint, l0)})
	case "mesh":
		// The multi-resolution meshes, through the segments source, whose
		// info names them under the store version (segments.go); "meshes"
		// (legacy) stays listed for viewers that predate them.
		d.State.Layers = append(d.State.Layers, Layer{Type: "segmentation", Name: name("meshes"), Source: src("segments"),
			Segments: objects})
		meshView(d.State, st.Info())
	default:
		lines := Layer{Type: "annotation", Name: st.Name(), Source: src("annotations"), Shader: annotationShader(kindOf(st, "annotations"), l0)}
		if kindOf(st, "annotations") == kindPolyline {
			// Streamlines read best as polylines; their skeletons are a
			// second, hidden layer.
			d.State.Layers = append(d.State.Layers, lines)
		}
		if has(routes, "skeletons") {
			// Through the segments source, as the meshes.
			sk := Layer{Type: "segmentation", Name: name("skeletons"), Source: src("segments"),
				Segments: objects, SkeletonShader: skeletonShader(info.VertexAttributes)}
			if kindOf(st, "annotations") == kindPolyline {
				sk.Visible = &hidden
			}
			d.State.Layers = append(d.State.Layers, sk)
		}
		if kindOf(st, "annotations") != kindPolyline {
			lines.Name = st.Name() + " edges"
			lines.Visible = &hidden
			d.State.Layers = append(d.State.Layers, lines)
		}
	}
	return d, objErr
}

// meshView points a mesh store's state at the store's box. A mesh source
// gives Neuroglancer no bounds, so on its own Neuroglancer opens on a
// 1 µm box at the origin; the state opens it as on a box it knows: the
// mesh source's dimensions (x, y, z, as its transform maps the store's
// first three axes) in the store's units, the box's centre, and its widest
// extent in the smallest unit rounded up to a power of two.
func meshView(s *State, info *zvf.Info) {
	b := info.Bounds
	if len(info.Axes) < 3 || len(b[0]) < 3 || len(b[1]) < 3 {
		return
	}
	dims, _ := dimensions(info.Axes)
	nm := nanometresPer(dims)
	canonical := min(nm[0], nm[1], nm[2])
	s.Dimensions = map[string][2]any{}
	widest := 0.0
	for a, name := range []string{"x", "y", "z"} {
		scale := dims[a].scale
		if dims[a].unit != "m" {
			scale = 1e-9 // the mesh transform takes such a unit as a nanometre
		}
		s.Dimensions[name] = [2]any{scale, "m"}
		s.Position = append(s.Position, (b[0][a]+b[1][a])/2)
		widest = max(widest, (b[1][a]-b[0][a])*nm[a]/canonical)
	}
	s.ProjectionScale = 1
	if widest > 0 && !math.IsInf(widest, 0) {
		s.ProjectionScale = math.Exp2(math.Ceil(math.Log2(widest)))
	}
	for _, v := range s.Position {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			s.Dimensions, s.Position, s.ProjectionScale = nil, nil, 0
			return
		}
	}
}

func has(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// someObjects lists the first objects of level 0 that exist (a skeleton
// layer shows the segments its state names; a missing one is an error).
// A read that fails is the answer's error, not the end of the list: a
// backend blip or a change would otherwise give a shorter list under the
// version's ETag.
func someObjects(ctx context.Context, l0 *zvf.Level) ([]string, error) {
	var out []string
	for row := int64(0); row < l0.Info().ObjectCount && len(out) < stateSegments && row < 4*stateSegments; row++ {
		id, err := l0.ObjectIDAt(ctx, row)
		if err != nil {
			return nil, err
		}
		ok, err := l0.HasObject(ctx, id)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, segmentID(id))
		}
	}
	return out, nil
}

// annotationShader colours annotations of kind k by the first attribute
// that makes a property (as the source's info declares it): categories
// through a colour map over their codes, numbers through one whose range
// the layer's control sets (the descriptor reads no vertex data, so it
// cannot know a number's range), colours as they are. Polylines draw
// their vertices as small dots.
func annotationShader(k kind, l0 *zvf.Level) string {
	props, _ := propsFor(k, l0, k.geometryBytes(l0.Dims()), false)
	attrs := l0.Info().VertexAttributes
	if k == kindPolyline {
		attrs = append(append([]zvf.AttrInfo{}, attrs...), l0.Info().ObjectAttributes...)
	}
	extra := ""
	if k == kindPolyline {
		extra = "  setPolyEndpointMarkerSize(2.0, 2.0);\n"
	}
	for _, a := range attrs {
		for _, p := range props {
			if p.attr != a.Name {
				continue
			}
			switch {
			case p.spec.Type == "rgb" || p.spec.Type == "rgba":
				return fmt.Sprintf("void main() {\n  setColor(prop_%s());\n%s}\n", p.spec.ID, extra)
			case p.spec.EnumValues != nil:
				return fmt.Sprintf("#uicontrol invlerp colour(property=%q, range=[0, %d])\nvoid main() {\n  setColor(colormapJet(colour()));\n%s}\n",
					p.spec.ID, max(len(p.spec.EnumValues)-1, 1), extra)
			default:
				return fmt.Sprintf("#uicontrol invlerp colour(property=%q)\nvoid main() {\n  setColor(colormapJet(colour()));\n%s}\n", p.spec.ID, extra)
			}
		}
	}
	if extra != "" {
		return "void main() {\n  setColor(defaultColor());\n" + extra + "}\n"
	}
	return ""
}

// skeletonShader colours skeletons by their first one-component vertex
// attribute divided by a slider's value (for categories, the last code).
func skeletonShader(attrs []zvf.AttrInfo) string {
	used := map[string]bool{}
	for _, a := range attrs {
		if _, _, why := skeletonAttr(a); why != "" {
			continue // as newSkeletonSpec: ids are given in the same order
		}
		id := identifier(a.Name, "a", used)
		used[id] = true
		if a.Channels > 1 {
			continue
		}
		top, most := 10, 100
		if a.Categories != nil {
			top = max(len(a.Categories)-1, 1)
			most = top
		}
		return fmt.Sprintf("#uicontrol float top slider(min=0, max=%d, default=%d)\nvoid main() {\n  emitRGB(colormapJet(clamp(float(%s) / top, 0.0, 1.0)));\n}\n",
			most, top, id)
	}
	return ""
}
