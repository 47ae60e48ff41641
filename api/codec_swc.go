package api

import (
	"bufio"
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/zvfserve/zvfserve/zvf"
)

// swcCodec writes skeletons and graphs as SWC: one node per vertex of the
// answer, node n being row n−1 (so nodes match the JSON answer's rows),
// lines depth-first so that every parent comes before its children.
// Columns: n, type (the swc_type or else the type attribute when the
// level has one, else 0, undefined), the three coordinates in the store's
// axis order, radius (the radius attribute whatever attributes= says, else
// 1), parent (−1 for roots). Numbers are the shortest text that reads
// back to the stored value (full float32 precision).
//
// Parents come from the edges. Edges are taken as (child, parent), as
// skeleton stores keep them, when that makes a forest; otherwise (a graph
// stored either way round) the edges are taken undirected and each
// connected piece is rooted at its first vertex. A graph with a cycle has
// no SWC form: that is a 422 (type …/unrepresentable) naming an edge of
// the cycle, never a file with a cycle silently broken.
type swcCodec struct{ exportCodec }

var swcFormat = exportCodec{name: "swc", mime: "text/plain", compress: true, geoms: []string{"skeleton", "graph"}, only3D: true, encoder: holding(writeSWC)}

// swcColumn reports whether a is usable as SWC's radius or type: one
// number a row.
func swcColumn(a zvf.AttrInfo) bool { return a.Channels <= 1 && a.Categories == nil }

// pickAttributes: SWC's columns are fixed, so it reads radius and type
// (swc_type, else type) when the level has them, and nothing else.
func (swcCodec) pickAttributes(l *zvf.Level, _ []string) []string {
	var out []string
	has := func(name string) bool {
		return slices.ContainsFunc(l.Info().VertexAttributes, func(a zvf.AttrInfo) bool { return a.Name == name && swcColumn(a) })
	}
	if has("radius") {
		out = append(out, "radius")
	}
	if has("swc_type") {
		out = append(out, "swc_type")
	} else if has("type") {
		out = append(out, "type")
	}
	return out
}

