// A layer: one store in the scene, with its descriptor, how it is shown
// (visibility, colouring, level, opacity), its tile grid and what is known
// of its tiles' counts.
import { Grid, TARGET_PX } from './lod.js';

// PRECISION_SHARE: the share of a pixel (where the level of detail draws
// a level) a quantized coordinate may be off by.
export const PRECISION_SHARE = 1 / 32;
// MAX_PRECISION_SHRINK: how much finer than wanted a line or mesh layer's
// precision may be made to fit its tile faces before it is fetched exact.
const MAX_PRECISION_SHRINK = 1024;
import { storeURL, countURL, bboxPages, PAGE_LIMIT } from './api.js';
import { probeFilter, takesSample, filterMessage } from './filter.js';
import { hopeless, retryNote } from './net.js';
import { isRGB } from './format.js';

export class Layer {
  // rgb: its colour unless o names one.
  constructor(name, rgb, o = {}) {
    this.name = name;
    this.visible = o.visible ?? true;
    this.colour = o.colour ?? ''; // '': the layer's colour; '_z': height; else a vertex attribute
    this.level = o.level ?? 'auto';
    this.alpha = o.alpha ?? 1;
    this.range = o.range ?? null; // a numeric colouring's range, once fixed (by hand, the URL or the settled view)
    this.provisional = null; // the automatic range while the view's tiles still load
    this.rgb = o.rgb ?? rgb;
    // The selection every tile asks for: a CQL2 filter, once the server
    // took it, with the levels that can take it (null: all), and a sample
    // rate (line stores only).
    this.filter = o.filter ?? '';
    this.filterText = this.filter; // what the filter box holds (a refused filter stays there)
    this.filterLevels = null;
    this.filterError = '';
    this.sample = o.sample ?? 1;
    this.desc = null; this.grid = null; this.error = ''; this.loading = true;
    this.boundsNote = ''; // the declared bounds missed vertices: what the page did (checkBounds)
    this.tileErrors = new Map();
    this.tileFailures = new Map(); // node key -> failures in a row
    this.retrying = false; // the descriptor failed and will be asked for again
    this.counts = new Map(); // node key -> vertices (known once loaded)
    this.byNode = new Map(); // node key -> the last tile loaded for it
    this.sel = null;
    this.card = null;
  }

  // ref: the store as its data URLs name it (api.js): at the version of
  // the descriptor the layer's tiles were planned on.
  get ref() { return { name: this.name, version: this.desc ? this.desc.version : undefined }; }

  lvl(n) { return this.desc.levels.find((l) => l.level === n); }
  get lo() { return this.desc.bounds[0]; }
  get hi() { return this.desc.bounds[1]; }

  // attribute: the colour-by attribute's description, with the levels
  // that hold it.
  attribute() {
    if (!this.desc || !this.colour || this.colour === '_z') return null;
    let info = null;
    const levels = [];
    for (const l of this.desc.levels) {
      const a = l.vertex_attributes.find((x) => x.name === this.colour);
      if (a) { info = info || a; levels.push(l.level); }
    }
    return info ? { info, levels } : null;
  }

  // numeric: the layer is coloured by a numeric attribute (a colour bar
  // with a range).
  numeric() {
    const a = this.attribute();
    return !!a && !a.info.categories && !isRGB(a.info);
  }

  // storedColour: the layer is coloured by a stored colour (drawn as it is).
  storedColour() {
    const a = this.attribute();
    return !!a && isRGB(a.info);
  }

  // range in use: fixed, or while the view loads, the provisional one.
  shownRange() { return this.range || this.provisional; }

  // attrAt: what tiles of level n are fetched with.
  attrAt(n) {
    const a = this.attribute();
    return a && a.levels.includes(n) ? this.colour : '';
  }

  // tileQuery: what a tile of level n asks for besides its box. Tiles
  // asked for differently are different tiles (their key says how).
  tileQuery(n) {
    return { dims: this.desc.dims, level: n, limit: PAGE_LIMIT, attributes: this.attrAt(n) || undefined, filter: this.filter || undefined, sample: this.sample, precision: this.precision(n) };
  }

