// Package writer writes ZVF (Zarr Vectors) stores, zv_version 0.7.0, laid
// out exactly as the reference implementation (zarr-vectors-py 0.7) lays
// them out: same keys, same zarr.json bytes, same payload bytes (the golden
// tests rewrite every reference fixture and compare).
//
// One call writes one store (one geometry family) under a key prefix of a
// storage.Writer:
//
//	WritePoints     point clouds: bins as fragments (row-major, empty bins
//	                included), or one fragment per object when object ids,
//	                object attributes or groups are given
//	WritePolylines  streamlines/polylines: fragments are runs of vertices in
//	                one bin, cross-chunk records between runs
//	WriteGraph      graphs and skeletons: links/0 + link_fragments, cross-chunk
//	                links; skeletons reordered depth-first, branch links only
//	WriteMesh       polygon meshes: intra-chunk faces in links/0, faces across
//	                chunks as cross-chunk records
//
// Options.Pyramid adds coarser levels built by per-object metavertex
// coarsening with shared fragments, preserved object ids and cross-level
// links ±1 (mirrored -1 at the coarse level). Options.Codec picks the blob
// codec of level 0 (none, zstd or blosc, as the reference's presets); coarse levels and
// cross-level links use zstd like the reference's non-batched writes.
//
// Streaming and memory: the caller's input arrays are read in place, never
// copied wholesale. The writer keeps only indices for the layout (one
// uint32 row index per vertex, per-chunk fragment counts, per-object
// fragment references, cross-chunk records) plus, for pyramids, one
// accumulator per occupied coarse bin. Chunk blobs are built, encoded and
// put by at most Options.Concurrency goroutines, so blob memory is bounded
// by that many chunks, not by the dataset. What is not bounded: the input
// itself (it must fit in memory) and the layout indices (about 4 bytes per
// vertex).
//
// Failure semantics: input is validated before anything is written
// (*InputError); storage or codec failures are *WriteError with the key.
// Group metadata is written after every blob and the root zarr.json last,
// so a failed write never leaves a store that opens as complete.
//
// Where this writer deliberately differs from the reference: object
// selection for Sparsity > 1 uses a seeded PCG instead of numpy's RNG (same
// count, different choice); graph and mesh link indices always point at the
// rows actually written (the reference mis-indexes chunks whose objects
// interleave, zvf-format.md §5.5); Mesh.FragmentPerObject optionally gives
// each object its own fragment instead of the reference's shared
// whole-chunk fragment.
package writer
