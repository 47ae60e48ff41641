// View-dependent level of detail. Each layer's bounds are cut into tiles by
// repeated halving (an axis is halved while it is at least half the
// longest); every level gets the depth at which its tiles hold about
// TILE_TARGET vertices, never smaller than a chunk. Tiles of coarser
// levels contain whole tiles of finer ones, so the tiles form one tree per
// layer from the coarsest level down to level 0, and a tile is replaced by
// its children (ZVF levels replace each other; they do not add up).
//
// select() walks those trees for a camera: the coarsest tiles in view
// first, then the children of the tile whose vertices look furthest apart
// on screen, while the vertices fit the budget shared by all layers,
// until every tile's spacing is under TARGET_PX.

import { boxVisible, prevFloat32, prevFloat64 } from './math.js';

export const TILE_TARGET = 40000; // vertices per tile (a ~0.5 MB answer)
export const TARGET_PX = 1.5; // refine while vertices are further apart on screen

// Grid is one layer's tiling. Its cells are aligned with the finest
// level's chunk grid (chunk keys count from the origin) and span a power of
// two of chunks, so halving never cuts a chunk: a tile request reads whole
// chunks only. Cells beyond the bounds are clipped away.
export class Grid {
  // lo, hi: the layer's bounds; levels: descriptor levels; chain: level
  // numbers from coarse to fine; vertexDType: how to nudge shared faces.
  constructor(lo, hi, levels, chain, vertexDType) {
    this.blo = lo; this.bhi = hi;
    this.levels = new Map(levels.map((l) => [l.level, l]));
    this.chain = chain.filter((n) => this.levels.has(n));
    this.prev = vertexDType === 'float32' ? prevFloat32 : prevFloat64;
    const fine = this.levels.get(this.chain[this.chain.length - 1]);
    const chunk = (fine && fine.chunk_shape) || [];
    this.lo = []; this.hi = [];
    for (let i = 0; i < 3; i++) {
      const c = chunk[i], e = hi[i] - lo[i];
      if (c > 0 && e > 0 && e / c < 2 ** 20) {
        const a = Math.floor(lo[i] / c) * c;
        const n = Math.max(1, Math.ceil((hi[i] - a) / c));
        this.lo.push(a); this.hi.push(a + 2 ** Math.ceil(Math.log2(n)) * c);
      } else { this.lo.push(lo[i]); this.hi.push(hi[i]); }
    }
    this.ext = [0, 1, 2].map((i) => Math.max(this.hi[i] - this.lo[i], 0));
    this.bvol = [0, 1, 2].map((i) => hi[i] - lo[i]).reduce((a, e) => a * (e > 0 ? e : 1), 1);
    // splits[d][i]: how often axis i was halved above depth d.
    this.splits = [[0, 0, 0]];
    this.depth = new Map();
    let d = 0;
    for (const n of this.chain) {
      const l = this.levels.get(n);
      const minChunk = Math.min(...(l.chunk_shape || [0]).filter((c) => c > 0), Infinity);
      for (;;) {
        if (l.vertex_count / this.tilesAt(d) <= TILE_TARGET) break;
        // Never cut below a chunk: the server reads whole chunks.
        if (!this.halve(d) || Math.max(...this.edge(d + 1)) < minChunk) break;
        d++;
      }
      this.depth.set(n, d);
    }
    // A coarse tile is drawn with its refined children masked out (a
    // 64-bit mask in the shader), so one tile has at most 64 children:
    // deepen coarse levels where the pyramid jumps further than that.
    for (let i = this.chain.length - 2; i >= 0; i--) {
      const fineD = this.depth.get(this.chain[i + 1]);
      let cd = this.depth.get(this.chain[i]);
      while (this.fanBits(cd, fineD) > 6) cd++;
      this.depth.set(this.chain[i], cd);
    }
  }

  fanBits(d0, d1) { return [0, 1, 2].reduce((a, i) => a + this.splits[d1][i] - this.splits[d0][i], 0); }