  // precision: the coordinate error a tile of level n accepts (store
  // units). The level of detail draws level n where its vertices land at
  // most TARGET_PX apart on screen, so a pixel there is about spacing /
  // TARGET_PX; PRECISION_SHARE of that keeps the picture within a pixel
  // even when the view zooms on level 0 well past that point. Vertices
  // then come 8 or 16 bits a value instead of 32 (docs/viewer.md).
  //
  // It is a power of two: the server's quantization step is then 2P, its
  // cells start at multiples of 2P and a value decodes to the middle of
  // its cell, exactly (docs/binary-format.md), so no value moves across a
  // multiple of 2P. For lines and meshes 2P also divides every shared
  // tile face of the level (Grid.grain): the seams (stitch.js) then see
  // each end on the side of the face it lies on. Where the faces allow no
  // step near the target (bounds that are not round binary numbers and no
  // chunk grid), those layers are fetched exact.
  precision(n) {
    const s = this.spacing(n), want = s / TARGET_PX * PRECISION_SHARE;
    if (!(want > 0) || !Number.isFinite(want)) return undefined;
    let p = 2 ** Math.floor(Math.log2(want));
    if ((this.desc.geometry_types || []).some((g) => g !== 'point_cloud')) {
      p = Math.min(p, this.grid && this.grid.depth.has(n) ? this.grid.grain(n) / 2 : 0);
      if (!(p >= want / MAX_PRECISION_SHRINK)) return undefined;
    }
    return p;
  }

  // selKey: the selection in a key; tiles and counts of another filter or
  // sample are not these.
  selKey() { return `${this.filter}|${this.sample}`; }

  tileKey(node) {
    const q = this.tileQuery(node.level);
    return `${this.name}|${node.key}|${q.attributes || ''}|${this.selKey()}`;
  }

  countKey(node) { return `${node.key}|${this.selKey()}`; }

  count(node, parent, siblings) {
    const known = this.counts.get(this.countKey(node));
    if (known !== undefined) return known;
    if (parent) {
      const pc = this.counts.get(this.countKey(parent));
      if (pc !== undefined) {
        // A child's share of what its parent holds, scaled by how much
        // denser its level is.
        const r = this.lvl(node.level).vertex_count / Math.max(this.lvl(parent.level).vertex_count, 1);
        return pc * r / siblings;
      }
    }
    return node.est * this.sample;
  }

  // spacing: typical distance between vertices of level n (world units),
  // which sizes its points.
  spacing(n) {
    const l = this.lvl(n), e = [0, 1, 2].map((i) => this.hi[i] - this.lo[i]).filter((v) => v > 0);
    if (!l || !l.vertex_count || !e.length) return 1;
    return (e.reduce((a, b) => a * b, 1) / l.vertex_count) ** (1 / e.length);
  }

  buildGrid() {
    const levels = this.desc.levels.filter((l) => l.vertex_count > 0 && (!this.filterLevels || this.filterLevels.has(l.level)));
    const chain = this.level === 'auto' ? levels.map((l) => l.level).sort((a, b) => b - a) : [Number(this.level)];
    this.grid = new Grid(this.lo, this.hi, this.desc.levels, chain, this.desc.vertex_dtype);
  }

  // describe fetches the descriptor (measuring the bounds when it has
  // none), drops settings it does not support and makes the tile grid.
  async describe(net) {
    const d = await net.json(storeURL(this.name), { kind: 'descriptor', layer: this.name });
    d.dims = d.dims || 3;
    const pad = (c) => (c ? [0, 1, 2].map((i) => Number(c[i] ?? 0)) : null);
    d.bounds = [pad(d.bounds && d.bounds[0]), pad(d.bounds && d.bounds[1])];
    this.desc = d;
    // Bounds a store declares wrong (inverted, or beyond what float32
    // matrices hold: the picture went NaN and the page hung on its ticks)
    // are measured like absent ones.
    const measure = !usableBounds(d.bounds);
    const chunks = chunkBox(d);
    const ref = { name: this.name, version: d.version };
    if (measure) d.bounds = await measureBounds(net, ref, d, chunks);
    if (this.level !== 'auto' && !d.levels.some((x) => String(x.level) === String(this.level))) this.level = 'auto';
    if (this.colour && this.colour !== '_z' && !this.attribute()) this.colour = '';
    if (!takesSample(d)) this.sample = 1;
    // A filter from the URL is asked about before any tile: a refused one
    // is shown, not applied. The declared bounds are checked meanwhile.
    const [p, note] = await Promise.all([
      // A check the storage refused is shown as the filter's error (the
      // layer draws without it); one to make later fails the descriptor.
      this.filter ? probeFilter(net, this, this.filter).catch((e) => {
        if (!hopeless(e)) throw e;
        return { error: `${e.message}${retryNote(e, null)}` };
      }) : null,
      // The check is worth a retry, not the layer: storage that refuses
      // it (hopeless) leaves the declared bounds.
      measure ? '' : checkBounds(net, ref, d, chunks).catch((e) => {
        if (!hopeless(e)) throw e;
        return '';
      }),
    ]);
    if (p && !p.error) this.filterLevels = p.levels;
    else if (p) { this.filterError = filterMessage(p.error); this.filter = ''; }
    this.boundsNote = note;
    this.buildGrid();
  }
}

