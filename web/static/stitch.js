// Seams between tiles of lines and meshes. A box query joins only the
// rows it returns, so each tile alone would leave a gap at every face it
// shares with the next tile of its level.
import { flatten, decode, coordOf, gather, merge } from './format.js';
import { bboxPages } from './api.js';

const cmp = (a, b) => a[0] - b[0] || a[1] - b[1] || a[2] - b[2];

// stitch adds to tile t (node n of layer l, flattened as f, its positions
// one part) the edges and faces that cross its shared upper faces into
// other tiles of its level. They come from thin slabs across those faces;
// an edge (or face) is added by the first (in index order) of the tiles
// its ends lie in, for the first axis they differ on, so every crossing is
// drawn once. Where its ends lie is decided on their coordinates as sent:
// quantized ones too, since a quantized layer's precision puts every
// shared face on the quantization grid (Layer.precision), where no value
// is moved across a face. The tile's own rows stay first; f.rows still
// counts only them.
export async function stitch(net, l, n, t, f) {
  // The slabs are as deep as the tile's own edges and faces are long (with
  // half again to spare): crossings are of the same kind.
  let reach = 0;
  const at = coordOf(f.parts[0]);
  const span = (idx) => {
    for (let k = 0; k < 3; k++) {
      let lo = Infinity, hi = -Infinity;
      for (const i of idx) { const v = at(i, k); lo = Math.min(lo, v); hi = Math.max(hi, v); }
      reach = Math.max(reach, hi - lo);
    }
  };
  if (f.edges) for (let e = 0; e < f.edges.length; e += 2) span([f.edges[e], f.edges[e + 1]]);
  if (f.faces) for (let e = 0; e < f.faces.length; e += f.faceWidth) span(Array.from(f.faces.subarray(e, e + f.faceWidth)));
  const delta = Math.max(reach * 1.5, 1e-6);
  const extra = { parts: [], rows: 0, val: [], ids: [], edges: [], faces: [] };
  let width = f.faceWidth;
  const query = l.tileQuery(n.level);
  for (const slab of l.grid.slabs(n, delta)) {
    const meta = { kind: 'seam', layer: l.name, level: n.level, box: [slab.min, slab.max] };
    const pages = [];
    for await (const page of bboxPages(net, l.ref, { ...query, min: slab.min, max: slab.max }, meta, t.ctrl.signal)) pages.push(page);
    const s = flatten(pages, t.attr);
    // float64: exactly the values the format defines.
    const pos = decode(s.parts, Float64Array);
    const cell = (i) => l.grid.cellOf(n.level, [pos[3 * i], pos[3 * i + 1], pos[3 * i + 2]]);
    const rows = [];
    const take = (idx, w, into) => {
      const cs = idx.map(cell);
      let lo = cs[0], hi = cs[0];
      for (const c of cs) { if (cmp(c, lo) < 0) lo = c; if (cmp(c, hi) > 0) hi = c; }
      const axis = [0, 1, 2].find((k) => lo[k] !== hi[k]);
      if (axis !== slab.axis || cmp(lo, n.idx) !== 0) return;
      for (const i of idx) {
        into.push(f.rows + extra.rows + rows.length);
        rows.push(i);
        extra.val.push(s.val ? s.val[i] : NaN);
        extra.ids.push(s.ids ? s.ids[i] : -1n);
      }
      width = w;
    };
    if (s.edges) for (let e = 0; e < s.edges.length; e += 2) take([s.edges[e], s.edges[e + 1]], 2, extra.edges);
    if (s.faces) for (let e = 0; e < s.faces.length; e += s.faceWidth) take(Array.from(s.faces.subarray(e, e + s.faceWidth)), s.faceWidth, extra.faces);
    if (rows.length) { extra.parts.push(gather(s.parts, rows, f.rows + extra.rows)); extra.rows += rows.length; }
  }
  if (!extra.rows) return f;
  const join = (a, b, T) => { const o = new T(a.length + b.length); o.set(a); o.set(b, a.length); return o; };
  return {
    rows: f.rows, faceWidth: width,
    parts: [merge([...f.parts, ...extra.parts])],
    val: f.val ? join(f.val, extra.val, Float32Array) : null,
    ids: f.ids ? join(f.ids, extra.ids, BigInt64Array) : null,
    edges: f.edges || extra.edges.length ? join(f.edges || [], extra.edges, Uint32Array) : null,
    faces: f.faces || extra.faces.length ? join(f.faces || [], extra.faces, Uint32Array) : null,
  };
}