  // fan: how many children a tile of level has along each axis.
  fan(level) {
    const at = this.chain.indexOf(level);
    if (at < 0 || at + 1 >= this.chain.length) return [1, 1, 1];
    const d0 = this.depth.get(level), d1 = this.depth.get(this.chain[at + 1]);
    return [0, 1, 2].map((i) => 2 ** (this.splits[d1][i] - this.splits[d0][i]));
  }

  // halve makes the split pattern of depth d+1 (once) and says whether
  // anything is left to halve.
  halve(d) {
    if (this.splits[d + 1]) return true;
    const e = this.edge(d), longest = Math.max(...e);
    if (!(longest > 0)) return false;
    this.splits[d + 1] = this.splits[d].map((s, i) => s + (e[i] >= longest / 2 && e[i] > 0 ? 1 : 0));
    return true;
  }

  edge(d) { return this.ext.map((e, i) => e / 2 ** this.splits[d][i]); }
  counts(d) { return this.splits[d].map((s) => 2 ** s); }
  tilesAt(d) { return this.counts(d).reduce((a, b) => a * b, 1); }

  // face k of n along axis i, computed the same way by both tiles that
  // share it (halving is exact in binary floating point).
  face(i, k, n) { return k >= n ? this.hi[i] : this.lo[i] + this.ext[i] * k / n; }

  // node is the tile idx of level, clipped to the bounds (null when the
  // cell lies wholly outside them).
  node(level, idx) {
    const d = this.depth.get(level), n = this.counts(d);
    const lo = [], hi = [], shared = [], cell = [[], []];
    for (let i = 0; i < 3; i++) {
      const a = this.face(i, idx[i], n[i]), b = this.face(i, idx[i] + 1, n[i]);
      cell[0].push(a); cell[1].push(b);
      // Cells touching the bounds only in a face hold nothing the
      // neighbour across that face does not.
      const flat = !(this.bhi[i] > this.blo[i]);
      if (a > this.bhi[i] || b < this.blo[i] || (!flat && (b === this.blo[i] || (a === this.bhi[i] && idx[i] > 0)))) return null;
      lo.push(Math.max(a, this.blo[i]));
      hi.push(Math.min(b, this.bhi[i]));
      // An upper face inside the bounds is another tile's lower face.
      shared.push(b < this.bhi[i]);
    }
    const l = this.levels.get(level);
    const vol = [0, 1, 2].reduce((a, i) => a * (this.bhi[i] > this.blo[i] ? hi[i] - lo[i] : 1), 1);
    // cell: the unclipped grid cell, which the shader's child mask divides.
    // The key names the depth too: a level's depth depends on the chain.
    return { key: `${level}/${d}/${idx.join('.')}`, level, idx, lo, hi, shared, cell, est: l.vertex_count * vol / this.bvol };
  }

  roots() {
    if (!this.chain.length) return [];
    const level = this.chain[0], n = this.counts(this.depth.get(level)), out = [];
    for (let x = 0; x < n[0]; x++) for (let y = 0; y < n[1]; y++) for (let z = 0; z < n[2]; z++) {
      const t = this.node(level, [x, y, z]);
      if (t) out.push(t);
    }
    return out;
  }

  // children: the next finer level's tiles inside node.
  children(node) {
    const at = this.chain.indexOf(node.level);
    if (at < 0 || at + 1 >= this.chain.length) return [];
    const level = this.chain[at + 1], f = this.fan(node.level), out = [];
    for (let x = 0; x < f[0]; x++) for (let y = 0; y < f[1]; y++) for (let z = 0; z < f[2]; z++) {
      const t = this.node(level, [node.idx[0] * f[0] + x, node.idx[1] * f[1] + y, node.idx[2] * f[2] + z]);
      if (t) out.push(t);
    }
    return out;
  }

