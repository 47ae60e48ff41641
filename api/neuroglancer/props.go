package neuroglancer

import (
	"fmt"
	"math"
	"slices"

	"github.com/zvfserve/zvfserve/zvf"
)

// Where a property's values come from.
const (
	fromVertex   = iota // the annotation's vertex (a point, a line's first end)
	fromMean            // the mean over a polyline's vertices
	fromObject          // the object's attribute row
	fromObjectID        // the object id itself
	fromEdge            // the line's own edge: a graph's link attribute
)

// propSpec is a property as the info declares it.
type propSpec struct {
	ID          string   `json:"id"`
	Type        string   `json:"type"`
	Description string   `json:"description,omitempty"`
	EnumValues  []int64  `json:"enum_values,omitempty"`
	EnumLabels  []string `json:"enum_labels,omitempty"`
}

// prop is one annotation property and how to fill it.
type prop struct {
	spec    propSpec
	size    int // bytes in a record
	from    int
	attr    string // the ZVF attribute
	dtype   string // its element type
	channel int    // the first channel read
	width   int    // channels read: 3 (rgb), 4 (rgba), else 1
}

// note says what became of a ZVF attribute on the way to Neuroglancer.
type note struct {
	Attribute string `json:"attribute"`
	// Link: the attribute is a link (per-edge) attribute, whose name may
	// also be a vertex attribute's.
	Link     bool   `json:"link_attribute,omitempty"`
	Property string `json:"property,omitempty"`
	Note     string `json:"note"`
}

// Neuroglancer splits a record of more than 255 bytes into several GPU
// property groups; properties past this budget are left out instead.
const propBudget = 240

// maxChannels bounds how many per-channel properties one attribute gives.
const maxChannels = 16

// numericType is the Neuroglancer property type a ZVF element type is
// served as, and whether that is a conversion.
func numericType(dt string) (typ string, converted bool, ok bool) {
	switch dt {
	case "float32", "int8", "uint8", "int16", "uint16", "int32", "uint32":
		return dt, false, true
	case "float64", "float16", "int64", "uint64":
		return "float32", true, true
	case "bool":
		return "uint8", true, true
	}
	return "", false, false
}

// propsFor plans the properties of one annotation kind: level 0's vertex
// attributes (per vertex, or their mean over a polyline), object
// attributes on polylines, and, when objectID, the object id as an int32
// (the caller checks that every id fits; the source's relationship
// carries the ids whether or not they do). geomBytes is the record's
// fixed geometry size, counted against the budget. The attributes are
// budgeted first, so that they are the same with or without the id.
func propsFor(k kind, l0 *zvf.Level, geomBytes int, objectID bool) ([]prop, []note) {
	var props []prop
	var notes []note
	used := map[string]bool{"object_id": true}
	info := l0.Info()
	for _, a := range info.VertexAttributes {
		from := fromVertex
		if k == kindPolyline {
			from = fromMean
		}
		ps, ns := attrProps(a, from, used)
		props, notes = append(props, ps...), append(notes, ns...)
	}
	if k == kindPolyline {
		for _, a := range info.ObjectAttributes {
			ps, ns := attrProps(a, fromObject, used)
			props, notes = append(props, ps...), append(notes, ns...)
		}
	}
	if k == kindLine {
		// A line is one stored edge: its link attributes are its own.
		for _, a := range info.LinkAttributes {
			ps, ns := attrProps(a, fromEdge, used)
			props, notes = append(props, ps...), append(notes, ns...)
		}
	}
	// Records hold 4-byte properties first, then 2-byte, then 1-byte ones
	// (Neuroglancer's layout); declaring them in that order keeps the
	// declaration order the record order.
	byAlign := func(a, b prop) int { return align(b.spec.Type) - align(a.spec.Type) }
	slices.SortStableFunc(props, byAlign)
	budget := propBudget - geomBytes
	kept := props[:0]
	for _, p := range props {
		if p.size > budget {
			notes = append(notes, note{Attribute: p.attr, Link: p.from == fromEdge, Property: p.spec.ID, Note: fmt.Sprintf("left out: a record holds at most %d bytes of properties", propBudget-geomBytes)})
			continue
		}
		budget -= p.size
		kept = append(kept, p)
	}
	if objectID {
		if budget >= 4 {
			kept = append(kept, prop{spec: propSpec{ID: "object_id", Type: "int32", Description: "ZVF object id (-1: none)"},
				size: 4, from: fromObjectID, width: 1})
			slices.SortStableFunc(kept, byAlign)
		} else {
			notes = append(notes, note{Attribute: "object id", Property: "object_id", Note: fmt.Sprintf("left out: a record holds at most %d bytes of properties (the relationship %q carries the ids)", propBudget-geomBytes, relationshipID)})
		}
	}
	return kept, notes
}

// align is a property type's alignment group in a record.
func align(typ string) int {
	switch typ {
	case "float32", "int32", "uint32":
		return 4
	case "int16", "uint16":
		return 2
	}
	return 1
}

func typeSize(typ string) int {
	switch typ {
	case "rgb":
		return 3
	case "rgba", "float32", "int32", "uint32":
		return 4
	case "int16", "uint16":
		return 2
	}
	return 1
}

