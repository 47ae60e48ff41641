// zvfserve viewer: several stores as layers in one scene, streamed by view
// (the tiles the camera sees, at the level whose density fits the screen,
// coarse first, within a vertex budget shared by the layers), with
// picking, object lookup, box queries, and the page state in the URL.
import { Camera, frustum, project, ray, norm, fmtNum } from './math.js';
import { Grid, select } from './lod.js';
import { Renderer, PALETTE, triangles } from './gl.js';
import { flatten } from './format.js';
import { Net } from './net.js';
import { Overlay, unitLabel } from './overlay.js';

const $ = (id) => document.getElementById(id);
const el = (tag, props = {}, ...kids) => {
  const e = Object.assign(document.createElement(tag), props);
  e.append(...kids);
  return e;
};
const enc = encodeURIComponent;

const LAYER_COLORS = [[0.98, 0.62, 0.25], [0.35, 0.80, 0.95], [0.95, 0.86, 0.30], [0.86, 0.58, 0.78], [0.55, 0.90, 0.50], [0.70, 0.72, 1.00]];
const HIGHLIGHT = [1, 0.3, 0.88];
const HITS = [1, 1, 1];
const MAX_INFLIGHT = 4;
const TILE_LIMIT = 1000000; // per page; the server clamps to its --max-vertices and pages
const DEFAULT_BUDGET = 1000000;
const MAX_DEFAULT_LAYERS = 8;

// hooks: what the browser tests (and a curious user in the console) read.
const hooks = {
  ready: false, firstPictureMs: null, firstDataMs: null, firstTileMs: null, settled: false, pending: 0,
  drawn: {}, drawnLevels: {}, drawnEdges: {}, frames: 0,
};
window.__zvf = hooks;

const statusEl = $('status');
let statusError = '';
function setStatus(msg, isErr) {
  statusError = isErr ? msg : '';
  statusEl.textContent = msg;
  statusEl.className = isErr ? 'error' : '';
}

const net = new Net(() => setStatus('waiting for the access token…'));
hooks.requests = net.log;
const cam = new Camera();
let renderer, overlay, gpuReady;
const gpu = new Promise((resolve) => { gpuReady = resolve; }); // resolves once the shaders are linked

const S = {
  layers: [], catalog: null, budget: DEFAULT_BUDGET, size: 1,
  box: null, boxHits: [], find: null, findItem: null, findSeq: 0, pick: null, pickSeq: 0,
  drawing: false, rubber: null, camFromURL: null, fitted: false,
};
const tiles = new Map(); // tile key -> tile
let inflight = 0, queue = [], drawList = [], inTree = new Set();

// ---- layers ----

class Layer {
  constructor(name, i, o = {}) {
    this.name = name;
    this.visible = o.visible ?? true;
    this.colour = o.colour ?? ''; // '': the layer's colour; '_z': height; else a vertex attribute
    this.level = o.level ?? 'auto';
    this.alpha = o.alpha ?? 1;
    this.range = o.range ?? null;
    this.defaultRgb = LAYER_COLORS[i % LAYER_COLORS.length];
    this.rgb = o.rgb ?? this.defaultRgb;
    this.desc = null; this.grid = null; this.error = ''; this.loading = true;
    this.tileErrors = new Map();
    this.counts = new Map(); // node key -> vertices (known once loaded)
    this.byNode = new Map(); // node key -> the last tile loaded for it
    this.sel = null;
    this.card = null;
  }

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

  // attrAt: what tiles of level n are fetched with.
  attrAt(n) {
    const a = this.attribute();
    return a && a.levels.includes(n) ? this.colour : '';
  }

  tileKey(node) { return `${this.name}|${node.key}|${this.attrAt(node.level)}`; }
  tile(node) { return tiles.get(this.tileKey(node)); }

  // shown: the tile to draw for node: the one coloured as asked, or while
  // that loads, the same vertices fetched for another colouring (drawn
  // grey, as the legend says).
  shown(node) {
    const t = this.tile(node);
    if (t && t.state === 'ready') return t;
    const alt = this.byNode.get(node.key);
    return alt && alt.state === 'ready' && tiles.get(alt.key) === alt ? alt : null;
  }

  count(node, parent, siblings) {
    const known = this.counts.get(node.key);
    if (known !== undefined) return known;
    if (parent) {
      const pc = this.counts.get(parent.key);
      if (pc !== undefined) {
        // A child's share of what its parent holds, scaled by how much
        // denser its level is.
        const r = this.lvl(node.level).vertex_count / Math.max(this.lvl(parent.level).vertex_count, 1);
        return pc * r / siblings;
      }
    }
    return node.est;
  }

  // spacing: typical distance between vertices of level n (world units),
  // which sizes its points.
  spacing(n) {
    const l = this.lvl(n), e = [0, 1, 2].map((i) => this.hi[i] - this.lo[i]).filter((v) => v > 0);
    if (!l || !l.vertex_count || !e.length) return 1;
    return (e.reduce((a, b) => a * b, 1) / l.vertex_count) ** (1 / e.length);
  }

  buildGrid() {
    const levels = this.desc.levels.filter((l) => l.vertex_count > 0);
    const chain = this.level === 'auto' ? levels.map((l) => l.level).sort((a, b) => b - a) : [Number(this.level)];
    this.grid = new Grid(this.lo, this.hi, this.desc.levels, chain, this.desc.vertex_dtype);
  }
}

function layerByName(name) { return S.layers.find((l) => l.name === name); }

function addLayer(name, o) {
  if (layerByName(name)) return null;
  const l = new Layer(name, S.layers.length, o);
  S.layers.push(l);
  buildCard(l);
  refreshObjectLayers();
  l.described = describe(l);
  return l;
}

function removeLayer(l) {
  for (const [k, t] of tiles) if (t.layer === l) dropTile(k, t);
  S.layers = S.layers.filter((x) => x !== l);
  l.card.remove();
  S.boxHits = S.boxHits.filter((h) => { if (h.layer === l) renderer.free(h.g); return h.layer !== l; });
  if (S.find && S.find.store === l.name) clearFind();
  if (S.pick && S.pick.store === l.name) clearPick();
  refreshObjectLayers();
  refreshAddList();
  writeURL();
  scheduleUpdate();
}

// describe fetches the layer's descriptor and makes its tile grid.
async function describe(l) {
  try {
    const d = await net.json(`api/v1/stores/${enc(l.name)}`, { kind: 'descriptor', layer: l.name });
    d.dims = d.dims || 3;
    const pad = (c) => (c ? [0, 1, 2].map((i) => Number(c[i] ?? 0)) : null);
    d.bounds = [pad(d.bounds && d.bounds[0]), pad(d.bounds && d.bounds[1])];
    l.desc = d;
    if (!d.bounds[0] || !d.bounds[1]) await findBounds(l);
    if (l.level !== 'auto' && !d.levels.some((x) => String(x.level) === String(l.level))) l.level = 'auto';
    if (l.colour && l.colour !== '_z' && !l.attribute()) l.colour = '';
    l.buildGrid();
  } catch (e) {
    l.error = `${l.name}: ${e.message}`;
    l.desc = null;
    l.grid = null;
  }
  l.loading = false;
  fillCard(l);
  refreshObjectLayers();
  if (!S.fitted && S.layers.every((x) => !x.loading)) {
    S.fitted = true;
    if (S.camFromURL) applyCam(S.camFromURL); else fit();
  }
  scheduleUpdate();
}