  // cellOf is the index of the tile of level that holds point p, by the
  // same rule as the request boxes: a point on a shared face belongs to
  // the tile above it.
  cellOf(level, p) {
    const n = this.counts(this.depth.get(level));
    return [0, 1, 2].map((i) => {
      if (!(this.ext[i] > 0)) return 0;
      let k = Math.min(n[i] - 1, Math.max(0, Math.floor((p[i] - this.lo[i]) / this.ext[i] * n[i])));
      while (k + 1 < n[i] && p[i] >= this.face(i, k + 1, n[i])) k++;
      while (k > 0 && p[i] < this.face(i, k, n[i])) k--;
      return k;
    });
  }

  // grain is the largest power of two every shared tile face of level is
  // a multiple of (Infinity when the level has none): the faces are lo +
  // ext·k/n, sums of such multiples, exact in binary floating point.
  grain(level) {
    const n = this.counts(this.depth.get(level));
    let g = Infinity;
    for (let i = 0; i < 3; i++) if (n[i] > 1) g = Math.min(g, pow2Divisor(this.lo[i]), pow2Divisor(this.ext[i] / n[i]));
    return g;
  }

  // slabs are the thin boxes across node's shared upper faces, delta deep
  // on each side, in which the edges and faces that cross into the next
  // tiles lie (a box query only joins rows it returns).
  slabs(node, delta) {
    const out = [];
    for (let i = 0; i < 3; i++) {
      if (!node.shared[i]) continue;
      const min = node.lo.map((v, j) => Math.max(this.blo[j], j === i ? node.hi[i] - delta : v - delta));
      const max = node.hi.map((v, j) => Math.min(this.bhi[j], j === i ? node.hi[i] + delta : v + delta));
      out.push({ axis: i, min, max });
    }
    return out;
  }

  // requestBox is the closed box to ask the server for: faces shared with
  // another tile move down to the previous representable value, so every
  // vertex belongs to exactly one tile of a level.
  requestBox(node) {
    return { min: node.lo, max: node.hi.map((v, i) => (node.shared[i] ? this.prev(v) : v)) };
  }
}

// pow2Divisor is the largest power of two x is a whole multiple of
// (Infinity for 0): every finite float is one.
function pow2Divisor(x) {
  if (x === 0) return Infinity;
  if (!Number.isFinite(x)) return 0;
  let e = 2 ** Math.ceil(Math.log2(Math.abs(x)));
  while (!Number.isInteger(x / e)) e /= 2;
  return e;
}

// screenSpacing estimates how far apart (in CSS pixels) a tile's vertices
// land on screen, weighted towards the centre of the view.
export function screenSpacing(view, node, count) {
  const c = [0, 1, 2].map((i) => (node.lo[i] + node.hi[i]) / 2);
  const r = Math.hypot(node.hi[0] - node.lo[0], node.hi[1] - node.lo[1], node.hi[2] - node.lo[2]) / 2;
  const d = Math.hypot(c[0] - view.eye[0], c[1] - view.eye[1], c[2] - view.eye[2]);
  const size = d <= r ? view.height * 4 : 2 * r * view.focalPx / (d - r);
  // Off-centre tiles matter less: the eye looks where the target is.
  const m = view.mvp, w = m[3] * c[0] + m[7] * c[1] + m[11] * c[2] + m[15];
  let off = 0;
  if (w > 0) off = Math.hypot((m[0] * c[0] + m[4] * c[1] + m[8] * c[2] + m[12]) / w, (m[1] * c[0] + m[5] * c[1] + m[9] * c[2] + m[13]) / w);
  return size / Math.cbrt(Math.max(count, 1)) / (1 + 0.5 * Math.min(off, 2));
}