// boundsCheck.max: the largest coarsest level whose vertices the bounds
// check counts or measures (a count reads every chunk its box touches: on
// a store of one huge level that is much of the store). An object so the
// browser tests can lower it.
export const boundsCheck = { max: 4000000 };

// checkBounds: tiles are cut from the bounds, so vertices outside them
// (hand-written metadata) are never asked for, and a store whose data
// lies wholly outside drew a blank without a word; bounds far larger than
// the data framed a dot. chunks (the box the levels' chunks occupy, which
// holds every vertex) settles most stores without a read: declared
// bounds holding it become it. Else the coarsest level is counted in the
// part of chunks outside the declared bounds (the chunks along their
// faces, not all); when that finds vertices, the bounds become the
// measured ones (with the declared ones when they hold any) and the note
// says so, else they are cut to chunks. '' when nothing was missed, or
// the level is too large to check: then chunks stands for the bounds.
async function checkBounds(net, ref, d, chunks) {
  const name = ref.name;
  const c = coarsest(d);
  if (!c) return '';
  const [lo, hi] = d.bounds;
  if (chunks && contains(d.bounds, chunks)) {
    d.bounds = chunks;
    return '';
  }
  if (c.vertex_count > boundsCheck.max) {
    if (chunks) d.bounds = chunks;
    return '';
  }
  const count = async (min, max) => (await net.json(countURL(ref, { min, max, dims: d.dims, level: c.level }), { kind: 'bounds', layer: name, level: c.level })).count;
  let inside;
  if (chunks) {
    const outside = await Promise.all(shell(d.bounds, chunks).map(([min, max]) => count(min, max)));
    inside = c.vertex_count - outside.reduce((a, b) => a + b, 0);
  } else {
    inside = await count(lo, hi);
  }
  if (!(inside < c.vertex_count)) {
    const cut = chunks && [lo.map((v, i) => Math.max(v, chunks[0][i])), hi.map((v, i) => Math.min(v, chunks[1][i]))];
    if (cut && usableBounds(cut)) d.bounds = cut;
    return '';
  }
  inside = Math.max(inside, 0);
  const m = await measureBounds(net, ref, d, null);
  const p = (v) => v.slice(0, Math.min(d.dims, 3)).map((x) => +x.toPrecision(6)).join(',');
  const declared = `${p(lo)} – ${p(hi)}`;
  d.bounds = inside ? [m[0].map((v, i) => Math.min(v, lo[i])), m[1].map((v, i) => Math.max(v, hi[i]))] : m;
  return `${inside.toLocaleString()} of level ${c.level}'s ${c.vertex_count.toLocaleString()} vertices lie within the store's declared bounds ${declared}; drawn within ${p(d.bounds[0])} – ${p(d.bounds[1])}, measured`;
}

// chunkBox: the box every level's chunks occupy (the union of the levels'
// chunk_bounds, in x, y, z), or null when a level holding vertices does
// not say (a server from before chunk_bounds).
function chunkBox(d) {
  const ls = d.levels.filter((x) => x.vertex_count > 0);
  if (!ls.length || !ls.every((x) => Array.isArray(x.chunk_bounds) && x.chunk_bounds.length === 2)) return null;
  const lo = [Infinity, Infinity, Infinity], hi = [-Infinity, -Infinity, -Infinity];
  for (const x of ls) {
    for (let i = 0; i < 3; i++) {
      lo[i] = Math.min(lo[i], Number(x.chunk_bounds[0][i] ?? 0));
      hi[i] = Math.max(hi[i], Number(x.chunk_bounds[1][i] ?? 0));
    }
  }
  return usableBounds([lo, hi]) ? [lo, hi] : null;
}