// findBounds: a store that declares no bounds is measured from its
// coarsest level, widened by one of that level's bins.
async function findBounds(l) {
  const levels = l.desc.levels.filter((x) => x.vertex_count > 0);
  if (!levels.length) throw new Error('the store holds no vertices');
  const c = levels[levels.length - 1];
  const far = (v) => Array(l.desc.dims).fill(v).join(',');
  const res = await net.binary(`api/v1/stores/${enc(l.name)}/bbox?min=${far('-1e300')}&max=${far('1e300')}&level=${c.level}&limit=100000&connectivity=false`, { kind: 'bounds', layer: l.name });
  const f = flatten([res], '');
  if (!f.rows) throw new Error(`level ${c.level} holds no vertices`);
  const lo = [Infinity, Infinity, Infinity], hi = [-Infinity, -Infinity, -Infinity];
  for (let i = 0; i < f.pos.length; i++) { const k = i % 3; lo[k] = Math.min(lo[k], f.pos[i]); hi[k] = Math.max(hi[k], f.pos[i]); }
  const bin = c.bin_shape || [0, 0, 0];
  l.desc.bounds = [lo.map((v, i) => v - (bin[i] || 0)), hi.map((v, i) => v + (bin[i] || 0))];
}

// ---- layer cards ----

function buildCard(l) {
  const c = el('div', { className: 'layer' });
  c.dataset.store = l.name;
  const vis = el('input', { type: 'checkbox', className: 'vis', checked: l.visible, title: 'show or hide' });
  vis.setAttribute('aria-label', `show ${l.name}`);
  const rm = el('button', { className: 'rm', textContent: '×', title: 'remove this layer' });
  const ng = el('a', { className: 'ng', textContent: 'Neuroglancer', target: '_blank', rel: 'noopener', hidden: true, title: 'open this store in Neuroglancer' });
  c.append(
    el('div', { className: 'lhead' }, vis, el('span', { className: 'sw' }), el('b', { textContent: l.name, title: l.name }), el('span', { className: 'geom' }), ng, rm),
    el('div', { className: 'lerr', role: 'alert' }),
    el('div', { className: 'lbody', hidden: true },
      el('div', { className: 'lctl' },
        el('label', {}, 'Colour ', el('select', { className: 'colour' })),
        el('label', {}, 'Level ', el('select', { className: 'level' }))),
      el('label', {}, 'Opacity ', el('input', { type: 'range', className: 'alpha', min: 0.1, max: 1, step: 0.05, value: l.alpha })),
      el('div', { className: 'legend' })),
    el('div', { className: 'lstat', textContent: 'loading…' }));
  vis.onchange = () => { l.visible = vis.checked; c.classList.toggle('off', !l.visible); writeURL(); scheduleUpdate(); redraw(); };
  rm.onclick = () => removeLayer(l);
  c.querySelector('.colour').onchange = (e) => {
    l.colour = e.target.value;
    l.range = null;
    writeURL(); fillLegend(l); scheduleUpdate(); redraw();
  };
  c.querySelector('.level').onchange = (e) => {
    l.level = e.target.value;
    l.buildGrid();
    writeURL(); scheduleUpdate(); redraw();
  };
  c.querySelector('.alpha').oninput = (e) => { l.alpha = Number(e.target.value); writeURL(); redraw(); };
  c.classList.toggle('off', !l.visible);
  $('layers').append(c);
  l.card = c;
  refreshAddList();
}

function fillCard(l) {
  const c = l.card, d = l.desc;
  c.querySelector('.sw').style.background = rgbCss(l.rgb);
  showLayerError(l);
  // A store that did not open has nothing to set: only its error shows.
  c.querySelector('.lbody').hidden = !d;
  if (!d) { c.querySelector('.lstat').textContent = ''; return; }
  c.querySelector('.geom').textContent = (d.geometry_types || []).join(', ');
  const cs = c.querySelector('.colour');
  cs.replaceChildren(new Option('layer colour', ''), new Option('height (z)', '_z'));
  const names = new Map();
  for (const lv of d.levels) for (const a of lv.vertex_attributes) {
    if (!names.has(a.name)) names.set(a.name, { a, levels: [] });
    names.get(a.name).levels.push(lv.level);
  }
  for (const [n, { a, levels }] of names) {
    const only = levels.length < d.levels.length ? ` (level ${levels.join(', ')})` : '';
    cs.add(new Option(`${n}${a.categories ? ' · categories' : ''}${only}`, n));
  }
  cs.value = l.colour;
  const ls = c.querySelector('.level');
  ls.replaceChildren(new Option('auto (by view)', 'auto'));
  for (const lv of d.levels) ls.add(new Option(`${lv.level} · ${lv.vertex_count.toLocaleString()} vertices`, String(lv.level)));
  ls.value = String(l.level);
  const ng = c.querySelector('.ng'), href = neuroglancerURL(d.neuroglancer);
  ng.hidden = !href;
  if (href) ng.href = href;
  fillLegend(l);
}

function showLayerError(l) {
  const errs = [];
  if (l.error) errs.push(l.error);
  const te = [...l.tileErrors.values()];
  if (te.length) errs.push(`${te.length} tile${te.length > 1 ? 's' : ''} failed: ${te.slice(0, 2).join('; ')}${te.length > 2 ? '; …' : ''}`);
  const e = l.card.querySelector('.lerr');
  const text = errs.join('\n');
  if (e.textContent !== text) e.textContent = text;
}

const rgbCss = (c) => `rgb(${c.map((v) => Math.round(v * 255)).join(',')})`;
const hexOf = (c) => '#' + c.map((v) => Math.round(v * 255).toString(16).padStart(2, '0')).join('');
const fromHex = (h) => [1, 3, 5].map((i) => parseInt(h.slice(i, i + 2), 16) / 255);

// fillLegend: the key to the layer's colours, always for the colouring the
// canvas uses, and which levels cannot be coloured that way.
function fillLegend(l) {
  const lg = l.card.querySelector('.legend');
  lg.replaceChildren();
  if (!l.desc) return;
  const unit = (i) => l.desc.axes?.[i]?.unit || '';
  if (!l.colour) {
    const pick = el('input', { type: 'color', value: hexOf(l.rgb), title: 'layer colour' });
    pick.oninput = () => { l.rgb = fromHex(pick.value); l.card.querySelector('.sw').style.background = pick.value; writeURL(); redraw(); };
    lg.append(el('div', {}, pick, ' layer colour'));
  } else if (l.colour === '_z') {
    const [a, b] = [l.lo[2], l.hi[2]], st = Math.abs(b - a) / 4 || 1;
    const z = l.desc.axes?.[2]?.name || 'z';
    lg.append(el('div', { className: 'bar' }),
      el('div', { className: 'ticks' }, ...[a, (a + b) / 2, b].map((v) => el('span', { textContent: fmtNum(v, st / 10) }))),
      el('div', { className: 'note', textContent: `height: ${z}${unit(2) ? ` (${unit(2)})` : ''}` }));
  } else {
    const at = l.attribute();
    if (!at) return;
    if (at.info.categories) {
      lg.append(el('div', {}, ...at.info.categories.map((name, i) => el('span', { className: 'cat' },
        el('span', { className: 'sw', style: `background:${rgbCss(PALETTE[i % PALETTE.length])}` }), name))));
      if (at.info.categories.length > PALETTE.length) lg.append(el('div', { className: 'note', textContent: `colours repeat after ${PALETTE.length} categories` }));
    } else {
      const r = l.range || [0, 1];
      const st = Math.abs(r[1] - r[0]) / 4 || 1;
      const lo = el('input', { type: 'number', step: 'any', value: l.range ? r[0] : '', className: 'cmin', title: 'value at the bottom of the colour bar' });
      const hi = el('input', { type: 'number', step: 'any', value: l.range ? r[1] : '', className: 'cmax', title: 'value at the top of the colour bar' });
      const auto = el('button', { textContent: 'auto', title: 'the range of the values drawn now' });
      const set = () => {
        const a = Number(lo.value), b = Number(hi.value);
        if (lo.value !== '' && hi.value !== '' && Number.isFinite(a) && Number.isFinite(b)) { l.range = [a, b]; writeURL(); fillLegend(l); redraw(); }
      };
      lo.onchange = hi.onchange = set;
      auto.onclick = () => { l.range = null; autoRange(l); fillLegend(l); writeURL(); redraw(); };
      lg.append(el('div', { className: 'bar' }),
        el('div', { className: 'ticks' }, ...(l.range ? [r[0], (r[0] + r[1]) / 2, r[1]] : []).map((v) => el('span', { textContent: fmtNum(v, st / 10) }))),
        el('div', { className: 'range' }, lo, hi, auto));
    }
    const missing = l.desc.levels.map((x) => x.level).filter((n) => !at.levels.includes(n));
    if (missing.length) lg.append(el('div', { className: 'note', textContent: `${missing.length > 1 ? 'levels' : 'level'} ${missing.join(', ')} hold${missing.length > 1 ? '' : 's'} no ${l.colour}: drawn grey` }));
  }
}

