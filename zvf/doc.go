// Package zvf reads ZVF (Zarr Vectors Format) stores — zv_version 0.6 and
// 0.7 as the reference implementation writes them, and 0.9.0–0.9.4 (the
// chunk-grid layout) — and answers the queries the server exposes:
// bounding boxes (streamed chunk by chunk), objects, manifests, groups,
// chunk tiles and level selection.
//
// Open reads the root and every level's metadata, lists chunk keys and
// shard indexes once; queries never re-read metadata. Decoded cells,
// fragment indexes and manifest chunks go through an injected Cache.
//
// Files by prefix: store.go and version.go (Open, which zv_version is
// read), level.go, layout*.go (where the cell of family F at chunk C is:
// layout07.go per-chunk arrays, layout09_cells.go chunk-grid arrays,
// layout09_links.go merged link families), cells.go (cells through the
// cache), bbox*.go (box queries: matching, pooled scratch, level=auto),
// connectivity.go (edges, faces, links), owners.go (which object owns a
// row), object.go, group.go, exports.go (what the Neuroglancer sources
// read), handle.go (revisions over time), validate.go, errors.go.
//
// Three words that are easy to mix up:
//   - format version: the store's zv_version (Info.ZVVersion);
//   - revision: a hash of what one opened store holds (Store.Revision),
//     from which ETags and paging cursors derive;
//   - generation: a Handle's count of the revisions it has opened, the
//     prefix of their cache keys.
//
// Byte layouts: testdata/zvf-reference/FORMAT.md and
// testdata/zvf-0.9/FORMAT.md at the repository root. Leaf decoders:
// fragindex, zvf/manifest, zvf/ragged; arrays: zvf/zarr.
package zvf
