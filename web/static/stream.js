// Streaming by view: which tiles the camera wants (lod.js's select), what
// of them to draw while the rest load, the request queue (coarsest first,
// MAX_INFLIGHT at a time), cancelling what the view no longer needs, and
// loading a tile (its pages, then its seams).
import { select, childMask } from './lod.js';
import { flatten, merge, Coords } from './format.js';
import { triangles } from './gl.js';
import { bboxPages } from './api.js';
import { stitch } from './stitch.js';
import { retryDelay, retryNote, hopeless } from './net.js';

const MAX_INFLIGHT = 4;
const UPDATE_MS = 120; // at most one tile selection this often while the view moves
const FAILED_RETRY_MS = 60000; // a tile that failed for good is asked again after this
const TIMER_SLACK_MS = 20;

export class Streamer {
  // app: {layers, budget, tiles, net, view, hooks, density, redraw(), onTiles(layers), onTileError(l)}
  constructor(app) {
    this.app = app;
    this.queue = [];
    this.inflight = 0;
    this.drawList = []; // {t: tile, l: layer, mask}
    this.inTree = new Set();
    this.timer = 0;
    this.last = 0;
  }

  // busy: a selection is due or tiles are still to load.
  get busy() { return !!this.timer || this.queue.length > 0 || this.inflight > 0; }

  // queued: tiles of layer l waiting for their turn or in flight.
  queued(l) { return this.queue.some((w) => w.l === l) || this.app.tiles.loading(l) > 0; }

  // schedule: at most one tile selection every UPDATE_MS while the view
  // moves, and one right after it stops.
  schedule() {
    this.app.hooks.settled = false;
    if (this.timer) return;
    const wait = Math.max(0, UPDATE_MS - (performance.now() - this.last));
    this.timer = setTimeout(() => { this.timer = 0; this.update(); }, wait);
  }

  update() {
    const app = this.app, tiles = app.tiles;
    this.last = performance.now();
    // Failed tiles whose wait is over are asked for again.
    for (const l of tiles.expireFailed(this.last)) app.onTileError(l);
    const v = app.view.info();
    const layers = app.layers.filter((l) => l.visible && l.grid);
    const sel = select(layers.map((l) => ({ id: l.name, grid: l.grid, count: (n, p, k) => l.count(n, p, k) })), v, app.budget);
    const draw = [], want = [];
    this.inTree = new Set();
    for (const l of layers) for (const r of sel.trees.get(l.name)) this.walk(l, r, 0, true, draw, want);
    const wanted = new Set(want.map((w) => w.key));
    // Requests for tiles the view no longer needs are cancelled.
    for (const [k, t] of tiles.map) if (t.state === 'loading' && !wanted.has(k)) t.ctrl.abort();
    this.queue = want.filter((w) => !tiles.map.has(w.key)).sort((a, b) => a.depth - b.depth || b.pri - a.pri);
    this.drawList = draw;
    app.density.update(layers, sel.limited, v);
    this.pump();
    app.onTiles(layers);
    tiles.evict(this.inTree, this.drawList, app.budget);
    app.redraw();
  }

  // walk collects what to draw under node n and what to load: a loaded
  // tile is drawn with its loaded children masked out; a tile not loaded
  // yet leaves its place to whatever its children have.
  walk(l, n, depth, drawIt, draw, want) {
    const tiles = this.app.tiles;
    const key = l.tileKey(n), t = tiles.map.get(key), shown = tiles.shown(l, n);
    this.inTree.add(key);
    if (!t || t.state === 'loading') want.push({ l, n, key, depth, pri: n.pri });
    const covered = [];
    for (const k of n.kids || []) {
      const kt = tiles.get(l, k);
      const kc = !!tiles.shown(l, k) || (kt && kt.state === 'failed');
      if (kc) covered.push(k);
      this.walk(l, k, depth + 1, drawIt && (kc || !shown), draw, want);
    }
    if (shown && drawIt) {
      const all = l.grid.children(n).length;
      if (!(all > 0 && covered.length === all)) draw.push({ t: shown, l, mask: covered.length ? childMask(l.grid, n, covered) : null });
    }
  }