// autoRange sets a numeric colouring's range from the values drawn.
function autoRange(l) {
  let lo = Infinity, hi = -Infinity;
  for (const d of drawList) {
    if (d.l !== l || !d.t.val || d.t.attr !== l.colour) continue;
    const v = d.t.val;
    for (let i = 0; i < v.length; i++) { const x = v[i]; if (x < lo) lo = x; if (x > hi) hi = x; }
  }
  if (lo <= hi) {
    const p = (x) => Number(x.toPrecision(4));
    l.range = [p(lo), p(hi) === p(lo) ? p(lo) + 1 : p(hi)];
    return true;
  }
  return false;
}

function refreshAddList() {
  const s = $('addstore');
  s.replaceChildren();
  for (const st of S.catalog?.stores || []) {
    if (layerByName(st.name)) continue;
    const what = st.status === 'error' ? 'does not open' : (st.geometry_types || []).join(', ');
    s.add(new Option(`${st.name}${what ? ` · ${what}` : ''}`, st.name));
  }
  s.disabled = $('addlayer').disabled = !s.length;
}

function refreshObjectLayers() {
  const s = $('olayer'), keep = s.value;
  s.replaceChildren();
  for (const l of S.layers) s.add(new Option(l.name, l.name));
  if (S.layers.some((l) => l.name === keep)) s.value = keep;
}

