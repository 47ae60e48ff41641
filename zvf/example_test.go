package zvf_test

import (
	"context"
	"fmt"
	"log"

	"github.com/zvfserve/zvfserve/cache"
	"github.com/zvfserve/zvfserve/zvf"
	"github.com/zvfserve/zvfserve/zvf/storage/blobstore"
)

// Open a store, take a level and stream the vertices in a box, chunk by
// chunk, with the graph's edges among them.
func ExampleLevel_BBox() {
	ctx := context.Background()
	st, err := blobstore.Open(ctx, "../testdata/zvf-reference/graph.zarrvectors")
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close() // whoever opens the storage closes it; zvf.Open does not
	s, err := zvf.Open(ctx, st, zvf.Options{Name: "graph", Cache: cache.New(64 << 20)})
	if err != nil {
		log.Fatal(err)
	}
	l, err := s.Level(0)
	if err != nil {
		log.Fatal(err)
	}
	q := zvf.BBoxQuery{Min: []float64{390, 223, 585}, Max: []float64{480, 313, 675}, Connectivity: true}
	res, err := l.BBox(ctx, q, func(b *zvf.Batch) error {
		// The batch and its slices are only valid during the call: copy what is kept.
		fmt.Printf("chunk %s: %d vertices, the first at (%.1f, %.1f, %.1f)\n", b.Chunk, b.Rows,
			b.Vertices.At(0).Float64(), b.Vertices.At(1).Float64(), b.Vertices.At(2).Float64())
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d vertices, %d edges among them, from %d chunks\n", res.Count, len(res.Edges)/2, res.Chunks)
	// Output:
	// chunk 4.2.5: 9 vertices, the first at (449.3, 287.6, 594.1)
	// chunk 4.2.6: 62 vertices, the first at (466.2, 291.2, 619.1)
	// chunk 4.3.6: 8 vertices, the first at (471.7, 303.6, 622.3)
	// 79 vertices, 81 edges among them, from 6 chunks
}