  pump() {
    while (this.inflight < MAX_INFLIGHT && this.queue.length) {
      const w = this.queue.shift();
      if (!this.app.tiles.map.has(w.key)) this.load(w.l, w.n, w.key);
    }
    this.app.hooks.pending = this.queue.length + this.inflight;
  }

  // load fetches a tile: its pages up to the budget, then (lines and
  // meshes) its seams; a failure is the layer's error until retried.
  async load(l, n, key) {
    const app = this.app, tiles = app.tiles.map;
    const query = l.tileQuery(n.level), countKey = l.countKey(n);
    const t = { key, layer: l, node: n, level: n.level, attr: query.attributes || '', state: 'loading', ctrl: new AbortController(), count: 0, used: performance.now() };
    tiles.set(key, t);
    this.inflight++;
    const { min, max } = l.grid.requestBox(n);
    try {
      const pages = [];
      let rows = 0, partial = false;
      for await (const page of bboxPages(app.net, l.ref, { ...query, min, max }, { kind: 'tile', layer: l.name, level: n.level, box: [min, max] }, t.ctrl.signal)) {
        pages.push(page);
        rows += page.rows;
        // More than the whole budget is never drawn.
        if (rows >= app.budget && page.trailer.next) { partial = true; break; }
      }
      if (tiles.get(key) !== t) return;
      let f = flatten(pages, t.attr);
      // Edges and faces index across batches: one part for them (its
      // quantized integers in one frame), then the seams.
      if (f.edges || f.faces) f = await stitch(app.net, l, n, t, { ...f, parts: [merge(f.parts)] });
      if (tiles.get(key) !== t) return;
      const tris = f.faces && f.faceWidth >= 3 ? triangles(f.faces, f.faceWidth) : null;
      // Uploaded when first drawn (the GL context may not exist yet); the
      // positions stay as they came, decoded on the CPU only when asked
      // for (t.coords.pos: picking).
      Object.assign(t, { count: f.rows, edges: f.edges ? f.edges.length / 2 : 0, faces: f.faces ? f.faces.length / f.faceWidth : 0, coords: new Coords(f.parts), val: f.val, ids: f.ids, partial, state: 'ready', arrays: { parts: f.parts, val: f.val, ids: f.ids, edges: f.edges, tris } });
      l.counts.set(countKey, f.rows);
      l.byNode.set(n.key, t);
      if (app.hooks.firstTileMs === null) app.hooks.firstTileMs = performance.now();
      l.tileFailures.delete(n.key);
      if (l.tileErrors.delete(n.key)) app.onTileError(l);
    } catch (e) {
      // A tile of a version no longer served is asked for again under
      // the new one once the layer's descriptor is read again (net.js
      // onStoreChanged): no error meanwhile.
      if (e.name === 'AbortError' || e.kind === 'store-changed') {
        if (tiles.get(key) === t) tiles.delete(key);
      } else if (tiles.get(key) === t) {
        // Asked again when the server says (later after each failure in
        // a row), or, for an answer that says the tile cannot be read
        // (a corrupt chunk), after a minute; never when asking again
        // cannot help (storage that refuses the server: hopeless).
        const failures = (l.tileFailures.get(n.key) || 0) + 1;
        l.tileFailures.set(n.key, failures);
        const wait = hopeless(e) ? null : retryDelay(e, failures) ?? FAILED_RETRY_MS;
        t.state = 'failed';
        t.error = e.message;
        t.retryAt = wait === null ? Infinity : performance.now() + wait;
        if (wait !== null) setTimeout(() => this.schedule(), wait + TIMER_SLACK_MS); // a timer may fire a little early
        const p = (v) => v.map((x) => +x.toPrecision(6)).join(',');
        l.tileErrors.set(n.key, `level ${n.level} box ${p(min)} – ${p(max)}: ${e.message}${retryNote(e, wait)}`);
        app.onTileError(l);
      }
    } finally {
      this.inflight--;
      this.schedule();
    }
  }
}
