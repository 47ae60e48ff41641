// The density overview: when the vertex budget holds a layer back (the
// view wants tiles or detail it cannot afford), the server's density of
// the layer's box in view (GET …/density, OVERVIEW_SHAPE cells, at the
// finest level the layer draws, with its filter and sample) is drawn
// beneath the budget-limited drawing: each non-empty cell a translucent
// disc at its centre, coloured by its count (log scale). The layer's card
// says it is an overview and why.
import { boxVisible } from './math.js';
import { densityURL } from './api.js';
import { retryDelay, retryNote, hopeless } from './net.js';

export const OVERVIEW_SHAPE = [32, 32, 32];
const ALPHA = 0.35;
const FAILED_RETRY_MS = 60000; // an overview that failed for good is asked for again after this
const TIMER_SLACK_MS = 20;

export class DensityOverview {
  // app: {net, renderer, layers, budget, redraw()}
  constructor(app) {
    this.app = app;
    this.byLayer = new Map(); // layer -> {key, state, shown, q, cells, total, max, arrays, g, error}
    this.pending = 0;
  }

  get busy() { return this.pending > 0; }

  // update follows a tile selection: layers (visible, with a grid),
  // limited (the names of those the budget held back), view: the camera's.
  update(layers, limited, view) {
    for (const [l, o] of this.byLayer) {
      o.shown = false;
      if (!this.app.layers.includes(l)) this.forget(l);
    }
    for (const l of layers) {
      if (!limited.has(l.name) || l.desc.dims > 3) continue;
      const box = viewBox(l, view);
      if (!box) continue;
      const level = l.grid.chain[l.grid.chain.length - 1];
      const q = { min: box[0], max: box[1], dims: l.desc.dims, level, filter: l.filter || undefined, sample: l.sample };
      const shape = OVERVIEW_SHAPE.slice(0, Math.min(3, l.desc.dims));
      const url = densityURL(l.ref, q, shape);
      const o = this.byLayer.get(l);
      // A failed one is asked for again once its wait is over.
      if (o && o.key === url && !(o.state === 'failed' && performance.now() >= o.retryAt)) { o.shown = true; continue; }
      this.load(l, url, q, shape);
    }
  }

  async load(l, url, q, shape) {
    const prev = this.byLayer.get(l);
    if (prev) { if (prev.ctrl) prev.ctrl.abort(); this.free(prev); }
    const failures = prev && prev.key === url ? prev.failures || 0 : 0;
    const o = { key: url, state: 'loading', shown: true, q, shape, ctrl: new AbortController(), failures };
    this.byLayer.set(l, o);
    this.pending++;
    try {
      const d = await this.app.net.json(url, { kind: 'density', layer: l.name, level: q.level, box: [q.min, q.max] }, o.ctrl.signal);
      if (this.byLayer.get(l) !== o) return;
      Object.assign(o, cells(d, q), { state: 'ready' });
    } catch (e) {
      if (this.byLayer.get(l) !== o) return;
      if (e.name === 'AbortError') { o.state = 'aborted'; return; }
      o.failures++;
      const wait = hopeless(e) ? null : retryDelay(e, o.failures) ?? FAILED_RETRY_MS;
      Object.assign(o, { state: 'failed', error: `${e.message}${retryNote(e, wait)}`, retryAt: wait === null ? Infinity : performance.now() + wait });
      if (wait !== null) setTimeout(() => this.app.scheduleUpdate(), wait + TIMER_SLACK_MS); // a timer may fire a little early
    } finally {
      o.ctrl = null;
      this.pending--;
      this.app.redraw();
    }
  }

  forget(l) {
    const o = this.byLayer.get(l);
    if (!o) return;
    if (o.ctrl) o.ctrl.abort();
    this.free(o);
    this.byLayer.delete(l);
  }

  free(o) {
    if (o.g) this.app.renderer.free(o.g);
    o.g = null;
  }

  // items: the overviews to draw (only: one layer's), uploaded when first
  // drawn.
  items(only) {
    const out = [];
    for (const [l, o] of this.byLayer) {
      if (!o.shown || o.state !== 'ready' || !l.visible || (only && l !== only) || !o.cells) continue;
      if (!o.g) { o.g = this.app.renderer.upload(o.arrays); o.arrays = null; }
      out.push({ g: o.g, mask: null, style: { mode: 1, range: [0, Math.log2(1 + o.max)], zr: [0, 1], color: l.rgb, alpha: ALPHA, sel: null, ptWorld: o.edge, ptScale: 1 } });
    }
    return out;
  }

  // note: the card's line about the layer's overview, or ''.
  note(l) {
    const o = this.byLayer.get(l);
    if (!o || !o.shown) return '';
    const what = `${o.shape.join('×')} density overview of level ${o.q.level}`;
    if (o.state === 'loading') return `${what}: loading (the budget holds this layer back)`;
    if (o.state === 'failed') return `${what} failed: ${o.error}`;
    if (o.state !== 'ready') return '';
    return `${what}: ${o.cells.toLocaleString()} cells, ${o.total.toLocaleString()} vertices in view, more than the budget of ${this.app.budget.toLocaleString()} lets it draw`;
  }

  // info: what the overviews show, for the tests and the console.
  info() {
    const out = {};
    for (const [l, o] of this.byLayer) {
      if (o.shown && o.state === 'ready') out[l.name] = { url: o.key, level: o.q.level, min: o.q.min, max: o.q.max, shape: o.shape, cells: o.cells, total: o.total };
    }
    return out;
  }
}

// viewBox: the box of the layer's coarsest tiles in view (its bounds, as
// far as the camera sees them), or null.
function viewBox(l, view) {
  let lo = null, hi = null;
  for (const n of l.grid.roots()) {
    if (!boxVisible(view.planes, n.lo, n.hi)) continue;
    lo = lo ? lo.map((v, i) => Math.min(v, n.lo[i])) : [...n.lo];
    hi = hi ? hi.map((v, i) => Math.max(v, n.hi[i])) : [...n.hi];
  }
  return lo ? [lo, hi] : null;
}

// cells turns a density answer into points at the centres of its
// non-empty cells (by the server's rule, cell i spans min + i·w to
// min + (i+1)·w), with log2(1 + count) as their value.
function cells(d, q) {
  const shape = d.shape, n = [shape[0] || 1, shape[1] || 1, shape[2] || 1];
  const w = [0, 1, 2].map((i) => (i < shape.length ? (q.max[i] - q.min[i]) / n[i] : 0));
  let count = 0, total = 0, max = 0;
  for (const c of d.counts) if (c > 0) { count++; total += c; if (c > max) max = c; }
  const pos = new Float32Array(3 * count), val = new Float32Array(count);
  let k = 0;
  for (let z = 0, i = 0; z < n[2]; z++) for (let y = 0; y < n[1]; y++) for (let x = 0; x < n[0]; x++, i++) {
    const c = d.counts[i];
    if (!(c > 0)) continue;
    pos[3 * k] = q.min[0] + (x + 0.5) * w[0];
    pos[3 * k + 1] = shape.length > 1 ? q.min[1] + (y + 0.5) * w[1] : 0;
    pos[3 * k + 2] = shape.length > 2 ? q.min[2] + (z + 0.5) * w[2] : 0;
    val[k++] = Math.log2(1 + c);
  }
  return { cells: count, total, max, edge: Math.max(...w), arrays: { pos, val, ids: null, edges: null, tris: null } };
}
