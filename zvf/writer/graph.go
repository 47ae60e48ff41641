package writer

import (
	"context"
	"slices"

	"github.com/zvfserve/zvfserve/zvf/storage"
)

// Graph is the input of WriteGraph. Edges holds pairs of node indices
// (for a skeleton: [child, parent]).
type Graph struct {
	Positions        []float32
	Edges            []int64
	ObjectIDs        []int64     // optional, per node (default: all 0)
	Attributes       []Attribute // per node
	LinkAttributes   []Attribute // per edge
	ObjectAttributes []Attribute
	// Skeleton stores a tree: nodes are reordered depth-first from the
	// root, and only branch edges (parent != child-1) go to links/0 while
	// every cross-chunk edge goes to cross_chunk_links/0.
	Skeleton bool
}

// WriteGraph writes a graph or skeleton store (§5.4): one fragment per
// object present in a chunk, intra-chunk edges in links/0 with chunk-local
// rows, cross-chunk edges as cross_chunk_links/0 records.
func WriteGraph(ctx context.Context, w storage.Writer, prefix string, gr *Graph, o Options) (*Summary, error) {
	kind, conv := "graph", "explicit"
	if gr.Skeleton {
		kind, conv = "skeleton", "implicit_sequential_with_branches"
	}
	g, err := prepare(&o, gr.Positions, kind, conv)
	if err != nil {
		return nil, err
	}
	d := g.d
	n := len(gr.Positions) / d
	if len(gr.Edges)%2 != 0 {
		return nil, inputErr("Graph.Edges", -1, "%d values is not a list of pairs", len(gr.Edges))
	}
	for i, v := range gr.Edges {
		if v < 0 || v >= int64(n) {
			return nil, inputErr("Graph.Edges", i/2, "node %d out of range [0, %d)", v, n)
		}
	}
	if err := checkAttrs("Graph.Attributes", gr.Attributes, n); err != nil {
		return nil, err
	}
	if err := checkAttrs("Graph.LinkAttributes", gr.LinkAttributes, len(gr.Edges)/2); err != nil {
		return nil, err
	}
	ids, nobj, err := graphObjects("Graph.ObjectIDs", gr.ObjectIDs, n, gr.ObjectAttributes)
	if err != nil {
		return nil, err
	}
	pos, edges, attrs := gr.Positions, gr.Edges, gr.Attributes
	if gr.Skeleton {
		pos, edges, attrs, ids = reorderTree(d, pos, edges, attrs, ids)
	}
	l := &level{d: d, pos: pos, vattrs: attrs, hasObjects: true, linkWidth: 2, lattrs: gr.LinkAttributes,
		cclGroup: true, cclWidth: 2, oattrs: gr.ObjectAttributes}
	l.chunks, l.manifests = chunkByObject(g, pos, ids, nobj)
	l.addEdges(edges, gr.Skeleton)
	return run(ctx, w, prefix, &o, g, l)
}

// addEdges splits edges into per-chunk links/0 rows (chunk-local rows,
// linkSrc = edge index) and cross-chunk records, both in edge order. For a
// skeleton, intra-chunk edges to the previous row are implicit.
func (l *level) addEdges(edges []int64, skeleton bool) {
	d := l.d
	chunkOf, local := rowIndex(l.chunks, len(l.pos)/d)
	for e := 0; e < len(edges)/2; e++ {
		a, b := edges[2*e], edges[2*e+1]
		ca, cb := chunkOf[a], chunkOf[b]
		if ca != cb {
			l.ccl = append(l.ccl, l.chunks[ca].c[:d]...)
			l.ccl = append(l.ccl, int64(local[a]))
			l.ccl = append(l.ccl, l.chunks[cb].c[:d]...)
			l.ccl = append(l.ccl, int64(local[b]))
			continue
		}
		if skeleton && b == a-1 {
			continue // implicit sequential parent
		}
		c := &l.chunks[ca]
		c.links = append(c.links, int64(local[a]), int64(local[b]))
		c.linkSrc = append(c.linkSrc, uint32(e))
	}
}

// rowIndex maps every source row to its chunk index and local row.
func rowIndex(chunks []chunkData, n int) (chunkOf []int32, local []uint32) {
	chunkOf = make([]int32, n)
	local = make([]uint32, n)
	for ci := range chunks {
		for j, r := range chunks[ci].rows {
			chunkOf[r] = int32(ci)
			local[r] = uint32(j)
		}
	}
	return chunkOf, local
}

// reorderTree reorders a skeleton depth-first like the reference's
// _reorder_tree: children in edge order, the root is the first node that is
// nobody's child, and nodes it does not reach follow in index order. Edges
// keep their order and are renumbered.
func reorderTree(d int, pos []float32, edges []int64, attrs []Attribute, ids []int64) ([]float32, []int64, []Attribute, []int64) {
	n := len(pos) / d
	m := len(edges) / 2
	// Children per parent in edge order (CSR).
	start := make([]int, n+1)
	isChild := make([]bool, n)
	for e := range m {
		start[edges[2*e+1]+1]++
		isChild[edges[2*e]] = true
	}
	for i := range n {
		start[i+1] += start[i]
	}
	kids := make([]int64, m)
	fill := slices.Clone(start[:n])
	for e := range m {
		p := edges[2*e+1]
		kids[fill[p]] = edges[2*e]
		fill[p]++
	}
	root := 0
	for i := range n {
		if !isChild[i] {
			root = i
			break
		}
	}
	order := make([]int64, 0, n)
	visited := make([]bool, n)
	if n > 0 {
		stack := []int64{int64(root)}
		for len(stack) > 0 {
			v := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if visited[v] {
				continue
			}
			visited[v] = true
			order = append(order, v)
			for j := start[v+1] - 1; j >= start[v]; j-- {
				if !visited[kids[j]] {
					stack = append(stack, kids[j])
				}
			}
		}
	}
	for i := range n {
		if !visited[i] {
			order = append(order, int64(i))
		}
	}
	inv := make([]int64, n)
	newPos := make([]float32, len(pos))
	newIDs := make([]int64, n)
	for newI, old := range order {
		inv[old] = int64(newI)
		copy(newPos[newI*d:newI*d+d], pos[old*int64(d):old*int64(d)+int64(d)])
		newIDs[newI] = ids[old]
	}
	newEdges := make([]int64, len(edges))
	for i, v := range edges {
		newEdges[i] = inv[v]
	}
	newAttrs := make([]Attribute, len(attrs))
	for ai, a := range attrs {
		rs := a.rowSize()
		b := make([]byte, len(a.Data))
		for newI, old := range order {
			copy(b[newI*rs:], a.Data[int(old)*rs:int(old)*rs+rs])
		}
		a.Data = b
		newAttrs[ai] = a
	}
	return newPos, newEdges, newAttrs, newIDs
}