// select returns, per layer, the root tiles in view, each with .kids: the
// children chosen to replace it where they are (a tile is drawn with its
// chosen, loaded children masked out, so a tile can be refined child by
// child). layers: [{id, grid, count(node, parent, siblings) -> known or
// estimated vertices}]; view: {mvp, planes, eye, focalPx, height}; budget:
// vertices across all layers. limited: the ids of the layers the budget
// held back (a tile in view left out, or a refinement the view wanted).
export function select(layers, view, budget) {
  const heap = [];
  const push = (e) => {
    heap.push(e);
    for (let i = heap.length - 1; i > 0;) {
      const p = (i - 1) >> 1;
      if (heap[p].pri >= heap[i].pri) break;
      [heap[p], heap[i]] = [heap[i], heap[p]]; i = p;
    }
  };
  const pop = () => {
    const top = heap[0], last = heap.pop();
    if (heap.length) {
      heap[0] = last;
      for (let i = 0; ;) {
        const a = 2 * i + 1, b = a + 1;
        let m = i;
        if (a < heap.length && heap[a].pri > heap[m].pri) m = a;
        if (b < heap.length && heap[b].pri > heap[m].pri) m = b;
        if (m === i) break;
        [heap[m], heap[i]] = [heap[i], heap[m]]; i = m;
      }
    }
    return top;
  };
  // open offers n's children in view; each would replace its share of n.
  const open = (L, n) => {
    n.kids = [];
    const all = L.grid.children(n);
    n.fanout = all.length;
    for (const k of all) {
      if (!boxVisible(view.planes, k.lo, k.hi)) continue;
      k.count = L.count(k, n, all.length);
      const share = n.count / all.length;
      // How far apart the parent's vertices look here: refine the
      // coarsest-looking places first.
      push({ L, n: k, parent: n, pri: screenSpacing(view, k, share) });
    }
  };
  let used = 0;
  const out = new Map(), roots = [], limited = new Set();
  for (const L of layers) {
    out.set(L.id, []);
    for (const n of L.grid.roots()) {
      if (!boxVisible(view.planes, n.lo, n.hi)) continue;
      n.count = L.count(n, null);
      n.pri = screenSpacing(view, n, n.count);
      roots.push({ L, n });
    }
  }
  // Roots too are within the budget (a fixed level's tiles are all roots),
  // the most prominent first; the first always, so something shows.
  roots.sort((a, b) => b.n.pri - a.n.pri);
  for (const { L, n } of roots) {
    if (used > 0 && used + n.count > budget) { limited.add(L.id); continue; }
    used += n.count;
    out.get(L.id).push(n);
  }
  for (const L of layers) for (const n of out.get(L.id)) open(L, n);
  while (heap.length) {
    const e = pop();
    if (e.pri < TARGET_PX) break;
    // A partly refined tile is drawn whole, its refined children masked
    // out in the fragment shader (every vertex still goes through the
    // GPU), so it stays charged whole until its last child replaces it.
    const cost = e.n.count - (e.parent.kids.length + 1 === e.parent.fanout ? e.parent.count : 0);
    if (used + cost > budget) { limited.add(e.L.id); continue; }
    used += cost;
    e.n.pri = e.pri; // how much it mattered: tiles load in this order
    e.parent.kids.push(e.n);
    open(e.L, e.n);
  }
  return { trees: out, vertices: used, limited };
}

// childMask: the bits of a tile's children that are drawn on their own
// (kids), over its unclipped cell, which the fragment shader (and
// masked) test a point against.
export function childMask(grid, n, kids) {
  const f = grid.fan(n.level), bits = [0, 0];
  for (const k of kids) {
    const c = [0, 1, 2].map((i) => k.idx[i] - n.idx[i] * f[i]);
    const b = (c[0] * f[1] + c[1]) * f[2] + c[2];
    bits[b >> 5] = (bits[b >> 5] | (1 << (b & 31))) >>> 0;
  }
  const lo = n.cell[0], size = [0, 1, 2].map((i) => (n.cell[1][i] - n.cell[0][i]) / f[i]);
  return { bits, lo, size, n: f };
}

// masked: point p lies in a child the mask leaves out of its tile.
export function masked(mask, p) {
  if (!mask) return false;
  const c = [0, 1, 2].map((i) => Math.min(mask.n[i] - 1, Math.max(0, Math.floor((p[i] - mask.lo[i]) / (mask.size[i] || 1e-30)))));
  const b = (c[0] * mask.n[1] + c[1]) * mask.n[2] + c[2];
  return ((mask.bits[b >> 5] >>> (b & 31)) & 1) === 1;
}
