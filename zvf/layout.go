package zvf

import (
	"context"
	"errors"
	"fmt"

	"github.com/zvfserve/zvfserve/zvf/ragged"
	"github.com/zvfserve/zvfserve/zvf/storage"
	"github.com/zvfserve/zvfserve/zvf/zarr"
)

// layout is how a level stores its per-chunk array families — "the cell
// of family F at chunk C" — and its cross-chunk links. ZVF 0.6/0.7 give
// every chunk of a family its own small array, <F>/<chunk>/ (layout07);
// ZVF 0.9 one array of variable-length cells over the level's chunk grid,
// <F>/c/<chunk − origin> (layout09). Families are paths below the level:
// "vertices", "vertex_fragments", "vertex_attributes/<name>", and the
// intra-chunk links Level.intra names. Everything above — bbox, objects,
// connectivity, attributes, validation — reads through a layout and never
// builds a chunk path.
type layout interface {
	// open reads what the families declare (the chunk list, the link
	// families) and sets the level's link fields; it runs once, at Open,
	// after the level's vertex and attribute metadata.
	open(ctx context.Context) error
	// chunks lists the chunks that hold vertices, sorted.
	chunks() []Key
	// cell reads family's cell at key, uncached (Level.blob caches it). A
	// family with no cell there is ErrNotFound wrapping errMissing.
	cell(ctx context.Context, family string, key Key, ks string) ([]byte, error)
	// crossLinks returns the level's cross-chunk link records of delta
	// whose first stored endpoint lies in one of keys (nil keys: every
	// record; a caller needing records wholly inside keys reads no more),
	// each record's endpoints in the order they were written.
	crossLinks(ctx context.Context, delta int, keys []Key) ([][]ragged.Endpoint, error)
	// crossLinkRefs is crossLinks with, when the layout keeps link
	// attributes for them, where each record is stored (parallel to the
	// records; nil when it keeps none).
	crossLinkRefs(ctx context.Context, delta int, keys []Key) ([][]ragged.Endpoint, []linkRef, error)
	// crossSources lists, sorted, the cells whose cross-chunk records of
	// delta may have an endpoint in one of keys: keys themselves and every
	// cell from which an offset of the family leads into one. nil: the
	// layout keeps every record in one list, which crossLinks returns
	// whatever its keys.
	crossSources(delta int, keys []Key) []Key
	// sharded reports whether cells are packed into shards.
	sharded() bool
}

// Layout names (Info.Layout).
const (
	LayoutChunkArrays = "per_chunk_arrays"  // ZVF 0.6, 0.7
	LayoutChunkGrid   = "chunk_grid_arrays" // ZVF 0.9
)

// errMissing marks a family that has no cell for a key.
var errMissing = errors.New("no such cell")

// nodeMemo is one zarr.json read while a level opens.
type nodeMemo struct {
	node *zarr.Node
	err  error
}

// node reads and parses <level>/<p>/zarr.json once while the level opens
// (a family's metadata serves both its attributes and its array), and
// directly afterwards. A missing document is storage.ErrNotFound.
func (l *Level) node(ctx context.Context, p string) (*zarr.Node, error) {
	if m, ok := l.nodes[p]; ok {
		return m.node, m.err
	}
	var m nodeMemo
	b, err := storage.ReadAll(ctx, l.s.st, join(join(l.path, p), "zarr.json"), zarr.MaxMetadataBytes)
	if err != nil {
		m.err = err
	} else if m.node, err = zarr.ParseNode(b); err != nil {
		m.err = fmt.Errorf("%s/zarr.json: %w", join(l.path, p), err)
	}
	if l.nodes != nil {
		l.nodes[p] = m
	}
	return m.node, m.err
}

// crossFamily names the family holding a level's cross-chunk link records
// of delta, as errors and validate name it: ZVF 0.9's links/<delta> (its
// offsets arrays), 0.6/0.7's cross_chunk_links/<delta>.
func (l *Level) crossFamily(delta int) string {
	if _, ok := l.lay.(*layout09); ok {
		return "links/" + deltaName(delta)
	}
	return "cross_chunk_links/" + deltaName(delta)
}