// attrProps maps one ZVF attribute to properties: a categorical attribute
// to an enum property labelled with its categories, uint8 × 3 (4) to rgb
// (rgba), other numbers one property per channel; what cannot be held is
// converted or left out, with a note.
func attrProps(a zvf.AttrInfo, from int, used map[string]bool) ([]prop, []note) {
	link := from == fromEdge
	leave := func(why string) ([]prop, []note) {
		return nil, []note{{Attribute: a.Name, Link: link, Note: "left out: " + why}}
	}
	typ, converted, ok := numericType(a.DType)
	if !ok {
		return leave(fmt.Sprintf("%s values have no Neuroglancer property type", a.DType))
	}
	desc := "ZVF attribute " + a.Name
	switch from {
	case fromMean:
		desc = "mean of ZVF vertex attribute " + a.Name + " over the polyline"
	case fromEdge:
		desc = "ZVF link attribute " + a.Name + " of the edge"
	}
	ch := max(a.Channels, 1)
	if a.Categories != nil {
		if from == fromMean {
			return leave("a category has no mean over a polyline")
		}
		if ch != 1 {
			return leave("categories with several channels")
		}
		if converted { // int64, uint64 or bool codes
			typ, converted = "uint32", true
		}
		id := identifier(a.Name, "a", used)
		used[id] = true
		p := prop{spec: propSpec{ID: id, Type: typ, Description: desc + " (categorical)"}, size: typeSize(typ), from: from, attr: a.Name, dtype: a.DType, width: 1}
		for i, c := range a.Categories {
			p.spec.EnumValues = append(p.spec.EnumValues, int64(i))
			p.spec.EnumLabels = append(p.spec.EnumLabels, c)
		}
		if _, hi := intRange(typ); float64(len(a.Categories)-1) > hi {
			return leave(fmt.Sprintf("%d categories do not fit %s codes", len(a.Categories), typ))
		}
		return []prop{p}, noteIf(converted, a, link, id, a.DType+" codes served as "+typ)
	}
	if a.DType == "uint8" && (ch == 3 || ch == 4) && from != fromMean {
		typ := map[int]string{3: "rgb", 4: "rgba"}[ch]
		id := identifier(a.Name, "a", used)
		used[id] = true
		return []prop{{spec: propSpec{ID: id, Type: typ, Description: desc + " (colour)"}, size: ch, from: from, attr: a.Name, dtype: a.DType, width: ch}}, nil
	}
	if from == fromMean {
		typ, converted = "float32", a.DType != "float32"
	}
	if ch > maxChannels {
		return leave(fmt.Sprintf("%d channels (at most %d are served)", ch, maxChannels))
	}
	var out []prop
	var notes []note
	for c := range ch {
		name, d := a.Name, desc
		if ch > 1 {
			name, d = fmt.Sprintf("%s_%d", a.Name, c), fmt.Sprintf("%s, channel %d", desc, c)
		}
		id := identifier(name, "a", used)
		used[id] = true
		out = append(out, prop{spec: propSpec{ID: id, Type: typ, Description: d}, size: typeSize(typ), from: from, attr: a.Name, dtype: a.DType, channel: c, width: 1})
		notes = append(notes, noteIf(converted && c == 0, a, link, id, a.DType+" served as "+typ)...)
	}
	return out, notes
}

func noteIf(cond bool, a zvf.AttrInfo, link bool, id, what string) []note {
	if !cond {
		return nil
	}
	return []note{{Attribute: a.Name, Link: link, Property: id, Note: "converted: " + what}}
}

// column finds an attribute column by name.
func column(cols []zvf.Column, name string) *zvf.Column {
	for i := range cols {
		if cols[i].Name == name {
			return &cols[i]
		}
	}
	return nil
}

// edgeColumn finds a link attribute's column by name.
func edgeColumn(cols []zvf.EdgeColumn, name string) *zvf.EdgeColumn {
	for i := range cols {
		if cols[i].Name == name {
			return &cols[i]
		}
	}
	return nil
}

// putProp writes property p of row row of col (nil: the attribute is
// absent there; NaN or 0 is written).
func putProp(dst []byte, p *prop, col *zvf.Column, row int) {
	if col == nil || col.ItemBytes() == 0 {
		putMissing(dst, p)
		return
	}
	ch := max(col.Channels, 1)
	if p.channel+p.width > ch {
		putMissing(dst, p)
		return
	}
	i := row*ch + p.channel
	size := col.ItemBytes()
	if (i+p.width)*size > len(col.Data) {
		putMissing(dst, p)
		return
	}
	if p.spec.Type == col.DType || p.spec.Type == "rgb" || p.spec.Type == "rgba" {
		copy(dst[:p.size], col.Data[i*size:])
		return
	}
	putNumber(dst, p.spec.Type, col.At(i).Float64())
}

// putEdge writes property p of edge row of col: missing where the
// store keeps no value for the edge (col nil, or not Valid there).
func putEdge(dst []byte, p *prop, col *zvf.EdgeColumn, row int) {
	if col == nil || row >= col.Edges() || !col.Has(row) {
		putMissing(dst, p)
		return
	}
	putProp(dst, p, &col.Column, col.StoredRow(row))
}

// putMean writes the mean of p's channel over the rows of col.
func putMean(dst []byte, p *prop, col *zvf.Column) {
	if col == nil || col.ItemBytes() == 0 {
		putMissing(dst, p)
		return
	}
	ch := max(col.Channels, 1)
	rows := len(col.Data) / (col.ItemBytes() * ch)
	if rows == 0 || p.channel >= ch {
		putMissing(dst, p)
		return
	}
	sum := 0.0
	for r := range rows {
		sum += col.At(r*ch + p.channel).Float64()
	}
	putNumber(dst, p.spec.Type, sum/float64(rows))
}

func putMissing(dst []byte, p *prop) {
	if p.spec.Type == "float32" {
		putNumber(dst, "float32", math.NaN())
		return
	}
	clear(dst[:p.size])
}
