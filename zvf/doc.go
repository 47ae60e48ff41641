// Package zvf reads ZVF (Zarr Vectors Format) stores, zv_version 0.6 and
// 0.7, as the reference implementation writes them, and answers the
// queries the server exposes: bounding boxes (streamed chunk by chunk),
// objects, manifests, groups, chunk tiles and level selection.
//
// Open reads the root and every level's metadata, lists chunk keys and
// shard indexes once; queries never re-read metadata. Decoded blobs,
// fragment indexes and manifest chunks go through an injected Cache.
//
// Byte layouts: ../shared/docs/zvf-format.md (a copy of its findings lives in
// the package comments where they matter). Leaf decoders: fragindex,
// zvf/manifest, zvf/ragged; arrays: zvf/zarr.
package zvf
