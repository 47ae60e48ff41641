// Package zarr reads (and, for the project's own writer and tests, writes)
// Zarr v3 arrays: zarr.json metadata, the regular chunk grid, chunk key
// encodings, fill values, and the codec pipeline (array→array,
// array→bytes, bytes→bytes). ZVF stores keep every blob in a 1-D uint8
// array of one chunk, so ReadBytes is the hot path and avoids all
// per-element work.
package zarr