// contains: box a holds box b.
const contains = ([alo, ahi], [blo, bhi]) => [0, 1, 2].every((i) => alo[i] <= blo[i] && bhi[i] <= ahi[i]);

// shell: disjoint boxes covering the part of chunks outside the bounds b
// (boxes are closed: each stops a float64 short of b's faces), two an
// axis at most: on axis i, below and above b, within b on the axes
// before i and within chunks on those after.
function shell(b, chunks) {
  const out = [];
  for (let i = 0; i < 3; i++) {
    const box = (from, to) => {
      const min = [0, 1, 2].map((j) => (j < i ? b[0][j] : chunks[0][j]));
      const max = [0, 1, 2].map((j) => (j < i ? b[1][j] : chunks[1][j]));
      min[i] = from; max[i] = to;
      out.push([min, max]);
    };
    if (chunks[0][i] < b[0][i]) box(chunks[0][i], nextAfter(b[0][i], -Infinity));
    if (chunks[1][i] > b[1][i]) box(nextAfter(b[1][i], Infinity), chunks[1][i]);
  }
  return out;
}

// nextAfter: the float64 next to x towards to (x finite).
function nextAfter(x, to) {
  if (x === to) return x;
  if (x === 0) return to > 0 ? Number.MIN_VALUE : -Number.MIN_VALUE;
  const f = new Float64Array([x]), n = new BigInt64Array(f.buffer);
  n[0] += (to > x) === (x > 0) ? 1n : -1n;
  return f[0];
}

// coarsest: the coarsest level that holds vertices, or undefined.
function coarsest(d) {
  return d.levels.filter((x) => x.vertex_count > 0).reduce((a, b) => (!a || b.level > a.level ? b : a), undefined);
}

// MAX_COORD: the largest coordinate the page draws (float32 holds up to
// 3.4e38, and the camera's matrices need room beyond the scene).
const MAX_COORD = 1e30;

// usableBounds: bounds of finite numbers, each min at most its max, all
// within ±MAX_COORD.
function usableBounds([lo, hi]) {
  const ok = (v) => Number.isFinite(v) && Math.abs(v) <= MAX_COORD;
  return !!lo && !!hi && [0, 1, 2].every((i) => ok(lo[i]) && ok(hi[i]) && lo[i] <= hi[i]);
}

// measureBounds: a store that declares no bounds is measured from its
// coarsest level, every page of it, widened by one of that level's bins;
// a level too large to read whole takes chunks (the box its chunks
// occupy) when the server gives it.
async function measureBounds(net, ref, d, chunks) {
  const name = ref.name;
  const c = coarsest(d);
  if (!c) throw new Error('the store holds no vertices');
  if (chunks && c.vertex_count > boundsCheck.max) return chunks;
  const far = (v) => Array(d.dims).fill(v);
  const lo = [Infinity, Infinity, Infinity], hi = [-Infinity, -Infinity, -Infinity];
  let rows = 0;
  const q = { min: far(-1e300), max: far(1e300), dims: d.dims, level: c.level, limit: PAGE_LIMIT, connectivity: false };
  for await (const page of bboxPages(net, ref, q, { kind: 'bounds', layer: name })) {
    rows += page.rows;
    for (const b of page.batches) {
      const v = b.vertices;
      for (let i = 0; i < v.length; i++) {
        const k = i % d.dims, x = Number(v[i]);
        if (k > 2) continue; // the scene is 3-D
        if (x < lo[k]) lo[k] = x;
        if (x > hi[k]) hi[k] = x;
      }
    }
  }
  if (!rows) throw new Error(`level ${c.level} holds no vertices`);
  for (let k = d.dims; k < 3; k++) { lo[k] = 0; hi[k] = 0; }
  const bin = c.bin_shape || [0, 0, 0];
  return [lo.map((v, i) => v - (bin[i] || 0)), hi.map((v, i) => v + (bin[i] || 0))];
}