func writeSWC(w *bufio.Writer, a *held) error {
	parent, err := swcParents(a.rows, a.edges)
	if err != nil {
		return err
	}
	var radius, typ *zvf.Column
	for k := range a.attrs {
		c := &a.attrs[k]
		if c.Channels > 1 || c.Categories != nil {
			continue
		}
		switch c.Name {
		case "radius":
			radius = c
		case "swc_type":
			typ = c
		case "type":
			if typ == nil {
				typ = c
			}
		}
	}
	m := a.m
	names := axisNames(m.Export.axes, 3)
	hdr := "# zvfserve SWC export: " + m.Export.source + "\n" +
		"# node n is row n-1 of the answer; lines run depth-first, each parent before its children\n" +
		"# columns: n type " + strings.Join(names, " ") + " radius parent\n"
	if radius != nil {
		hdr += "# radius: the radius attribute\n"
	} else {
		hdr += "# radius: the store has no radius attribute; written as 1\n"
	}
	if row, ok := swcTypesIntegral(typ, a.rows); !ok {
		hdr += "# type: the " + typ.Name + " attribute is not a whole number at row " + strconv.Itoa(row) +
			" (" + string(appendNumber(nil, typ, row)) + "); written as 0 (undefined)\n"
		typ = nil
	} else if typ != nil {
		hdr += "# type: the " + typ.Name + " attribute\n"
	} else {
		hdr += "# type: the store has no swc_type or type attribute; written as 0 (undefined)\n"
	}
	if u := axisUnit(m.Export.axes); u != "" {
		hdr += "# units: " + u + "\n"
	}
	if _, err := w.WriteString(hdr); err != nil {
		return err
	}
	var buf []byte
	for _, v := range swcOrder(parent) {
		buf = strconv.AppendInt(buf[:0], int64(v)+1, 10)
		buf = append(buf, ' ')
		if typ != nil {
			buf = appendNumber(buf, typ, int(v))
		} else {
			buf = append(buf, '0')
		}
		for k := 0; k < 3; k++ {
			buf = append(buf, ' ')
			buf = appendNumber(buf, &a.verts, int(v)*3+k)
		}
		buf = append(buf, ' ')
		if radius != nil {
			buf = appendNumber(buf, radius, int(v))
		} else {
			buf = append(buf, '1')
		}
		buf = append(buf, ' ')
		if p := parent[v]; p < 0 {
			buf = append(buf, "-1"...)
		} else {
			buf = strconv.AppendInt(buf, int64(p)+1, 10)
		}
		buf = append(buf, '\n')
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
	return nil
}

// swcTypesIntegral reports whether every row of a type column is a whole
// number that SWC readers can take (they parse the column as an integer:
// 2.5, nan or 1e+30 fail them); if not, the first row that is not. A
// column of an integer dtype always is.
func swcTypesIntegral(typ *zvf.Column, rows int) (int, bool) {
	if typ == nil {
		return 0, true
	}
	for i := range rows {
		n := typ.At(i)
		if n.Kind == zvf.KindInt || n.Kind == zvf.KindUint {
			return 0, true
		}
		if n.F != math.Trunc(n.F) || math.Abs(n.F) > math.MaxInt32 {
			return i, false // NaN fails the first test, infinities the second
		}
	}
	return 0, true
}

// axisUnit is the axes' unit when they share one.
func axisUnit(axes []zvf.Axis) string {
	if len(axes) == 0 {
		return ""
	}
	u := axes[0].Unit
	for _, a := range axes[1:] {
		if a.Unit != u {
			return ""
		}
	}
	return u
}

// swcParents makes a forest of n nodes from edges (pairs of node
// indices): parent[v] is v's parent or −1. See swcCodec for the rules.
func swcParents(n int, edges []int64) ([]int32, error) {
	if p, ok := directedForest(n, edges); ok {
		return p, nil
	}
	// Undirected: each distinct pair once; a self-loop, or a pair joining
	// two nodes already connected, closes a cycle.
	pairs := make([][2]int32, 0, len(edges)/2)
	for i := 0; i+1 < len(edges); i += 2 {
		a, b := int32(edges[i]), int32(edges[i+1])
		if a == b {
			return nil, cycleProblem(a, b)
		}
		pairs = append(pairs, [2]int32{min(a, b), max(a, b)})
	}
	slices.SortFunc(pairs, func(x, y [2]int32) int { return cmp.Or(cmp.Compare(x[0], y[0]), cmp.Compare(x[1], y[1])) })
	pairs = slices.Compact(pairs)
	uf := make([]int32, n)
	for i := range uf {
		uf[i] = int32(i)
	}
	find := func(x int32) int32 {
		for uf[x] != x {
			uf[x] = uf[uf[x]]
			x = uf[x]
		}
		return x
	}
	deg := make([]int32, n+1)
	for _, e := range pairs {
		ra, rb := find(e[0]), find(e[1])
		if ra == rb {
			return nil, cycleProblem(e[0], e[1])
		}
		uf[ra] = rb
		deg[e[0]+1]++
		deg[e[1]+1]++
	}
	for i := 1; i <= n; i++ {
		deg[i] += deg[i-1]
	}
	adj := make([]int32, deg[n])
	fill := slices.Clone(deg[:n])
	for _, e := range pairs {
		adj[fill[e[0]]] = e[1]
		fill[e[0]]++
		adj[fill[e[1]]] = e[0]
		fill[e[1]]++
	}
	parent := make([]int32, n)
	seen := make([]bool, n)
	queue := make([]int32, 0, n)
	for r := range n {
		if seen[r] {
			continue
		}
		seen[r], parent[r] = true, -1
		queue = append(queue[:0], int32(r))
		for len(queue) > 0 {
			v := queue[0]
			queue = queue[1:]
			for _, u := range adj[deg[v]:deg[v+1]] {
				if !seen[u] {
					seen[u], parent[u] = true, v
					queue = append(queue, u)
				}
			}
		}
	}
	return parent, nil
}

// directedForest takes edges as (child, parent): ok when every node has at
// most one parent and following parents never comes back.
func directedForest(n int, edges []int64) ([]int32, bool) {
	parent := make([]int32, n)
	for i := range parent {
		parent[i] = -1
	}
	for i := 0; i+1 < len(edges); i += 2 {
		c, p := int32(edges[i]), int32(edges[i+1])
		if c == p || (parent[c] >= 0 && parent[c] != p) {
			return nil, false
		}
		parent[c] = p
	}
	// 0 unvisited, 1 on the current path, 2 known to reach a root.
	state := make([]byte, n)
	var path []int32
	for v := range n {
		path = path[:0]
		u := int32(v)
		for u >= 0 && state[u] == 0 {
			state[u] = 1
			path = append(path, u)
			u = parent[u]
		}
		if u >= 0 && state[u] == 1 {
			return nil, false
		}
		for _, x := range path {
			state[x] = 2
		}
	}
	return parent, true
}

// swcOrder lists the nodes depth-first from each root (roots and
// children in index order), so that a parent precedes its children.
func swcOrder(parent []int32) []int32 {
	n := len(parent)
	start := make([]int32, n+1)
	for _, p := range parent {
		if p >= 0 {
			start[p+1]++
		}
	}
	for i := 1; i <= n; i++ {
		start[i] += start[i-1]
	}
	kids := make([]int32, start[n])
	fill := slices.Clone(start[:n])
	for v, p := range parent {
		if p >= 0 {
			kids[fill[p]] = int32(v)
			fill[p]++
		}
	}
	order := make([]int32, 0, n)
	var stack []int32
	for r, p := range parent {
		if p >= 0 {
			continue
		}
		stack = append(stack[:0], int32(r))
		for len(stack) > 0 {
			v := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			order = append(order, v)
			ks := kids[start[v]:start[v+1]]
			for i := len(ks) - 1; i >= 0; i-- {
				stack = append(stack, ks[i])
			}
		}
	}
	return order
}

func cycleProblem(a, b int32) *Problem {
	return unrepresentable(fmt.Sprintf("the graph has a cycle (through the edge between nodes %d and %d, rows %d and %d): SWC holds trees only; use f=json, ndjson or bin", a+1, b+1, a, b))
}