// neuroglancerURL links to Neuroglancer when the descriptor has a
// neuroglancer member: its url, or its state opened in the public client.
// Relative sources are made absolute (Neuroglancer runs on another origin).
const NG_APP = 'https://neuroglancer-demo.appspot.com/';
function neuroglancerURL(ng) {
  if (!ng) return '';
  if (typeof ng === 'string') return new URL(ng, location.href).href;
  if (typeof ng.url === 'string') return new URL(ng.url, location.href).href;
  let state = ng.state;
  if (!state && ng.sources) {
    const src = Array.isArray(ng.sources) ? ng.sources : Object.values(ng.sources);
    // Annotation sources make annotation layers; skeletons and meshes
    // belong to segmentation layers.
    state = { layers: src.map((s, i) => {
      const source = typeof s === 'string' ? s : s.url;
      return { type: /\/annotations\/?$/.test(source) ? 'annotation' : 'segmentation', source, name: `layer${i}` };
    }) };
  }
  if (!state) return '';
  const abs = JSON.parse(JSON.stringify(state), (k, v) => (typeof v === 'string' && /^precomputed:\/\/\//.test(v) ? `precomputed://${location.origin}${v.slice('precomputed://'.length)}` : v));
  return `${NG_APP}#!${enc(JSON.stringify(abs))}`;
}

// ---- streaming ----

function viewInfo() {
  const c = $('view');
  cam.width = c.clientWidth || 1; cam.height = c.clientHeight || 1;
  const [lo, hi] = sceneBounds();
  cam.sceneLo = lo; cam.sceneHi = hi;
  const m = cam.matrices();
  const light = norm([-m.fw[0] + 0.45 * m.u[0] + 0.2 * m.r[0], -m.fw[1] + 0.45 * m.u[1] + 0.2 * m.r[1], -m.fw[2] + 0.45 * m.u[2] + 0.2 * m.r[2]]);
  return { mvp: m.mvp, planes: frustum(m.mvp), eye: m.eye, focalPx: cam.focalPx(), width: cam.width, height: cam.height, light };
}

function sceneBounds() {
  const lo = [Infinity, Infinity, Infinity], hi = [-Infinity, -Infinity, -Infinity];
  for (const l of S.layers) {
    if (!l.desc || !l.visible) continue;
    for (let i = 0; i < 3; i++) { lo[i] = Math.min(lo[i], l.lo[i]); hi[i] = Math.max(hi[i], l.hi[i]); }
  }
  if (!(lo[0] <= hi[0])) return [[0, 0, 0], [1, 1, 1]];
  return [lo, hi];
}

let updateTimer = 0, lastUpdate = 0;
// scheduleUpdate: at most one tile selection every 120 ms while the view
// moves, and one right after it stops.
function scheduleUpdate() {
  hooks.settled = false;
  if (updateTimer) return;
  const wait = Math.max(0, 120 - (performance.now() - lastUpdate));
  updateTimer = setTimeout(() => { updateTimer = 0; update(); }, wait);
}

function update() {
  lastUpdate = performance.now();
  const v = viewInfo();
  const layers = S.layers.filter((l) => l.visible && l.grid);
  const sel = select(layers.map((l) => ({ id: l.name, grid: l.grid, count: (n, p, k) => l.count(n, p, k) })), v, S.budget);
  const draw = [], want = [];
  inTree = new Set();
  for (const l of layers) for (const r of sel.trees.get(l.name)) walk(l, r, 0, true, draw, want);
  const wanted = new Set(want.map((w) => w.key));
  // Requests for tiles the view no longer needs are cancelled.
  for (const [k, t] of tiles) if (t.state === 'loading' && !wanted.has(k)) t.ctrl.abort();
  queue = want.filter((w) => !tiles.has(w.key)).sort((a, b) => a.depth - b.depth || b.pri - a.pri);
  drawList = draw;
  for (const l of layers) if (l.colour && l.colour !== '_z' && !l.range && l.attribute() && !l.attribute().info.categories && autoRange(l)) { fillLegend(l); writeURL(); }
  pump();
  evict();
  redraw();
}

// walk collects what to draw under node n and what to load: a loaded tile
// is drawn with its loaded children masked out; a tile not loaded yet
// leaves its place to whatever its children have.
function walk(l, n, depth, drawIt, draw, want) {
  const key = l.tileKey(n), t = tiles.get(key), shown = l.shown(n);
  inTree.add(key);
  if (!t || t.state === 'loading') want.push({ l, n, key, depth, pri: n.pri });
  const covered = [];
  for (const k of n.kids || []) {
    const kt = l.tile(k);
    const kc = !!l.shown(k) || (kt && kt.state === 'failed');
    if (kc) covered.push(k);
    walk(l, k, depth + 1, drawIt && (kc || !shown), draw, want);
  }
  if (shown && drawIt) {
    const all = l.grid.children(n).length;
    if (!(all > 0 && covered.length === all)) draw.push({ t: shown, l, mask: covered.length ? maskOf(l, n, covered) : null });
  }
}

function maskOf(l, n, kids) {
  const f = l.grid.fan(n.level), bits = [0, 0];
  for (const k of kids) {
    const c = [0, 1, 2].map((i) => k.idx[i] - n.idx[i] * f[i]);
    const b = (c[0] * f[1] + c[1]) * f[2] + c[2];
    bits[b >> 5] = (bits[b >> 5] | (1 << (b & 31))) >>> 0;
  }
  const lo = n.cell[0], size = [0, 1, 2].map((i) => (n.cell[1][i] - n.cell[0][i]) / f[i]);
  return { bits, lo, size, n: f };
}

function masked(mask, p) {
  if (!mask) return false;
  const c = [0, 1, 2].map((i) => Math.min(mask.n[i] - 1, Math.max(0, Math.floor((p[i] - mask.lo[i]) / (mask.size[i] || 1e-30)))));
  const b = (c[0] * mask.n[1] + c[1]) * mask.n[2] + c[2];
  return ((mask.bits[b >> 5] >>> (b & 31)) & 1) === 1;
}

function pump() {
  while (inflight < MAX_INFLIGHT && queue.length) {
    const w = queue.shift();
    if (!tiles.has(w.key)) loadTile(w.l, w.n, w.key);
  }
  hooks.pending = queue.length + inflight;
}

async function loadTile(l, n, key) {
  const t = { key, layer: l, node: n, level: n.level, attr: l.attrAt(n.level), state: 'loading', ctrl: new AbortController(), count: 0, used: performance.now() };
  tiles.set(key, t);
  inflight++;
  const { min, max } = l.grid.requestBox(n);
  const base = `api/v1/stores/${enc(l.name)}/bbox?min=${min.join(',')}&max=${max.join(',')}&level=${n.level}&limit=${TILE_LIMIT}${t.attr ? `&attributes=${enc(t.attr)}` : ''}`;
  try {
    const pages = [];
    let next = null, rows = 0;
    do {
      const res = await net.binary(next ? `${base}&cursor=${enc(next)}` : base, { kind: 'tile', layer: l.name, level: n.level, box: [min, max] }, t.ctrl.signal);
      pages.push(res);
      rows += res.rows;
      next = res.trailer.next;
    } while (next && rows < S.budget);
    if (tiles.get(key) !== t) return;
    let f = flatten(pages, t.attr);
    if (f.edges || f.faces) f = await stitch(l, n, t, f);
    if (tiles.get(key) !== t) return;
    const tris = f.faces && f.faceWidth >= 3 ? triangles(f.faces, f.faceWidth) : null;
    // Uploaded when first drawn (the GL context may not exist yet).
    Object.assign(t, { count: f.rows, edges: f.edges ? f.edges.length / 2 : 0, pos: f.pos, val: f.val, oid: f.oid, partial: !!next, state: 'ready', arrays: { pos: f.pos, val: f.val, oid: f.oid, edges: f.edges, tris } });
    l.counts.set(n.key, f.rows);
    l.byNode.set(n.key, t);
    if (hooks.firstTileMs === null) hooks.firstTileMs = performance.now();
    if (l.tileErrors.delete(n.key)) showLayerError(l);
  } catch (e) {
    if (e.name === 'AbortError') {
      if (tiles.get(key) === t) tiles.delete(key);
    } else if (tiles.get(key) === t) {
      t.state = 'failed';
      t.error = e.message;
      const p = (v) => v.map((x) => +x.toPrecision(6)).join(',');
      l.tileErrors.set(n.key, `level ${n.level} box ${p(min)} – ${p(max)}: ${e.message}`);
      showLayerError(l);
    }
  } finally {
    inflight--;
    scheduleUpdate();
  }
}

// stitch adds to a tile the edges and faces that cross its shared upper
// faces into other tiles of its level: a box query joins only the rows it
// returns, so each tile alone would leave a gap at every seam. They come
// from thin slabs across those faces; an edge (or face) is added by the
// first (in index order) of the tiles its ends lie in, for the first axis
// they differ on, so every crossing is drawn once. The tile's own rows
// stay first; f.rows still counts only them.
async function stitch(l, n, t, f) {
  // The slabs are as deep as the tile's own edges and faces are long (with
  // half again to spare): crossings are of the same kind.
  let reach = 0;
  const span = (idx) => {
    for (let k = 0; k < 3; k++) {
      let lo = Infinity, hi = -Infinity;
      for (const i of idx) { const v = f.pos[3 * i + k]; lo = Math.min(lo, v); hi = Math.max(hi, v); }
      reach = Math.max(reach, hi - lo);
    }
  };
  if (f.edges) for (let e = 0; e < f.edges.length; e += 2) span([f.edges[e], f.edges[e + 1]]);
  if (f.faces) for (let e = 0; e < f.faces.length; e += f.faceWidth) span(Array.from(f.faces.subarray(e, e + f.faceWidth)));
  const delta = Math.max(reach * 1.5, 1e-6);
  const extra = { pos: [], val: [], oid: [], edges: [], faces: [] };
  let width = f.faceWidth;
  for (const slab of l.grid.slabs(n, delta)) {
    const url = `api/v1/stores/${enc(l.name)}/bbox?min=${slab.min.join(',')}&max=${slab.max.join(',')}&level=${n.level}&limit=${TILE_LIMIT}${t.attr ? `&attributes=${enc(t.attr)}` : ''}`;
    const s = flatten([await net.binary(url, { kind: 'seam', layer: l.name, level: n.level, box: [slab.min, slab.max] }, t.ctrl.signal)], t.attr);
    const cell = (i) => l.grid.cellOf(n.level, [s.pos[3 * i], s.pos[3 * i + 1], s.pos[3 * i + 2]]);
    const take = (idx, w, into) => {
      const cs = idx.map(cell);
      let lo = cs[0], hi = cs[0];
      for (const c of cs) { if (cmp(c, lo) < 0) lo = c; if (cmp(c, hi) > 0) hi = c; }
      const axis = [0, 1, 2].find((k) => lo[k] !== hi[k]);
      if (axis !== slab.axis || cmp(lo, n.idx) !== 0) return;
      for (const i of idx) {
        into.push(f.rows + extra.pos.length / 3);
        extra.pos.push(s.pos[3 * i], s.pos[3 * i + 1], s.pos[3 * i + 2]);
        extra.val.push(s.val ? s.val[i] : NaN);
        extra.oid.push(s.oid ? s.oid[i] : -1);
      }
      width = w;
    };
    if (s.edges) for (let e = 0; e < s.edges.length; e += 2) take([s.edges[e], s.edges[e + 1]], 2, extra.edges);
    if (s.faces) for (let e = 0; e < s.faces.length; e += s.faceWidth) take(Array.from(s.faces.subarray(e, e + s.faceWidth)), s.faceWidth, extra.faces);
  }
  if (!extra.pos.length) return f;
  const join = (a, b, T) => { const o = new T(a.length + b.length); o.set(a); o.set(b, a.length); return o; };
  return {
    rows: f.rows, faceWidth: width,
    pos: join(f.pos, extra.pos, Float32Array),
    val: f.val ? join(f.val, extra.val, Float32Array) : null,
    oid: f.oid ? join(f.oid, extra.oid, Int32Array) : null,
    edges: f.edges || extra.edges.length ? join(f.edges || [], extra.edges, Uint32Array) : null,
    faces: f.faces || extra.faces.length ? join(f.faces || [], extra.faces, Uint32Array) : null,
  };
}

const cmp = (a, b) => a[0] - b[0] || a[1] - b[1] || a[2] - b[2];

function dropTile(k, t) {
  if (t.state === 'loading') t.ctrl.abort();
  if (t.g) renderer.free(t.g);
  tiles.delete(k);
}

// evict keeps the tiles of the current view (drawn, or in its tree of
// levels) and, of the others, the most recently used ones up to twice the
// vertex budget, so going back to a place is quick; failed tiles are forgotten
// after a minute so the view retries them.
function evict() {
  const now = performance.now();
  for (const k of inTree) { const t = tiles.get(k); if (t) t.used = now; }
  for (const d of drawList) d.t.used = now;
  let idleCount = 0;
  const idle = [];
  for (const [k, t] of tiles) {
    if (t.state === 'failed' && now - t.used > 60000) { t.layer.tileErrors.delete(t.node.key); tiles.delete(k); continue; }
    if (t.state !== 'ready' || t.used >= now) continue;
    idleCount += t.count;
    idle.push([k, t]);
  }
  idle.sort((a, b) => a[1].used - b[1].used);
  for (const [k, t] of idle) {
    if (idleCount <= 2 * S.budget) break;
    idleCount -= t.count;
    dropTile(k, t);
  }
}

// ---- drawing ----

let frameQueued = false;
function redraw() {
  if (frameQueued) return;
  frameQueued = true;
  requestAnimationFrame(() => { frameQueued = false; frame(); });
}

function styleOf(l, t) {
  let mode = 3;
  const at = l.attribute();
  if (l.colour === '_z') mode = 0;
  else if (at) mode = t.attr === l.colour ? (at.info.categories ? 2 : 1) : 4;
  const zr = [l.lo[2], l.hi[2]];
  const hasConn = t.g && (t.g.tris || t.g.lines);
  return { mode, range: l.range || [0, 1], zr, color: l.rgb, alpha: l.alpha, sel: l.sel, ptWorld: hasConn ? 0 : l.spacing(t.level) * 0.3, ptScale: S.size };
}

function items(only) {
  const out = [], drawn = {}, levels = {}, edges = {};
  for (const d of drawList) {
    if (!d.l.visible || (only && d.l !== only)) continue;
    if (!d.t.g) { d.t.g = renderer.upload(d.t.arrays); d.t.arrays = null; }
    out.push({ g: d.t.g, style: styleOf(d.l, d.t), mask: d.mask });
    drawn[d.l.name] = (drawn[d.l.name] || 0) + d.t.count;
    edges[d.l.name] = (edges[d.l.name] || 0) + d.t.edges;
    const lv = levels[d.l.name] || (levels[d.l.name] = {});
    lv[d.t.level] = (lv[d.t.level] || 0) + d.t.count;
  }
  if (!only) {
    for (const h of S.boxHits) if (h.layer.visible) out.push({ g: h.g, style: { mode: 3, range: [0, 1], zr: [0, 1], color: HITS, alpha: 1, sel: null, ptWorld: h.layer.spacing(h.level) * 0.45, ptScale: S.size * 1.5 }, mask: null });
    if (S.findItem) {
      // The object over everything else: its surface or lines, and its
      // vertices as dots (one-pixel lines are easy to miss).
      const f = S.findItem, style = { mode: 3, range: [0, 1], zr: [0, 1], color: HIGHLIGHT, alpha: 1, sel: null, ptWorld: f.layer.spacing(f.level) * 0.3, ptScale: S.size };
      out.push({ g: f.g, last: true, style, mask: null });
      if (f.g.lines) out.push({ g: { ...f.g, lines: null }, last: true, style, mask: null });
    }
  }
  return { out, drawn, levels, edges };
}

function frame() {
  if (!renderer || !renderer.linked) return;
  const v = viewInfo();
  const { out, drawn, levels, edges } = items(null);
  renderer.draw(v, out);
  hooks.frames++;
  hooks.drawn = drawn;
  hooks.drawnLevels = levels;
  hooks.drawnEdges = edges;
  const [lo, hi] = sceneBounds();
  const axes = S.layers.find((l) => l.desc && l.visible)?.desc.axes || [];
  overlay.draw({ cam, mvp: v.mvp, lo: S.layers.some((l) => l.desc && l.visible) ? lo : null, hi, axes, box: S.box, rubber: S.rubber, pick: S.pick?.pos });
  const total = Object.values(drawn).reduce((a, b) => a + b, 0);
  if (total && hooks.firstDataMs === null) hooks.firstDataMs = performance.now();
  // The first picture: every visible layer drew or has its error shown.
  if (!hooks.ready && total && S.layers.every((l) => !l.visible || drawn[l.name] || l.error || (!l.loading && l.grid && !l.grid.chain.length) || l.tileErrors.size)) {
    hooks.ready = true;
    hooks.firstPictureMs = performance.now();
  }
  for (const l of S.layers) layerStat(l, drawn[l.name] || 0, levels[l.name] || {});
  // Settled: this frame shows everything the view asked for.
  hooks.settled = !updateTimer && queue.length === 0 && inflight === 0 && S.layers.every((l) => !l.loading);
  if (!statusError) {
    const loading = inflight + queue.length;
    setStatus(`${S.layers.filter((l) => l.visible).length} of ${S.layers.length} layers · ${total.toLocaleString()} vertices drawn (budget ${S.budget.toLocaleString()})` +
      `${loading ? ` · ${loading} tile${loading > 1 ? 's' : ''} to load` : ''} · ${(net.bytes / 1e6).toFixed(1)} MB fetched`);
  }
}

function layerStat(l, n, levels) {
  const s = l.card.querySelector('.lstat');
  let text = '';
  if (l.desc && l.visible) {
    const ks = Object.keys(levels).sort((a, b) => a - b);
    const by = ks.length === 1 ? ` (level ${ks[0]})` : ks.length ? ` (${ks.map((k) => `${levels[k].toLocaleString()} at level ${k}`).join(', ')})` : '';
    const loading = [...tiles.values()].filter((t) => t.layer === l && t.state === 'loading').length;
    text = `${n.toLocaleString()} vertices drawn${by}${loading ? ` · ${loading} tile${loading > 1 ? 's' : ''} loading` : ''}`;
  } else if (l.desc) text = 'hidden';
  if (s.textContent !== text) s.textContent = text;
}

// ---- camera ----

function fit() {
  const [lo, hi] = sceneBounds();
  viewInfo();
  cam.fit(lo, hi);
  cameraMoved();
}

function applyCam(c) {
  [cam.yaw, cam.pitch, cam.dist] = c;
  cam.target = c.slice(3, 6);
  cameraMoved();
}

let urlTimer = 0;
function cameraMoved() {
  redraw();
  scheduleUpdate();
  clearTimeout(urlTimer);
  urlTimer = setTimeout(writeURL, 250);
}

function preset(yaw, pitch) {
  cam.yaw = yaw; cam.pitch = pitch;
  fit();
}

// ---- URL state ----

function writeURL() {
  const q = new URLSearchParams();
  q.set('stores', S.layers.map((l) => l.name).join(','));
  const hide = S.layers.filter((l) => !l.visible).map((l) => l.name);
  if (hide.length) q.set('hide', hide.join(','));
  for (const l of S.layers) {
    if (l.colour) q.set(`c.${l.name}`, l.colour);
    if (l.level !== 'auto') q.set(`lvl.${l.name}`, l.level);
    if (l.alpha !== 1) q.set(`op.${l.name}`, l.alpha);
    if (l.range) q.set(`range.${l.name}`, l.range.join(','));
    if (hexOf(l.rgb) !== hexOf(l.defaultRgb)) q.set(`rgb.${l.name}`, hexOf(l.rgb).slice(1));
  }
  if (S.budget !== DEFAULT_BUDGET) q.set('budget', S.budget);
  if (S.size !== 1) q.set('size', S.size);
  q.set('cam', [cam.yaw, cam.pitch, cam.dist, ...cam.target].map((v) => +v.toPrecision(6)).join(','));
  if (S.box) q.set('box', S.box.flat().join(','));
  if ($('blevel').value !== '0') q.set('blevel', $('blevel').value);
  if (S.find) q.set('obj', `${S.find.store}:${S.find.id}`);
  history.replaceState(null, '', '?' + q.toString().replace(/%2C/g, ',').replace(/%3A/g, ':'));
}

function readURL() {
  let q = new URLSearchParams(location.search);
  // Links from the single-store viewer (#store=…&level=…) still open.
  if (!q.has('stores') && location.hash.length > 1) {
    const h = new URLSearchParams(location.hash.slice(1));
    q = new URLSearchParams();
    if (h.get('store')) q.set('stores', h.get('store'));
    if (h.get('level') && h.get('level') !== 'auto') q.set(`lvl.${h.get('store')}`, h.get('level'));
    if (h.get('color')) q.set(`c.${h.get('store')}`, h.get('color'));
    for (const k of ['budget', 'box']) if (h.get(k)) q.set(k, h.get(k));
    if (h.get('obj') && h.get('store')) q.set('obj', `${h.get('store')}:${h.get('obj')}`);
  }
  const nums = (s, n) => {
    const v = (s || '').split(',').map(Number);
    return v.length === n && v.every(Number.isFinite) ? v : null;
  };
  const hide = new Set((q.get('hide') || '').split(',').filter(Boolean));
  const layers = (q.get('stores') || '').split(',').filter(Boolean).map((name) => ({
    name,
    o: {
      visible: !hide.has(name),
      colour: q.get(`c.${name}`) || '',
      level: q.get(`lvl.${name}`) || 'auto',
      alpha: Math.min(1, Math.max(0.1, Number(q.get(`op.${name}`)) || 1)),
      range: nums(q.get(`range.${name}`), 2),
      rgb: /^[0-9a-f]{6}$/i.test(q.get(`rgb.${name}`) || '') ? fromHex('#' + q.get(`rgb.${name}`)) : undefined,
    },
  }));
  S.budget = Math.max(1000, Number(q.get('budget')) || DEFAULT_BUDGET);
  S.size = Math.min(4, Math.max(0.25, Number(q.get('size')) || 1));
  S.camFromURL = nums(q.get('cam'), 6);
  const b = nums(q.get('box'), 6);
  S.box = b ? [b.slice(0, 3), b.slice(3)] : null;
  if (q.get('blevel')) $('blevel').value = q.get('blevel');
  const o = /^(.+):(\d+)$/.exec(q.get('obj') || '');
  S.findFromURL = o ? { store: o[1], id: Number(o[2]) } : null;
  return layers;
}

// ---- picking ----

// pickAt finds the drawn vertex nearest to CSS pixel (px, py), within 8
// px; of vertices about as near, the one closest to the eye.
function pickAt(px, py) {
  const v = viewInfo(), m = v.mvp, W = cam.width, H = cam.height;
  let best = null;
  for (const d of drawList) {
    if (!d.l.visible) continue;
    const p = d.t.pos;
    for (let i = 0, n = d.t.count; i < n; i++) {
      const X = p[3 * i], Y = p[3 * i + 1], Z = p[3 * i + 2];
      const w = m[3] * X + m[7] * Y + m[11] * Z + m[15];
      if (w <= 0) continue;
      const sx = ((m[0] * X + m[4] * Y + m[8] * Z + m[12]) / w + 1) / 2 * W, sy = (1 - (m[1] * X + m[5] * Y + m[9] * Z + m[13]) / w) / 2 * H;
      const dd = (sx - px) ** 2 + (sy - py) ** 2;
      if (dd > 64 || (best && dd > best.dd + 4) || (best && dd > best.dd - 4 && w >= best.w)) continue;
      if (masked(d.mask, [X, Y, Z])) continue;
      best = { dd, w, d, i, pos: [X, Y, Z], sx, sy };
    }
  }
  return best;
}

function clearPick() {
  S.pick = null;
  S.pickSeq++;
  $('pickbox').hidden = true;
  $('picked').textContent = '';
  for (const l of S.layers) l.sel = S.find && S.find.store === l.name ? S.find.id : null;
  redraw();
}

async function showPick(hit) {
  const seq = ++S.pickSeq;
  $('pickbox').hidden = false;
  if (!hit) { S.pick = null; $('picked').textContent = 'nothing here: no drawn vertex within 8 pixels'; redraw(); return; }
  const l = hit.d.l, t = hit.d.t;
  const oid = t.oid ? t.oid[hit.i] : null;
  S.pick = { store: l.name, level: t.level, pos: hit.pos, oid };
  for (const x of S.layers) x.sel = null;
  if (oid !== null && oid >= 0) { l.sel = oid; $('olayer').value = l.name; $('oid').value = oid; }
  redraw();
  const head = [`layer ${l.name} · level ${t.level}`, `position ${hit.pos.map((v) => +v.toPrecision(7)).join(', ')}`];
  if (oid !== null) head.push(oid >= 0 ? `object ${oid}` : 'object none');
  $('picked').textContent = head.join('\n') + '\nattributes: loading…';
  // Every attribute of the vertex at the level drawn: a box around the
  // vertex exactly, with all attributes.
  const p = hit.pos.slice(0, l.desc.dims).join(',');
  try {
    const r = await net.json(`api/v1/stores/${enc(l.name)}/bbox?min=${p}&max=${p}&level=${t.level}&attributes=*&limit=16&f=json`, { kind: 'pick', layer: l.name, level: t.level });
    if (seq !== S.pickSeq) return;
    const lines = [...head];
    const names = Object.keys(r.attributes || {});
    if (r.count > 1) lines.push(`${r.count} vertices at this position`);
    for (let i = 0; i < r.count; i++) {
      if (r.count > 1) lines.push(`— vertex ${i + 1}${r.object_ids ? ` (object ${r.object_ids[i]})` : ''}`);
      if (!names.length) lines.push(`level ${t.level} holds no vertex attributes`);
      for (const n of names) lines.push(`${n} = ${JSON.stringify(r.attributes[n][i])}`);
    }
    if (!r.count) lines.push('the server found no vertex here (the store changed?)');
    $('picked').textContent = lines.join('\n');
  } catch (e) {
    if (seq !== S.pickSeq) return;
    $('picked').textContent = head.join('\n') + `\nattributes: ${e.message}`;
  }
}

// ---- find object ----

function clearFind() {
  S.find = null;
  S.findSeq++;
  if (S.findItem) { renderer.free(S.findItem.g); S.findItem = null; }
  for (const l of S.layers) l.sel = null;
  $('oresult').textContent = ''; $('oattrs').replaceChildren(); $('manifest').textContent = '';
  redraw();
}

async function findObject(frame = true) {
  const l = layerByName($('olayer').value), id = Number($('oid').value);
  if (!l || !l.desc) { $('oresult').textContent = 'choose a layer that loaded'; return; }
  if ($('oid').value === '' || !Number.isInteger(id) || id < 0) { $('oresult').textContent = 'enter an object id (a whole number ≥ 0)'; return; }
  clearFind();
  const seq = S.findSeq;
  S.find = { store: l.name, id };
  writeURL();
  $('oresult').textContent = `looking up object ${id} in ${l.name}…`;
  $('oresult').className = 'result';
  const api = (p) => `api/v1/stores/${enc(l.name)}/objects/${id}${p}`;
  try {
    const t0 = performance.now();
    const lv = await net.json(api('/levels'), { kind: 'object', layer: l.name });
    if (!lv.levels.length) throw new Error(`object ${id} is in no level of ${l.name}`);
    const level = lv.levels.includes(0) ? 0 : Math.min(...lv.levels);
    const [res, man] = await Promise.all([net.binary(api(`?level=${level}`), { kind: 'object', layer: l.name, level }), net.json(api(`/manifest?level=${level}`), { kind: 'manifest', layer: l.name, level })]);
    await gpu;
    if (seq !== S.findSeq) return;
    const f = flatten([res], '');
    const tris = f.faces && f.faceWidth >= 3 ? triangles(f.faces, f.faceWidth) : null;
    S.findItem = { layer: l, level, g: renderer.upload({ pos: f.pos, val: null, oid: null, edges: f.edges, tris }) };
    l.sel = id;
    $('oresult').textContent = `object ${id} · ${l.name} · level ${level} · ${f.rows.toLocaleString()} vertices · ${(performance.now() - t0).toFixed(0)} ms\nin levels ${lv.levels.join(', ')}`;
    const oa = res.trailer.object_attributes || {};
    const rows = Object.entries(oa).map(([k, v]) => el('tr', {}, el('td', { textContent: k }), el('td', { textContent: typeof v === 'number' ? String(+v.toPrecision(7)) : JSON.stringify(v) })));
    $('oattrs').replaceChildren(rows.length ? el('table', {}, ...rows) : el('div', { className: 'note', textContent: 'no object attributes at this level' }));
    const frags = man.blocks.reduce((n, b) => n + b.fragments.length, 0);
    $('manifest').textContent = `manifest: ${man.blocks.length} blocks, ${frags} fragments\n` +
      man.blocks.slice(0, 60).map((b) => `chunk ${b.chunk.join('.')} mode ${b.mode}: ` + b.fragments.map((x) => `#${x.fragment}(${x.count})`).join(' ')).join('\n') +
      (man.blocks.length > 60 ? `\n… ${man.blocks.length - 60} more blocks` : '');
    if (frame && f.rows) {
      const lo = [Infinity, Infinity, Infinity], hi = [-Infinity, -Infinity, -Infinity];
      for (let i = 0; i < f.pos.length; i++) { const k = i % 3; lo[k] = Math.min(lo[k], f.pos[i]); hi[k] = Math.max(hi[k], f.pos[i]); }
      S.findBounds = [lo, hi];
      viewInfo();
      cam.fit(lo, hi);
      cam.dist = Math.max(cam.dist, l.spacing(0) * 4);
      cameraMoved();
    }
    redraw();
  } catch (e) {
    if (seq !== S.findSeq) return;
    $('oresult').textContent = `object ${id} in ${l.name}: ${e.message}`;
    $('oresult').className = 'result error';
  }
}

// ---- box query ----

function parseTriple(s) {
  const v = s.split(',').map((x) => Number(x.trim()));
  return v.length === 3 && v.every(Number.isFinite) ? v : null;
}

function clearBox() {
  S.box = null;
  for (const h of S.boxHits) renderer.free(h.g);
  S.boxHits = [];
  $('bresult').replaceChildren();
  writeURL();
  redraw();
}

async function queryBox() {
  const min = parseTriple($('bmin').value), max = parseTriple($('bmax').value);
  if (!min || !max) { $('bresult').textContent = 'enter min and max as three comma-separated numbers'; return; }
  if (min.some((v, i) => v > max[i])) { $('bresult').textContent = 'each min must be at most its max'; return; }
  for (const h of S.boxHits) renderer.free(h.g);
  S.boxHits = [];
  S.box = [min, max];
  writeURL();
  const level = $('blevel').value;
  const layers = S.layers.filter((l) => l.visible && l.desc);
  const seq = S.boxSeq = (S.boxSeq || 0) + 1;
  $('bresult').textContent = 'querying…';
  const rows = await Promise.all(layers.map(async (l) => {
    const lv = level === 'auto' || l.desc.levels.some((x) => String(x.level) === level) ? level : '0';
    const c = (v) => v.slice(0, l.desc.dims).join(',');
    const t0 = performance.now();
    try {
      const url = `api/v1/stores/${enc(l.name)}/bbox?min=${c(min)}&max=${c(max)}&level=${lv}&limit=${S.budget}&connectivity=false`;
      const res = await net.binary(url, { kind: 'box', layer: l.name });
      const ms = performance.now() - t0, entry = net.log[net.log.length - 1];
      const f = flatten([res], '');
      await gpu;
      if (seq === S.boxSeq && f.rows) S.boxHits.push({ layer: l, level: res.header.level, g: renderer.upload({ pos: f.pos }) });
      const count = res.trailer.next ? `${res.trailer.count.toLocaleString()}+ (more pages)` : (res.trailer.number_matched ?? res.trailer.count).toLocaleString();
      return [l.name, count, String(res.header.level), `${ms.toFixed(0)} ms`, `${((entry?.bytes || 0) / 1e6).toFixed(2)} MB`];
    } catch (e) {
      return [l.name, e.message, '', '', ''];
    }
  }));
  if (seq !== S.boxSeq) return;
  const head = el('tr', {}, ...['layer', 'vertices', 'level', 'time', 'bytes'].map((h) => el('th', { textContent: h })));
  $('bresult').replaceChildren(el('table', {}, head, ...rows.map((r) => el('tr', {}, ...r.map((x) => el('td', { textContent: x }))))));
  redraw();
}

// rectBox turns a rectangle drawn on the view into a box of the scene:
// across the screen, the rectangle where it meets the plane through the
// view's centre; along the axis nearest the line of sight, the whole scene.
// Seen along an axis (Top, Front, Side) that is the box drawn.
function rectBox(x0, y0, x1, y1) {
  viewInfo();
  const [slo, shi] = sceneBounds();
  const { fw } = cam.basis();
  const lo = [Infinity, Infinity, Infinity], hi = [-Infinity, -Infinity, -Infinity];
  for (const [x, y] of [[x0, y0], [x1, y0], [x0, y1], [x1, y1]]) {
    const { o, d } = ray(cam, x, y);
    const t = cam.dist / Math.max(1e-9, d[0] * fw[0] + d[1] * fw[1] + d[2] * fw[2]);
    for (let k = 0; k < 3; k++) { const v = o[k] + d[k] * t; lo[k] = Math.min(lo[k], v); hi[k] = Math.max(hi[k], v); }
  }
  const along = [0, 1, 2].reduce((a, k) => (Math.abs(fw[k]) > Math.abs(fw[a]) ? k : a), 0);
  lo[along] = slo[along]; hi[along] = shi[along];
  const r = (v) => +v.toPrecision(6);
  const min = lo.map((v, k) => r(Math.max(slo[k], v))), max = hi.map((v, k) => r(Math.min(shi[k], v)));
  return min.every((v, k) => v <= max[k]) ? [min, max] : null;
}

// ---- input ----

function bindInput() {
  const c = $('view');
  let drag = null;
  const local = (e) => { const r = c.getBoundingClientRect(); return [e.clientX - r.left, e.clientY - r.top]; };
  c.addEventListener('pointerdown', (e) => {
    const [x, y] = local(e);
    drag = { x, y, x0: x, y0: y, pan: e.shiftKey || e.button === 2, moved: false, box: S.drawing };
    c.setPointerCapture(e.pointerId);
  });
  c.addEventListener('pointermove', (e) => {
    if (!drag) return;
    const [x, y] = local(e);
    const dx = x - drag.x, dy = y - drag.y;
    if (Math.abs(x - drag.x0) + Math.abs(y - drag.y0) > 3) drag.moved = true;
    drag.x = x; drag.y = y;
    if (drag.box) { S.rubber = [drag.x0, drag.y0, x, y]; redraw(); return; }
    if (drag.pan) {
      const { r, u } = cam.basis(), s = cam.dist * 2 * Math.tan(cam.fov / 2) / cam.height;
      for (let i = 0; i < 3; i++) cam.target[i] += (-dx * r[i] + dy * u[i]) * s;
    } else {
      cam.yaw -= dx * 0.006;
      cam.pitch = Math.max(-1.5707, Math.min(1.5707, cam.pitch + dy * 0.006));
    }
    cameraMoved();
  });
  c.addEventListener('pointerup', (e) => {
    const d = drag;
    drag = null;
    if (!d) return;
    if (d.box) {
      S.rubber = null;
      if (d.moved) {
        const b = rectBox(Math.min(d.x0, d.x), Math.min(d.y0, d.y), Math.max(d.x0, d.x), Math.max(d.y0, d.y));
        if (b) { $('bmin').value = b[0].join(','); $('bmax').value = b[1].join(','); queryBox(); }
      }
      setDrawing(false);
      redraw();
      return;
    }
    if (!d.moved) { const [x, y] = local(e); showPick(pickAt(x, y)); }
  });
  c.addEventListener('dblclick', (e) => {
    const [x, y] = local(e), hit = pickAt(x, y);
    if (!hit) return;
    cam.target = hit.pos;
    cam.dist *= 0.5;
    cameraMoved();
  });
  c.addEventListener('contextmenu', (e) => e.preventDefault());
  c.addEventListener('wheel', (e) => {
    e.preventDefault();
    const k = Math.exp(Math.max(-1, Math.min(1, e.deltaY * 0.0015)));
    // Zoom towards the point under the cursor (on the plane of the target).
    const [x, y] = local(e);
    viewInfo();
    const { o, d } = ray(cam, x, y), { fw } = cam.basis();
    const t = cam.dist / Math.max(1e-6, d[0] * fw[0] + d[1] * fw[1] + d[2] * fw[2]);
    const p = [o[0] + d[0] * t, o[1] + d[1] * t, o[2] + d[2] * t];
    for (let i = 0; i < 3; i++) cam.target[i] = p[i] + (cam.target[i] - p[i]) * k;
    cam.dist *= k;
    cameraMoved();
  }, { passive: false });
  c.addEventListener('keydown', (e) => { if (e.key === 'f' || e.key === 'F') fit(); });
  $('fit').onclick = fit;
  $('vtop').onclick = () => preset(-Math.PI / 2, 1.5707);
  $('vfront').onclick = () => preset(-Math.PI / 2, 0);
  $('vside').onclick = () => preset(0, 0);
  $('budget').onchange = (e) => { S.budget = Math.max(1000, Number(e.target.value) || DEFAULT_BUDGET); e.target.value = S.budget; writeURL(); scheduleUpdate(); };
  $('size').oninput = (e) => { S.size = Number(e.target.value); writeURL(); redraw(); };
  $('bquery').onclick = queryBox;
  $('bclear').onclick = clearBox;
  $('bdraw').onclick = () => setDrawing(!S.drawing);
  $('pickclose').onclick = clearPick;
  $('blevel').onchange = writeURL;
  $('oquery').onclick = () => findObject(true);
  $('addlayer').onclick = () => { const n = $('addstore').value; if (n) { addLayer(n); writeURL(); } };
  $('paneltoggle').onclick = () => {
    const p = $('panel');
    p.hidden = !p.hidden;
    $('paneltoggle').setAttribute('aria-expanded', String(!p.hidden));
    redraw();
    scheduleUpdate();
  };
  window.addEventListener('resize', () => { redraw(); scheduleUpdate(); });
}

function setDrawing(on) {
  S.drawing = on;
  $('bdraw').setAttribute('aria-pressed', String(on));
  $('view').classList.toggle('drawing', on);
}

// ---- test and console hooks ----

// measureFrames draws n frames synchronously and returns ms per frame
// (readPixels waits for the GPU, or the software rasteriser, to finish).
hooks.measureFrames = (n) => {
  const gl = renderer.gl, v = viewInfo(), { out } = items(null), px = new Uint8Array(4);
  renderer.draw(v, out);
  gl.readPixels(0, 0, 1, 1, gl.RGBA, gl.UNSIGNED_BYTE, px);
  const t0 = performance.now();
  for (let i = 0; i < n; i++) { renderer.draw(v, out); gl.readPixels(0, 0, 1, 1, gl.RGBA, gl.UNSIGNED_BYTE, px); }
  return (performance.now() - t0) / n;
};

// coverage draws each visible layer alone and counts its pixels.
hooks.coverage = () => {
  const v = viewInfo(), out = {};
  for (const l of S.layers) {
    if (!l.visible) continue;
    renderer.draw(v, items(l).out);
    out[l.name] = renderer.coverage();
  }
  frame();
  return out;
};

// vertexOnScreen: a drawn vertex of the layer, near the middle of the view,
// that a click at its position picks (CSS pixels relative to the canvas).
hooks.vertexOnScreen = (name) => {
  const v = viewInfo(), m = v.mvp, W = cam.width, H = cam.height, cands = [];
  for (const d of drawList) {
    if (d.l.name !== name || !d.l.visible) continue;
    for (let i = 0; i < d.t.count; i += Math.max(1, d.t.count >> 8)) {
      const p = [d.t.pos[3 * i], d.t.pos[3 * i + 1], d.t.pos[3 * i + 2]];
      const s = project(m, p, W, H);
      if (s.w > 0 && s.x > 20 && s.y > 20 && s.x < W - 20 && s.y < H - 40) cands.push({ x: s.x, y: s.y, dd: (s.x - W / 2) ** 2 + (s.y - H / 2) ** 2 });
    }
  }
  cands.sort((a, b) => a.dd - b.dd);
  for (const c of cands.slice(0, 200)) {
    const hit = pickAt(c.x, c.y);
    if (hit && hit.d.l.name === name && hit.dd < 1) return { x: c.x, y: c.y, pos: hit.pos, level: hit.d.t.level };
  }
  return null;
};

hooks.setCamera = (c) => {
  Object.assign(cam, c);
  if (c.target) cam.target = [...c.target];
  cameraMoved();
  update();
};
hooks.camera = () => ({ yaw: cam.yaw, pitch: cam.pitch, dist: cam.dist, target: [...cam.target], fov: cam.fov, width: cam.width, height: cam.height });
hooks.project = (p) => project(viewInfo().mvp, p, cam.width, cam.height);
hooks.findBounds = () => S.findBounds || null;
hooks.labels = () => (overlay ? overlay.labels : []);
hooks.picked = () => S.pick;
hooks.cached = () => [...tiles.values()].map((t) => `${t.key} ${t.state}`);
hooks.tiles = () => drawList.map((d) => ({ layer: d.l.name, level: d.t.level, lo: d.t.node.lo, hi: d.t.node.hi, count: d.t.count, masked: !!d.mask }));

// ---- start ----

async function main() {
  hooks.marks = [['main', performance.now()]];
  bindInput();
  const wanted = readURL();
  $('budget').value = S.budget;
  $('size').value = S.size;
  if (S.box) { $('bmin').value = S.box[0].join(','); $('bmax').value = S.box[1].join(','); }
  // Layers named in the URL start at once, with the catalog alongside.
  for (const w of wanted) addLayer(w.name, w.o);
  let catalog;
  try {
    catalog = await net.json('api/v1/stores', { kind: 'catalog' });
  } catch (e) {
    setStatus(`error: the catalog: ${e.message}`, true);
    return;
  }
  S.catalog = catalog;
  if (!catalog.stores.length) { setStatus('this server has no stores', true); return; }
  if (!wanted.length) {
    const ok = catalog.stores.filter((s) => s.status !== 'error');
    for (const s of (ok.length ? ok : catalog.stores).slice(0, MAX_DEFAULT_LAYERS)) addLayer(s.name, {});
  }
  refreshAddList();
  writeURL();
  await Promise.all(S.layers.map((l) => l.described));
  // The GL context comes after the first tiles are asked for: creating it
  // can take a software renderer a second or two, during which the
  // answers arrive.
  update();
  hooks.marks.push(['requested', performance.now()]);
  try {
    renderer = new Renderer($('view'));
    overlay = new Overlay($('overlay'));
  } catch (e) {
    setStatus(`error: ${e.message}`, true);
    return;
  }
  hooks.marks.push(['context', performance.now()]);
  try {
    await renderer.ready();
  } catch (e) {
    setStatus(`error: ${e.message}`, true);
    return;
  }
  hooks.marks.push(['linked', performance.now()]);
  gpuReady();
  redraw();
  if (S.box) queryBox();
  if (S.findFromURL && layerByName(S.findFromURL.store)) {
    $('olayer').value = S.findFromURL.store;
    $('oid').value = S.findFromURL.id;
    findObject(!S.camFromURL);
  }
}

main();
