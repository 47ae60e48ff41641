package neuroglancer_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zvfserve/zvfserve/api"
	"github.com/zvfserve/zvfserve/api/apitest"
	"github.com/zvfserve/zvfserve/api/neuroglancer"
	"github.com/zvfserve/zvfserve/zvf"
)

// everything is a box around any store.
var everything = zvf.BBoxQuery{Min: []float64{-1e300, -1e300, -1e300}, Max: []float64{1e300, 1e300, 1e300}}

// levelAnswer is the whole of level 0 as the reader's bbox query answers.
type levelAnswer struct {
	pos   [][3]float32
	attrs map[string]*zvf.Column // concatenated over batches
	owner []int64
	edges []int64
	// links: the link attributes' values of each edge of edges
	links []zvf.EdgeColumn
}

func wholeLevel(t *testing.T, l *zvf.Level) *levelAnswer {
	t.Helper()
	q := everything
	q.Attributes = []string{"*"}
	q.Connectivity = true
	q.LinkAttributes = []string{"*"}
	a := &levelAnswer{attrs: map[string]*zvf.Column{}}
	res, err := l.BBox(context.Background(), q, func(b *zvf.Batch) error {
		for r := range b.Rows {
			a.pos = append(a.pos, pos3(b.Vertices, r))
		}
		for _, c := range b.Attributes {
			col := a.attrs[c.Name]
			if col == nil {
				col = &zvf.Column{Name: c.Name, DType: c.DType, Channels: c.Channels}
				a.attrs[c.Name] = col
			}
			col.Data = append(col.Data, c.Data...)
		}
		if b.ObjectIDs != nil {
			a.owner = append(a.owner, b.ObjectIDs...)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	a.edges = res.Edges
	a.links = res.EdgeAttributes
	return a
}

func pos3(c zvf.Column, r int) [3]float32 {
	var p [3]float32
	for k := range 3 {
		p[k] = float32(num(c.Data, c.DType, r*c.Channels+k))
	}
	return p
}

// num reads element i of a column's data.
func num(data []byte, dt string, i int) float64 {
	le := func(n int) []byte { return data[n*i : n*i+n] }
	switch dt {
	case "uint8", "bool":
		return float64(data[i])
	case "int8":
		return float64(int8(data[i]))
	case "uint16":
		return scalar("uint16", le(2))
	case "int16":
		return scalar("int16", le(2))
	case "uint32":
		return scalar("uint32", le(4))
	case "int32":
		return scalar("int32", le(4))
	case "float32":
		return scalar("float32", le(4))
	case "float64":
		return math.Float64frombits(uint64(scalar("uint32", le(8)[:4])) | uint64(scalar("uint32", le(8)[4:]))<<32)
	case "int64", "uint64":
		return float64(int64(uint64(scalar("uint32", le(8)[:4])) | uint64(scalar("uint32", le(8)[4:]))<<32))
	}
	panic("type " + dt)
}

// propValue is what property p of row r should hold, from the reader.
func (a *levelAnswer) propValue(p ngProperty, r int) float64 {
	if p.ID == "object_id" {
		if a.owner == nil {
			return -1
		}
		return float64(a.owner[r])
	}
	col, ch := a.attrs[p.ID], 0
	if col == nil {
		i := strings.LastIndexByte(p.ID, '_')
		col = a.attrs[p.ID[:max(i, 0)]]
		ch, _ = strconv.Atoi(p.ID[i+1:])
	}
	if col == nil {
		return math.NaN()
	}
	if p.Type == "rgb" || p.Type == "rgba" {
		x := 0.0
		for k := range col.Channels {
			x = x*256 + num(col.Data, col.DType, r*col.Channels+k)
		}
		return x
	}
	v := num(col.Data, col.DType, r*col.Channels+ch)
	if p.Type == "float32" {
		v = float64(float32(v))
	}
	return v
}

// fmtPoint is p as fmt.Sprint writes it (the comparisons' key), without
// fmt's reflection: it is called for every vertex of every store.
func fmtPoint(p []float32) string {
	b := make([]byte, 1, 40)
	b[0] = '['
	for i, v := range p {
		if i > 0 {
			b = append(b, ' ')
		}
		b = strconv.AppendFloat(b, float64(v), 'g', -1, 32)
	}
	return string(append(b, ']'))
}

// TestFmtPoint: fmtPoint writes what fmt.Sprint does.
func TestFmtPoint(t *testing.T) {
	t.Parallel()
	for _, p := range [][]float32{nil, {0}, {1, -2.5, 3e-7}, {1e6, 123456789, float32(math.Inf(-1))}, {float32(math.NaN()), float32(math.Copysign(0, -1)), 0.1}} {
		if got, want := fmtPoint(p), fmt.Sprint(p); got != want {
			t.Errorf("fmtPoint %q, fmt.Sprint %q", got, want)
		}
	}
}

// seenAnnotation is where an annotation was met in the spatial index.
type seenAnnotation struct {
	level int
	raw   []byte
	a     ngAnnotation
	cells int
}

// walkSpatial fetches every cell of every spatial level and checks what
// any source must hold: each annotation in one level only, with the same
// bytes in every cell it is in, none twice in a cell, passing through the
// cell (a point, or one of its segments), in every cell of its level it
// passes through, and inside the bounds; limit the fullest cell's count.
func walkSpatial(t *testing.T, ts *httptest.Server, base string, inf *ngInfo) map[uint64]*seenAnnotation {
	t.Helper()
	seen := map[uint64]*seenAnnotation{}
	rank := inf.rank()
	var largest []ngAnnotation
	for s, sp := range inf.Spatial {
		fullest := 0
		cellsOf(sp.GridShape, func(c []int) {
			key := strings.Trim(strings.ReplaceAll(fmt.Sprint(c), " ", "_"), "[]")
			body := apitest.MustGet(t, ts, base+"/"+sp.Key+"/"+key)
			list, err := inf.decodeList(body)
			if err != nil {
				t.Fatalf("%s/%s: %v", sp.Key, key, err)
			}
			fullest = max(fullest, len(list))
			if len(list) > len(largest) {
				largest = list
			}
			inCell := map[uint64]bool{}
			for _, a := range list {
				if inCell[a.ID] {
					t.Fatalf("%s/%s: annotation %d twice", sp.Key, key, a.ID)
				}
				inCell[a.ID] = true
				for _, p := range a.Points {
					for i := range rank {
						// The upper bound is the store's, which holds its
						// vertices on its upper faces too.
						if float64(p[i]) < inf.LowerBound[i] || float64(p[i]) > inf.UpperBound[i] {
							t.Fatalf("%s/%s: annotation %d point %v outside the bounds %v–%v", sp.Key, key, a.ID, p, inf.LowerBound, inf.UpperBound)
						}
					}
				}
				if crosses(a.Points, inf.LowerBound, sp.ChunkSize, key) < 0 {
					t.Fatalf("%s/%s: annotation %d %v does not pass through the cell", sp.Key, key, a.ID, a.Points)
				}
				if prev := seen[a.ID]; prev != nil {
					if prev.level != s || string(prev.raw) != string(a.Raw) {
						t.Fatalf("annotation %d in spatial%d and %s/%s, or with other bytes", a.ID, prev.level, sp.Key, key)
					}
					prev.cells++
					continue
				}
				seen[a.ID] = &seenAnnotation{level: s, raw: a.Raw, a: a, cells: 1}
			}
		})
		if fullest != sp.Limit && !(fullest == 0 && sp.Limit == 1) {
			t.Errorf("%s: limit %d, the fullest cell holds %d", sp.Key, sp.Limit, fullest)
		}
	}
	// Each annotation is in every cell of its level it passes through.
	for id, sa := range seen {
		sp := inf.Spatial[sa.level]
		want, maybe := 0, 0
		for _, key := range gridCells(sp.GridShape) {
			switch crosses(sa.a.Points, inf.LowerBound, sp.ChunkSize, key) {
			case 1:
				want++
			case 0:
				maybe++
			}
		}
		if sa.cells < want || sa.cells > want+maybe {
			t.Fatalf("%s: annotation %d %v is in %d cells, passes through %d (and %d it may only graze)", sp.Key, id, sa.a.Points, sa.cells, want, maybe)
		}
	}
	// Lists are in a random order: not by id, not by position.
	if len(largest) >= 20 {
		if slices.IsSortedFunc(largest, func(a, b ngAnnotation) int { return cmp.Compare(a.ID, b.ID) }) {
			t.Errorf("a cell of %d annotations is sorted by id", len(largest))
		}
		if slices.IsSortedFunc(largest, func(a, b ngAnnotation) int { return cmp.Compare(a.Points[0][0], b.Points[0][0]) }) {
			t.Errorf("a cell of %d annotations is sorted by x", len(largest))
		}
	}
	return seen
}

// cellsOf calls f with every cell of a grid.
func cellsOf(shape []int, f func([]int)) {
	c := make([]int, len(shape))
	for {
		f(slices.Clone(c))
		i := 0
		for ; i < len(c); i++ {
			c[i]++
			if c[i] < shape[i] {
				break
			}
			c[i] = 0
		}
		if i == len(c) {
			return
		}
	}
}

// TestAnnotationsMatchTheReader decodes every cell of every annotation
// source of every reference store and compares it with the reader: points
// are level 0's vertex multiset (with their attributes and object ids),
// polylines its objects, lines its edges; by_id answers what the cells
// hold.
//
// The stores with ids above 2^60 (largeIDStores), and straddling 2^63
// (hugeIDStores), carry them in the relationship only: by_id names each annotation's object, objects/{id}
// lists exactly that object's annotations, and no int32 property clamps.
func TestAnnotationsMatchTheReader(t *testing.T) {
	t.Parallel()
	stores := append(append(fixtureStores(t), largeIDStores(t)...), hugeIDStores(t)...)
	_, ts := newServer(t, api.Options{Stores: stores})
	for _, st := range stores {
		for _, route := range neuroglancer.RoutesOf(st) {
			if route != "annotations" && route != "lines" {
				continue
			}
			t.Run(st.Name()+"/"+route, func(t *testing.T) {
				t.Parallel()
				base := "/ng/" + st.Name() + "/" + route
				inf, err := parseInfo(apitest.MustGet(t, ts, base+"/info"))
				if err != nil {
					t.Fatal(err)
				}
				seen := walkSpatial(t, ts, base, inf)
				checkNotes(t, inf, seen)
				l0, err := st.Level(0)
				if err != nil {
					t.Fatal(err)
				}
				whole := wholeLevel(t, l0)
				switch inf.AnnotationType {
				case "point":
					checkPoints(t, inf, seen, whole)
				case "polyline":
					checkPolylines(t, inf, seen, l0)
				case "line":
					checkLines(t, inf, seen, whole)
				default:
					t.Fatalf("annotation type %s", inf.AnnotationType)
				}
				objs := annotationObjects(t, inf, seen, l0, whole)
				checkObjectIDProperty(t, inf, l0, objs)
				checkByID(t, ts, base, inf, seen, objs)
				checkRelationships(t, ts, base, inf, seen, l0, objs)
			})
		}
	}
}

// checkNotes: the info's notes count each level's annotations and all of
// them as the cells hold them, and name a ZVF level for each.
func checkNotes(t *testing.T, inf *ngInfo, seen map[uint64]*seenAnnotation) {
	t.Helper()
	var notes struct {
		Annotations int `json:"annotations"`
		Levels      []struct {
			Key         string `json:"key"`
			ZVFLevel    *int   `json:"zvf_level"`
			Annotations int    `json:"annotations"`
		} `json:"spatial_levels"`
	}
	if err := json.Unmarshal(inf.raw["zvfserve"], &notes); err != nil || len(notes.Levels) != len(inf.Spatial) {
		t.Fatalf("notes: %v %s", err, inf.raw["zvfserve"])
	}
	per := make([]int, len(inf.Spatial))
	for _, s := range seen {
		per[s.level]++
	}
	for i, l := range notes.Levels {
		if l.Key != inf.Spatial[i].Key || l.Annotations != per[i] || l.ZVFLevel == nil {
			t.Fatalf("notes of %s: %+v; the cells hold %d annotations", inf.Spatial[i].Key, l, per[i])
		}
	}
	if notes.Annotations != len(seen) {
		t.Fatalf("notes count %d annotations, the cells hold %d", notes.Annotations, len(seen))
	}
}

func checkPoints(t *testing.T, inf *ngInfo, seen map[uint64]*seenAnnotation, whole *levelAnswer) {
	t.Helper()
	tuple := func(p []float32, props func(ngProperty) float64) string {
		var b strings.Builder
		b.WriteString(fmtPoint(p))
		for _, pr := range inf.Properties {
			fmt.Fprintf(&b, " %s=%v", pr.ID, props(pr))
		}
		return b.String()
	}
	var got, want []string
	for id, s := range seen {
		if id >= uint64(len(whole.pos)) {
			t.Fatalf("point id %d, level 0 has %d vertices (ids are dense row numbers)", id, len(whole.pos))
		}
		got = append(got, tuple(s.a.Points[0], func(p ngProperty) float64 { return s.a.Props[p.ID] }))
	}
	for r, p := range whole.pos {
		want = append(want, tuple(p[:], func(pr ngProperty) float64 { return whole.propValue(pr, r) }))
	}
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Fatalf("the spatial index holds %d points, level 0 %d; they differ (first: %q vs %q)", len(got), len(want), first(got), first(want))
	}
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

func checkPolylines(t *testing.T, inf *ngInfo, seen map[uint64]*seenAnnotation, l0 *zvf.Level) {
	t.Helper()
	ctx := context.Background()
	var vertices int64
	for row := range l0.Info().ObjectCount {
		id, err := l0.ObjectIDAt(ctx, row)
		if err != nil {
			t.Fatal(err)
		}
		has, err := l0.HasObject(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		s := seen[uint64(id)]
		if !has {
			if s != nil {
				t.Fatalf("object %d has no vertices but is a polyline", id)
			}
			continue
		}
		if s == nil {
			t.Fatalf("object %d is in no cell", id)
		}
		o, err := l0.Object(ctx, id, []string{"*"})
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(s.a.Points)) != o.Count {
			t.Fatalf("polyline %d has %d points, the object %d vertices", id, len(s.a.Points), o.Count)
		}
		for i, p := range s.a.Points {
			if fmtPoint(p) != fmtPoint(pos3Slice(o.Vertices, i)) {
				t.Fatalf("polyline %d point %d is %v, the object's vertex %v", id, i, p, pos3Slice(o.Vertices, i))
			}
		}
		if v, ok := s.a.Props["object_id"]; ok && v != float64(id) {
			t.Fatalf("polyline %d: object_id %v", id, v)
		}
		for _, c := range o.Attributes {
			if _, ok := s.a.Props[c.Name]; !ok || c.Channels != 1 {
				continue
			}
			sum := 0.0
			for r := range o.Count {
				sum += num(c.Data, c.DType, int(r))
			}
			if want := float64(float32(sum / float64(o.Count))); math.Abs(s.a.Props[c.Name]-want) > 1e-5*math.Abs(want)+1e-6 {
				t.Fatalf("polyline %d: %s %v, the mean is %v", id, c.Name, s.a.Props[c.Name], want)
			}
		}
		for _, c := range o.ObjectAttributes {
			if v, ok := s.a.Props[c.Name]; ok && v != float64(float32(num(c.Data, c.DType, 0))) {
				t.Fatalf("polyline %d: %s %v, the object attribute %v", id, c.Name, v, num(c.Data, c.DType, 0))
			}
		}
		vertices += o.Count
	}
	if len(seen) == 0 || vertices != l0.Info().VertexCount {
		t.Fatalf("%d polylines with %d vertices; level 0 has %d", len(seen), vertices, l0.Info().VertexCount)
	}
}

func pos3Slice(c zvf.Column, r int) []float32 {
	p := pos3(c, r)
	return p[:]
}

func checkLines(t *testing.T, inf *ngInfo, seen map[uint64]*seenAnnotation, whole *levelAnswer) {
	t.Helper()
	pair := func(a, b []float32) string {
		x, y := fmtPoint(a), fmtPoint(b)
		if y < x {
			x, y = y, x
		}
		return x + "-" + y
	}
	// A line's properties are its first end's vertex attributes and the
	// edge's own link attributes (NaN, or 0 for integers, where the
	// reader has no value for it), told apart by their description.
	type linkProp struct {
		col *zvf.EdgeColumn
		ch  int
	}
	links := map[string]linkProp{}
	for _, pr := range inf.Properties {
		d, ok := strings.CutPrefix(pr.Description, "ZVF link attribute ")
		if !ok {
			continue
		}
		name, ch := strings.TrimSuffix(d, " of the edge"), 0
		if n, c, ok := strings.Cut(d, " of the edge, channel "); ok {
			name = n
			ch, _ = strconv.Atoi(c)
		}
		i := slices.IndexFunc(whole.links, func(c zvf.EdgeColumn) bool { return c.Name == name })
		if i < 0 {
			t.Fatalf("property %s is of link attribute %q, which the level lacks", pr.ID, name)
		}
		links[pr.ID] = linkProp{&whole.links[i], ch}
	}
	valuesOf := map[string][]string{}
	for e := 0; 2*e+1 < len(whole.edges); e++ {
		r := int(whole.edges[2*e])
		var b strings.Builder
		for _, pr := range inf.Properties {
			v := whole.propValue(pr, r)
			if lp, ok := links[pr.ID]; ok {
				switch c := lp.col; {
				case c.Valid != nil && !c.Valid[e] && pr.Type == "float32":
					v = math.NaN()
				case c.Valid != nil && !c.Valid[e]:
					v = 0
				default:
					v = num(c.Data, c.DType, e*c.Channels+lp.ch)
					if pr.Type == "float32" {
						v = float64(float32(v))
					}
				}
			}
			fmt.Fprintf(&b, " %s=%v", pr.ID, v)
		}
		k := fmtPoint(whole.pos[r][:]) + "|" + fmtPoint(whole.pos[whole.edges[2*e+1]][:])
		valuesOf[k] = append(valuesOf[k], b.String())
	}
	var got, want []string
	for id, s := range seen {
		if len(s.a.Points) != 2 {
			t.Fatalf("line %d has %d points", id, len(s.a.Points))
		}
		got = append(got, pair(s.a.Points[0], s.a.Points[1]))
		var b strings.Builder
		for _, pr := range inf.Properties {
			fmt.Fprintf(&b, " %s=%v", pr.ID, s.a.Props[pr.ID])
		}
		k := fmtPoint(s.a.Points[0]) + "|" + fmtPoint(s.a.Points[1])
		if !slices.Contains(valuesOf[k], b.String()) {
			t.Fatalf("line %d: properties%s are not those of its first end and its edge (%v)", id, b.String(), valuesOf[k])
		}
	}
	for i := 0; i+1 < len(whole.edges); i += 2 {
		a, b := whole.pos[whole.edges[i]], whole.pos[whole.edges[i+1]]
		want = append(want, pair(a[:], b[:]))
	}
	sort.Strings(got)
	sort.Strings(want)
	if len(want) == 0 || !slices.Equal(got, want) {
		t.Fatalf("the spatial index holds %d lines, level 0 %d edges; they differ", len(got), len(want))
	}
}

// annotationObjects is the object of each annotation (none: absent),
// from the reader: a point's is its row's owner in level 0's answer
// (whose rows, in chunk order, are the points' ids), a polyline's is
// itself, a line's the object whose edge it is (edges numbered in
// manifest-row order, each object's in its own order).
func annotationObjects(t *testing.T, inf *ngInfo, seen map[uint64]*seenAnnotation, l0 *zvf.Level, whole *levelAnswer) map[uint64]int64 {
	t.Helper()
	ctx := context.Background()
	objs := map[uint64]int64{}
	switch inf.AnnotationType {
	case "point":
		for id, s := range seen {
			if fmtPoint(s.a.Points[0]) != fmtPoint(whole.pos[id][:]) {
				t.Fatalf("point %d is at %v; level 0's row %d at %v", id, s.a.Points[0], id, whole.pos[id])
			}
			if whole.owner != nil && whole.owner[id] != -1 {
				objs[id] = whole.owner[id]
			}
		}
	case "polyline":
		for id := range seen {
			objs[id] = int64(id)
		}
	case "line":
		var next uint64
		for row := range l0.Info().ObjectCount {
			id, err := l0.ObjectIDAt(ctx, row)
			if err != nil {
				t.Fatal(err)
			}
			if has, err := l0.HasObject(ctx, id); err != nil || !has {
				continue
			}
			o, err := l0.Object(ctx, id, nil)
			if err != nil {
				t.Fatal(err)
			}
			for e := 0; e+1 < len(o.Edges); e += 2 {
				s := seen[next]
				if s == nil || fmtPoint(s.a.Points[0]) != fmtPoint(pos3Slice(o.Vertices, int(o.Edges[e]))) ||
					fmtPoint(s.a.Points[1]) != fmtPoint(pos3Slice(o.Vertices, int(o.Edges[e+1]))) {
					t.Fatalf("line %d is not edge %d of object %d", next, e/2, id)
				}
				objs[next] = id
				next++
			}
		}
	}
	return objs
}

// checkObjectIDProperty: the int32 object_id property is there exactly
// when the store has objects and every id fits, never clamped.
func checkObjectIDProperty(t *testing.T, inf *ngInfo, l0 *zvf.Level, objs map[uint64]int64) {
	t.Helper()
	fits := l0.Info().ObjectCount > 0
	for row := range l0.Info().ObjectCount {
		id, err := l0.ObjectIDAt(context.Background(), row)
		if err != nil {
			t.Fatal(err)
		}
		fits = fits && id >= 0 && id <= math.MaxInt32
	}
	has := slices.ContainsFunc(inf.Properties, func(p ngProperty) bool { return p.ID == "object_id" })
	if has != fits {
		t.Fatalf("object_id property: %v; every id fits an int32: %v", has, fits)
	}
	if !has && l0.Info().ObjectCount > 0 && !strings.Contains(string(inf.raw["zvfserve"]), "no object_id property") {
		t.Fatalf("the notes do not say why object_id is left out: %s", inf.raw["zvfserve"])
	}
}

// checkRelationships: a store with objects declares the relationship
// "object"; objects/{id} lists exactly the annotations of object id (the
// bytes the cells hold), for every object; an id that is no object is 404.
// A store without objects declares none, and has no such route.
func checkRelationships(t *testing.T, ts *httptest.Server, base string, inf *ngInfo, seen map[uint64]*seenAnnotation, l0 *zvf.Level, objs map[uint64]int64) {
	t.Helper()
	ctx := context.Background()
	n := l0.Info().ObjectCount
	if n == 0 {
		if len(inf.Relationships) != 0 {
			t.Fatalf("relationships %v in a store without objects", inf.Relationships)
		}
		if resp, body := apitest.Get(t, ts, base+"/objects/0"); resp.StatusCode != http.StatusNotFound {
			t.Fatalf("objects/0 of a store without objects: %d %.200s", resp.StatusCode, body)
		}
		return
	}
	// The key is objects under the store's version (see TestNGStaleInfoAfterStoreChange).
	key, _ := inf.Relationships[0]["key"].(string)
	if len(inf.Relationships) != 1 || inf.Relationships[0]["id"] != "object" || !strings.HasPrefix(key, "v") || !strings.HasSuffix(key, "/objects") {
		t.Fatalf("relationships %v", inf.Relationships)
	}
	want := map[int64][]uint64{}
	for a, o := range objs {
		want[o] = append(want[o], a)
	}
	ids := map[int64]bool{}
	listed := 0
	for row := range n {
		id, err := l0.ObjectIDAt(ctx, row)
		if err != nil {
			t.Fatal(err)
		}
		ids[id] = true
		path := fmt.Sprintf("%s/%s/%d", base, key, uint64(id))
		list, err := inf.decodeList(apitest.MustGet(t, ts, path))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		var got []uint64
		for _, a := range list {
			got = append(got, a.ID)
			if s := seen[a.ID]; s == nil || string(s.raw) != string(a.Raw) {
				t.Fatalf("%s: annotation %d differs from the spatial index's record", path, a.ID)
			}
		}
		slices.Sort(got)
		w := slices.Sorted(slices.Values(want[id]))
		if !slices.Equal(got, w) {
			t.Fatalf("%s lists %d annotations %.20v; object %d has %d: %.20v", path, len(got), got, id, len(w), w)
		}
		listed += len(got)
	}
	if listed != len(objs) {
		t.Fatalf("the objects' lists hold %d annotations; %d have an object", listed, len(objs))
	}
	none := n
	for ids[none] {
		none++
	}
	if resp, body := apitest.Get(t, ts, fmt.Sprintf("%s/%s/%d", base, key, none)); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("objects/%d, which is no object: %d %.200s", none, resp.StatusCode, body)
	}
}

// checkByID: by_id answers each annotation with the bytes its cells hold
// and, where the source has the relationship, the annotation's object
// (none for a point no object owns); an id no annotation has is 404.
func checkByID(t *testing.T, ts *httptest.Server, base string, inf *ngInfo, seen map[uint64]*seenAnnotation, objs map[uint64]int64) {
	t.Helper()
	ids := make([]uint64, 0, len(seen))
	for id := range seen {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	step := max(1, len(ids)/300)
	for i := 0; i < len(ids); i += step {
		id := ids[i]
		a, err := inf.decodeByID(apitest.MustGet(t, ts, fmt.Sprintf("%s/%s/%d", base, inf.ByID.Key, id)), id)
		if err != nil {
			t.Fatalf("by_id/%d: %v", id, err)
		}
		if string(a.Raw) != string(seen[id].raw) {
			t.Fatalf("by_id/%d differs from the spatial index's record", id)
		}
		if len(inf.Relationships) > 0 {
			want := []uint64{}
			if o, ok := objs[id]; ok {
				want = []uint64{uint64(o)}
			}
			if len(a.Related) != 1 || !slices.Equal(a.Related[0], want) {
				t.Fatalf("by_id/%d relates to %v; want [%v]", id, a.Related, want)
			}
		}
	}
	for _, id := range []string{strconv.FormatUint(ids[len(ids)-1]+1, 10), "18446744073709551615"} {
		if resp, body := apitest.Get(t, ts, base+"/"+inf.ByID.Key+"/"+id); resp.StatusCode != http.StatusNotFound {
			t.Fatalf("by_id/%s: %d %.200s", id, resp.StatusCode, body)
		}
	}
}

// TestSkeletonsMatchTheReader: every object of every store with skeletons
// decodes to the object the reader returns (vertices, edges, vertex
// attributes); the segment properties list exactly the objects.
func TestSkeletonsMatchTheReader(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	stores := fixtureStores(t)
	_, ts := newServer(t, api.Options{Stores: stores})
	n := 0
	for _, st := range stores {
		if !slices.Contains(neuroglancer.RoutesOf(st), "skeletons") {
			continue
		}
		n++
		t.Run(st.Name(), func(t *testing.T) {
			base := "/ng/" + st.Name() + "/skeletons"
			var inf ngSkeletonInfo
			if err := json.Unmarshal(apitest.MustGet(t, ts, base+"/info"), &inf); err != nil || inf.Type != "neuroglancer_skeletons" {
				t.Fatalf("info: %v %+v", err, inf)
			}
			if !slices.Equal(inf.Transform, []float64{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0}) {
				t.Fatalf("transform %v: a store without units is in nanometres", inf.Transform)
			}
			var props struct {
				Type   string `json:"@type"`
				Inline struct {
					IDs        []string `json:"ids"`
					Properties []struct {
						ID     string `json:"id"`
						Type   string `json:"type"`
						Values []any  `json:"values"`
					} `json:"properties"`
				} `json:"inline"`
			}
			if err := json.Unmarshal(apitest.MustGet(t, ts, base+"/"+inf.SegmentProperties+"/info"), &props); err != nil || props.Type != "neuroglancer_segment_properties" {
				t.Fatalf("segment properties: %v %+v", err, props)
			}
			for _, p := range props.Inline.Properties {
				if len(p.Values) != len(props.Inline.IDs) {
					t.Fatalf("property %s has %d values for %d ids", p.ID, len(p.Values), len(props.Inline.IDs))
				}
			}
			l0, _ := st.Level(0)
			var ids []string
			for id := range l0.Info().ObjectCount {
				has, err := l0.HasObject(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				path := fmt.Sprintf("%s/%d", base, id)
				if !has {
					if resp, _ := apitest.Get(t, ts, path); resp.StatusCode != http.StatusNotFound {
						t.Fatalf("%s: %d for an object without vertices", path, resp.StatusCode)
					}
					continue
				}
				ids = append(ids, strconv.FormatInt(id, 10))
				sk, err := decodeSkeleton(&inf, apitest.MustGet(t, ts, path))
				if err != nil {
					t.Fatalf("%s: %v", path, err)
				}
				o, err := l0.Object(ctx, id, []string{"*"})
				if err != nil {
					t.Fatal(err)
				}
				if int64(len(sk.Vertices)) != o.Count || len(sk.Edges) != len(o.Edges)/2 {
					t.Fatalf("%s: %d vertices and %d edges; the object has %d and %d", path, len(sk.Vertices), len(sk.Edges), o.Count, len(o.Edges)/2)
				}
				for i, v := range sk.Vertices {
					if fmtPoint(v[:]) != fmtPoint(pos3Slice(o.Vertices, i)) {
						t.Fatalf("%s: vertex %d", path, i)
					}
				}
				for i, e := range sk.Edges {
					if int64(e[0]) != o.Edges[2*i] || int64(e[1]) != o.Edges[2*i+1] {
						t.Fatalf("%s: edge %d is %v, the object's (%d, %d)", path, i, e, o.Edges[2*i], o.Edges[2*i+1])
					}
				}
				for _, c := range o.Attributes {
					vals := sk.Attrs[c.Name]
					if len(vals) != int(o.Count)*c.Channels {
						t.Fatalf("%s: attribute %s has %d values", path, c.Name, len(vals))
					}
					for i, v := range vals {
						if want := float64(float32(num(c.Data, c.DType, i))); v != want {
							t.Fatalf("%s: %s[%d] = %v, the object's %v", path, c.Name, i, v, want)
						}
					}
				}
			}
			if !slices.Equal(props.Inline.IDs, ids) {
				t.Fatalf("segment properties list %v, the objects are %v", props.Inline.IDs, ids)
			}
			if resp, _ := apitest.Get(t, ts, fmt.Sprintf("%s/%d", base, l0.Info().ObjectCount)); resp.StatusCode != http.StatusNotFound {
				t.Fatalf("an id past the objects: %d", resp.StatusCode)
			}
		})
	}
	if n < 3 {
		t.Fatalf("only %d stores have skeletons", n)
	}
}

// TestMeshesMatchTheReader: every object of the mesh store decodes to the
// reader's object: its vertices (in nanometres) and its faces.
func TestMeshesMatchTheReader(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	stores := fixtureStores(t)
	_, ts := newServer(t, api.Options{Stores: stores})
	st := storeNamed(t, stores, "mesh")
	base := "/ng/mesh/meshes"
	var inf map[string]any
	if err := json.Unmarshal(apitest.MustGet(t, ts, base+"/info"), &inf); err != nil || inf["@type"] != "neuroglancer_legacy_mesh" {
		t.Fatalf("info: %v %v", err, inf)
	}
	l0, _ := st.Level(0)
	meshes := 0
	for id := range l0.Info().ObjectCount {
		path := fmt.Sprintf("%s/%d:0", base, id)
		has, err := l0.HasObject(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !has {
			if resp, _ := apitest.Get(t, ts, path); resp.StatusCode != http.StatusNotFound {
				t.Fatalf("%s: %d for an object without vertices", path, resp.StatusCode)
			}
			continue
		}
		var man struct {
			Fragments []string `json:"fragments"`
		}
		if err := json.Unmarshal(apitest.MustGet(t, ts, path), &man); err != nil || len(man.Fragments) == 0 {
			t.Fatalf("%s: %v %+v", path, err, man)
		}
		o, err := l0.Object(ctx, id, nil)
		if err != nil {
			t.Fatal(err)
		}
		var verts [][3]float32
		var tris [][3]uint32
		for _, f := range man.Fragments {
			m, err := decodeMesh(apitest.MustGet(t, ts, base+"/"+f))
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			for _, tr := range m.Triangles {
				tris = append(tris, [3]uint32{tr[0] + uint32(len(verts)), tr[1] + uint32(len(verts)), tr[2] + uint32(len(verts))})
			}
			verts = append(verts, m.Vertices...)
		}
		if int64(len(verts)) != o.Count {
			t.Fatalf("object %d: %d vertices, the reader %d", id, len(verts), o.Count)
		}
		for i, v := range verts {
			if fmtPoint(v[:]) != fmtPoint(pos3Slice(o.Vertices, i)) {
				t.Fatalf("object %d vertex %d: %v vs %v", id, i, v, pos3Slice(o.Vertices, i))
			}
		}
		var want [][3]uint32
		for f := 0; f+o.FaceWidth <= len(o.Faces); f += o.FaceWidth {
			for k := 1; k+1 < o.FaceWidth; k++ {
				want = append(want, [3]uint32{uint32(o.Faces[f]), uint32(o.Faces[f+k]), uint32(o.Faces[f+k+1])})
			}
		}
		if len(want) == 0 || !slices.Equal(tris, want) {
			t.Fatalf("object %d: %d triangles, the reader's faces make %d", id, len(tris), len(want))
		}
		meshes++
	}
	if meshes == 0 {
		t.Fatal("no meshes")
	}
}

// TestUpperBoundIsTheStores: an annotation source's upper_bound is the
// store's own upper corner where the chunk grid reaches past it (the
// demo's data end at z 600, in chunks of 250 whose grid ends at 750), and
// the grid's corner where the store declares more than its chunks hold;
// lower_bound stays the grid's origin, from which every spatial level's
// cells count. (walkSpatial checks every annotation against the bounds.)
func TestUpperBoundIsTheStores(t *testing.T) {
	stores := demoStores(t, nil)
	// A plan reads all of level 0; on a loaded machine that may take
	// longer than the default 30 s.
	_, ts := newServer(t, api.Options{Stores: stores, RequestTimeout: 5 * time.Minute})
	checked := 0
	for _, st := range stores {
		// Points and polylines (a graph's lines read every object: slow,
		// and their bounds are the same).
		if g := st.Info().GeometryTypes[0]; g != "point_cloud" && g != "streamline" {
			continue
		}
		for _, route := range neuroglancer.RoutesOf(st) {
			if route != "annotations" {
				continue
			}
			base := "/ng/" + st.Name() + "/" + route
			inf, err := parseInfo(apitest.MustGet(t, ts, base+"/info"))
			if err != nil {
				t.Fatal(err)
			}
			b := st.Info().Bounds
			fine := inf.Spatial[len(inf.Spatial)-1]
			for i := range inf.UpperBound {
				grid := inf.LowerBound[i] + float64(fine.GridShape[i])*fine.ChunkSize[i]
				if want := min(b[1][i], grid); inf.UpperBound[i] != want {
					t.Errorf("%s: upper_bound[%d] = %v; the store ends at %v, its grid at %v", base, i, inf.UpperBound[i], b[1][i], grid)
				}
				if inf.LowerBound[i] > b[0][i] {
					t.Errorf("%s: lower_bound %v above the store's %v", base, inf.LowerBound, b[0])
				}
			}
			checked++
		}
	}
	if checked < 2 {
		t.Fatalf("only %d annotation sources", checked)
	}
}
