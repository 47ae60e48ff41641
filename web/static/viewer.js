// zvfserve viewer: store picker, level of detail, box and object queries,
// picking, colour by attribute; view state lives in the URL hash.
import { parseBinary, flatten } from './format.js';
import { Renderer, PALETTE } from './gl.js';

const $ = (id) => document.getElementById(id);
const statusEl = $('status');
const state = { store: '', level: 'auto', color: '', budget: 1000000, cam: null, box: null, obj: null };
const hooks = { ready: false, requests: [], errors: [], lastFrameMs: 0, loads: 0 };
window.__zvf = hooks;

let renderer, info = null, loaded = null, inflight = null, pending = false;
const timing = { ms: 0, bytes: 0 };

function setStatus(msg, isErr) {
  statusEl.textContent = msg;
  statusEl.className = isErr ? 'error' : '';
  if (isErr) hooks.errors.push(msg);
}

// ---- camera (orbit around a target) ----
const cam = { yaw: -0.6, pitch: 0.5, dist: 1000, target: [0, 0, 0], fov: 0.8 };

function mat4mul(a, b) {
  const o = new Float32Array(16);
  for (let i = 0; i < 4; i++) for (let j = 0; j < 4; j++) {
    let s = 0;
    for (let k = 0; k < 4; k++) s += a[k * 4 + j] * b[i * 4 + k];
    o[i * 4 + j] = s;
  }
  return o;
}

function eye() {
  const cp = Math.cos(cam.pitch);
  return [cam.target[0] + cam.dist * cp * Math.cos(cam.yaw), cam.target[1] + cam.dist * cp * Math.sin(cam.yaw), cam.target[2] + cam.dist * Math.sin(cam.pitch)];
}

function basis() {
  const e = eye();
  const f = cam.target.map((t, i) => t - e[i]);
  const fl = Math.hypot(...f);
  const fw = f.map((v) => v / fl);
  let r = [fw[1] * 1 - fw[2] * 0, fw[2] * 0 - fw[0] * 1, 0];
  const rl = Math.hypot(...r) || 1;
  r = r.map((v) => v / rl);
  const u = [r[1] * fw[2] - r[2] * fw[1], r[2] * fw[0] - r[0] * fw[2], r[0] * fw[1] - r[1] * fw[0]];
  return { e, fw, r, u };
}

function mvp() {
  const { e, fw, r, u } = basis();
  const view = new Float32Array([r[0], u[0], -fw[0], 0, r[1], u[1], -fw[1], 0, r[2], u[2], -fw[2], 0,
    -(r[0] * e[0] + r[1] * e[1] + r[2] * e[2]), -(u[0] * e[0] + u[1] * e[1] + u[2] * e[2]), fw[0] * e[0] + fw[1] * e[1] + fw[2] * e[2], 1]);
  const c = $('view'), aspect = (c.clientWidth || 1) / (c.clientHeight || 1);
  const near = cam.dist / 1000, far = cam.dist * 20, f = 1 / Math.tan(cam.fov / 2);
  const proj = new Float32Array([f / aspect, 0, 0, 0, 0, f, 0, 0, 0, 0, (far + near) / (near - far), -1, 0, 0, 2 * far * near / (near - far), 0]);
  return mat4mul(proj, view);
}

function fit() {
  if (!info) return;
  const [lo, hi] = info.bounds;
  cam.target = [0, 1, 2].map((i) => ((lo[i] ?? 0) + (hi[i] ?? 0)) / 2);
  const size = Math.max(...[0, 1, 2].map((i) => (hi[i] ?? 0) - (lo[i] ?? 0)), 1);
  cam.dist = size * 1.6;
  viewChanged();
}

// ---- drawing ----
let frameQueued = false;
function redraw() {
  if (frameQueued) return;
  frameQueued = true;
  requestAnimationFrame(() => {
    frameQueued = false;
    const t0 = performance.now();
    renderer.draw(mvp(), style());
    hooks.lastFrameMs = performance.now() - t0;
    placeAxisLabels();
  });
}

function style() {
  const zr = info ? [info.bounds[0][2] ?? 0, info.bounds[1][2] ?? 1] : [0, 1];
  const a = currentAttr();
  if (!a) return { mode: 0, range: [0, 1], zr };
  return { mode: a.categories ? 2 : 1, range: [Number($('cmin').value) || 0, Number($('cmax').value) || 1], zr };
}

function currentAttr() {
  const lvl = info && info.levels[0];
  if (!lvl || !state.color) return null;
  return lvl.vertex_attributes.find((a) => a.name === state.color) || null;
}

// ---- access token (servers started with --token) ----
// The page itself loads without one; data requests send the token as a
// bearer header. It is asked for on the first 401 (again when refused) and
// kept in session storage, so it lasts as long as the tab.
const TOKEN_KEY = 'zvfserve-token';
let tokenAsked = null;

function askToken(refused) {
  if (!tokenAsked) {
    tokenAsked = new Promise((resolve) => {
      const form = $('tokenform'), msg = $('tokenmsg');
      msg.textContent = refused ? 'The server did not accept that token; try again.' : 'This server needs an access token.';
      msg.className = refused ? 'error' : '';
      $('token').value = '';
      form.hidden = false;
      $('token').focus();
      form.onsubmit = (e) => {
        e.preventDefault();
        sessionStorage.setItem(TOKEN_KEY, $('token').value.trim());
        form.hidden = true;
        tokenAsked = null;
        resolve();
      };
    });
  }
  return tokenAsked;
}

// apiFetch is fetch with the bearer token; a 401 asks for a token and
// retries. Concurrent requests share one question.
async function apiFetch(url, opts = {}) {
  for (;;) {
    const sent = sessionStorage.getItem(TOKEN_KEY);
    const headers = { ...(opts.headers || {}) };
    if (sent !== null) headers.Authorization = `Bearer ${sent}`;
    const r = await fetch(url, { ...opts, headers });
    if (r.status !== 401) return r;
    if (sent !== null && sessionStorage.getItem(TOKEN_KEY) === sent) sessionStorage.removeItem(TOKEN_KEY);
    setStatus('waiting for the access token…');
    await askToken(sent !== null);
  }
}

// ---- requests ----
async function fetchBinary(url, signal) {
  hooks.requests.push(url);
  const t0 = performance.now();
  const r = await apiFetch(url, { signal, headers: { Accept: 'application/vnd.zvf.v1+octet-stream' } });
  if (!r.ok) {
    let detail = r.statusText;
    try { const p = await r.json(); detail = p.detail || p.title; } catch { /* not JSON */ }
    throw new Error(`${r.status}: ${detail}`);
  }
  const buf = await r.arrayBuffer();
  timing.ms = performance.now() - t0;
  timing.bytes = buf.byteLength;
  return parseBinary(buf);
}

async function fetchJSON(url, signal) {
  hooks.requests.push(url);
  const r = await apiFetch(url, { signal });
  const body = await r.json();
  if (!r.ok) throw new Error(`${r.status}: ${body.detail || body.title}`);
  return body;
}

function api(path) { return `api/v1/stores/${encodeURIComponent(state.store)}${path}`; }

function viewBox() {
  const [lo, hi] = info.bounds;
  const half = cam.dist * Math.tan(cam.fov / 2) * 1.5;
  const min = [0, 1, 2].map((i) => Math.max(lo[i], cam.target[i] - half));
  const max = [0, 1, 2].map((i) => Math.min(hi[i], cam.target[i] + half));
  for (let i = 0; i < 3; i++) if (min[i] > max[i]) { min[i] = lo[i]; max[i] = hi[i]; }
  return { min, max };
}

// loadView fetches what fits the view: the coarsest level first (quick),
// then the level that fits the point budget. A newer view aborts it.
async function loadView() {
  if (!info) return;
  if (inflight) inflight.abort();
  const ac = new AbortController();
  inflight = ac;
  const { min, max } = state.level === 'auto' ? viewBox() : { min: info.bounds[0], max: info.bounds[1] };
  const levels = info.levels.map((l) => l.level);
  const coarsest = levels[levels.length - 1];
  const attr = state.color ? `&attributes=${encodeURIComponent(state.color)}` : '';
  const q = (lvl) => api(`/bbox?min=${min.join(',')}&max=${max.join(',')}&level=${lvl}&limit=${state.budget}${attr}`);
  try {
    setStatus('loading…');
    if (!loaded && state.level === 'auto' && levels.length > 1) show(await fetchBinary(q(coarsest), ac.signal));
    show(await fetchBinary(q(state.level), ac.signal));
    hooks.loads++;
    hooks.ready = true;
  } catch (e) {
    if (e.name !== 'AbortError') setStatus(`error: ${e.message}`, true);
  } finally {
    if (inflight === ac) inflight = null;
  }
}

function show(res) {
  const ai = res.header.attribute_info.findIndex((a) => a.name === state.color);
  const f = flatten(res, ai);
  loaded = { res, ...f };
  renderer.setLayer('data', { pos: f.pos, val: f.val, edges: res.edges, faces: res.faces, faceWidth: res.faceWidth, size: 2, mode: 'style' });
  if (ai >= 0 && !res.header.attribute_info[ai].categories && f.val && f.val.length && $('cmin').value === '') {
    let lo = Infinity, hi = -Infinity;
    for (let i = 0; i < f.val.length; i++) { const v = f.val[i]; if (v < lo) lo = v; if (v > hi) hi = v; }
    $('cmin').value = lo.toPrecision(4); $('cmax').value = hi.toPrecision(4);
  }
  legend();
  const more = res.trailer.next ? ' (more than the budget: partial)' : '';
  setStatus(`${state.store} · level ${res.header.level} · ${res.rows.toLocaleString()} vertices${more} · ${(timing.bytes / 1e6).toFixed(2)} MB · ${timing.ms.toFixed(0)} ms`);
  redraw();
}

function legend() {
  const a = currentAttr(), el = $('legend');
  el.innerHTML = '';
  if (!a) return;
  if (a.categories) {
    a.categories.forEach((c, i) => {
      const d = document.createElement('div');
      const sw = document.createElement('span');
      sw.className = 'sw';
      sw.style.background = `rgb(${PALETTE[i % PALETTE.length].map((v) => v * 255 | 0).join(',')})`;
      d.append(sw, c);
      el.append(d);
    });
  } else {
    const bar = document.createElement('div');
    bar.className = 'bar';
    el.append(bar);
  }
}

// ---- box and object tools ----
function parseTriple(s) {
  const v = s.split(',').map(Number);
  return v.length === info.dims && v.every(Number.isFinite) ? v : null;
}

function boxLines(min, max) {
  const c = [];
  for (let i = 0; i < 8; i++) c.push([i & 1 ? max[0] : min[0], i & 2 ? max[1] : min[1], i & 4 ? max[2] : min[2]]);
  const e = [0, 1, 2, 3, 4, 5, 6, 7, 0, 2, 1, 3, 4, 6, 5, 7, 0, 4, 1, 5, 2, 6, 3, 7];
  return new Float32Array(e.flatMap((i) => c[i]));
}

async function queryBox() {
  const min = parseTriple($('bmin').value), max = parseTriple($('bmax').value);
  if (!min || !max) { $('bresult').textContent = `enter ${info.dims} comma-separated numbers`; return; }
  state.box = [min, max];
  writeHash();
  const lvl = state.level === 'auto' ? 'auto' : state.level;
  try {
    const t0 = performance.now();
    const res = await fetchBinary(api(`/bbox?min=${min}&max=${max}&level=${lvl}&limit=${state.budget}`));
    const f = flatten(res, -1);
    renderer.setLayer('box', { pos: boxLines(min, max), prim: 'lines', mode: 3, color: [1, 0.8, 0.2] });
    renderer.setLayer('boxhits', { pos: f.pos, mode: 3, color: [0.3, 0.95, 1], size: 4 });
    $('bresult').textContent = `${res.trailer.count.toLocaleString()} vertices at level ${res.header.level}${res.trailer.next ? ' (paged)' : ''} in ${(performance.now() - t0).toFixed(0)} ms`;
    redraw();
  } catch (e) {
    $('bresult').textContent = e.message;
    setStatus(`error: ${e.message}`, true);
  }
}

async function queryObject() {
  const id = Number($('oid').value);
  if (!Number.isInteger(id) || id < 0) { $('oresult').textContent = 'enter an object id'; return; }
  state.obj = id;
  writeHash();
  const lvl = state.level === 'auto' ? (loaded ? loaded.res.header.level : 0) : state.level;
  try {
    const t0 = performance.now();
    const [res, man] = await Promise.all([
      fetchBinary(api(`/objects/${id}?level=${lvl}`)),
      fetchJSON(api(`/objects/${id}/manifest?level=${lvl}`)),
    ]);
    const f = flatten(res, -1);
    renderer.setLayer('object', { pos: f.pos, edges: res.edges, faces: null, mode: 3, color: [1, 0.25, 0.8], size: 5 });
    $('oresult').textContent = `object ${id}: ${res.trailer.count.toLocaleString()} vertices at level ${lvl} in ${(performance.now() - t0).toFixed(0)} ms`;
    const frags = man.blocks.reduce((n, b) => n + b.fragments.length, 0);
    $('manifest').textContent = `${man.blocks.length} blocks, ${frags} fragments\n` +
      man.blocks.slice(0, 50).map((b) => `chunk ${b.chunk.join('.')} mode ${b.mode}: ` + b.fragments.map((x) => `#${x.fragment}(${x.count})`).join(' ')).join('\n');
    redraw();
  } catch (e) {
    $('oresult').textContent = e.message;
    setStatus(`error: ${e.message}`, true);
  }
}

// pick finds the loaded vertex nearest the cursor (within 10 px).
function pick(ev) {
  if (!loaded) return;
  const c = $('view'), rect = c.getBoundingClientRect();
  const x = (ev.clientX - rect.left) / rect.width * 2 - 1, y = 1 - (ev.clientY - rect.top) / rect.height * 2;
  const m = mvp(), p = loaded.pos;
  let best = -1, bestD = (10 / rect.width * 2) ** 2;
  for (let i = 0; i < p.length / 3; i++) {
    const X = p[3 * i], Y = p[3 * i + 1], Z = p[3 * i + 2];
    const w = m[3] * X + m[7] * Y + m[11] * Z + m[15];
    if (w <= 0) continue;
    const sx = (m[0] * X + m[4] * Y + m[8] * Z + m[12]) / w, sy = (m[1] * X + m[5] * Y + m[9] * Z + m[13]) / w;
    const d = (sx - x) ** 2 + (sy - y) ** 2;
    if (d < bestD) { bestD = d; best = i; }
  }
  if (best < 0) { $('picked').textContent = 'nothing here'; return; }
  const lines = [`row ${best}`, `position ${Array.from(p.slice(3 * best, 3 * best + 3)).map((v) => v.toFixed(2)).join(', ')}`];
  if (loaded.ids) lines.push(`object ${loaded.ids[best]}`);
  let r = best;
  for (const b of loaded.res.batches) {
    if (r < b.rows) {
      loaded.res.header.attribute_info.forEach((a, k) => {
        if (!b.attrs[k]) return;
        const v = b.attrs[k][r * (a.channels || 1)];
        lines.push(`${a.name} = ${a.categories ? a.categories[Number(v)] : v}`);
      });
      break;
    }
    r -= b.rows;
  }
  $('picked').textContent = lines.join('\n');
  if (loaded.ids && loaded.ids[best] >= 0) $('oid').value = loaded.ids[best];
}

// ---- axes ----
let axisLabels = [];
function drawAxes() {
  const [lo, hi] = info.bounds;
  const o = lo;
  const pos = new Float32Array([...o, hi[0], o[1], o[2], ...o, o[0], hi[1], o[2], ...o, o[0], o[1], hi[2]]);
  renderer.setLayer('axes', { pos, prim: 'lines', mode: 3, color: [0.6, 0.65, 0.7] });
  for (const l of axisLabels) l.el.remove();
  axisLabels = info.axes.slice(0, 3).map((a, i) => {
    const el = document.createElement('div');
    el.style.cssText = 'position:absolute;color:#9fb3c8;font:12px monospace;pointer-events:none';
    el.textContent = a.name + (a.unit ? ` (${a.unit})` : '');
    document.querySelector('main').append(el);
    const at = [...o];
    at[i] = hi[i];
    return { el, at };
  });
  $('axesinfo').textContent = 'axes: ' + info.axes.map((a) => a.name + (a.unit ? ` [${a.unit}]` : '')).join(', ');
}

function placeAxisLabels() {
  const m = mvp(), c = $('view');
  for (const { el, at } of axisLabels) {
    const [X, Y, Z] = at;
    const w = m[3] * X + m[7] * Y + m[11] * Z + m[15];
    if (w <= 0) { el.style.display = 'none'; continue; }
    el.style.display = '';
    el.style.left = `${((m[0] * X + m[4] * Y + m[8] * Z + m[12]) / w + 1) / 2 * c.clientWidth}px`;
    el.style.top = `${(1 - (m[1] * X + m[5] * Y + m[9] * Z + m[13]) / w) / 2 * c.clientHeight}px`;
  }
}

// ---- URL state ----
function writeHash() {
  const h = new URLSearchParams({ store: state.store, level: state.level, color: state.color, budget: state.budget,
    cam: [cam.yaw, cam.pitch, cam.dist, ...cam.target].map((v) => +v.toFixed(3)).join(',') });
  if (state.box) h.set('box', state.box.flat().join(','));
  if (state.obj !== null) h.set('obj', state.obj);
  history.replaceState(null, '', '#' + h.toString());
}

function readHash() {
  const h = new URLSearchParams(location.hash.slice(1));
  state.store = h.get('store') || '';
  state.level = h.get('level') || 'auto';
  state.color = h.get('color') || '';
  state.budget = Number(h.get('budget')) || 1000000;
  const c = (h.get('cam') || '').split(',').map(Number);
  state.cam = c.length === 6 && c.every(Number.isFinite) ? c : null;
  const b = (h.get('box') || '').split(',').map(Number);
  state.box = b.length === 6 && b.every(Number.isFinite) ? [b.slice(0, 3), b.slice(3)] : null;
  state.obj = h.has('obj') ? Number(h.get('obj')) : null;
}

let viewTimer = 0;
function viewChanged() {
  redraw();
  writeHash();
  clearTimeout(viewTimer);
  if (state.level === 'auto') viewTimer = setTimeout(loadView, 300);
}

// ---- store selection ----
async function openStore(name) {
  state.store = name;
  info = await fetchJSON(api(''));
  loaded = null;
  for (const n of ['data', 'box', 'boxhits', 'object']) renderer.removeLayer(n);
  const lv = $('level');
  lv.length = 1;
  for (const l of info.levels) lv.add(new Option(`${l.level} · ${l.vertex_count.toLocaleString()} vertices`, String(l.level)));
  lv.value = info.levels.some((l) => String(l.level) === state.level) ? state.level : 'auto';
  state.level = lv.value;
  const cs = $('color');
  cs.length = 1;
  for (const a of info.levels[0].vertex_attributes) cs.add(new Option(a.name + (a.categories ? ' (categories)' : ''), a.name));
  cs.value = info.levels[0].vertex_attributes.some((a) => a.name === state.color) ? state.color : '';
  state.color = cs.value;
  $('cmin').value = ''; $('cmax').value = '';
  drawAxes();
  linkNeuroglancer();
  if (state.cam) {
    [cam.yaw, cam.pitch, cam.dist, ...cam.target] = state.cam;
    state.cam = null;
  } else fit();
  writeHash();
  await loadView();
  if (state.box) { $('bmin').value = state.box[0].join(','); $('bmax').value = state.box[1].join(','); await queryBox(); }
  if (state.obj !== null) { $('oid').value = state.obj; await queryObject(); }
}

// linkNeuroglancer points "Open in Neuroglancer" at the descriptor's ready
// state; its sources are paths on this server unless --public-url made
// them absolute, and Neuroglancer needs absolute ones.
const NEUROGLANCER = 'https://neuroglancer-demo.appspot.com/';
function linkNeuroglancer() {
  const a = $('nglink');
  a.hidden = !info.neuroglancer;
  if (!info.neuroglancer) return;
  const here = new URL('.', location.href).href.replace(/\/$/, '');
  const json = JSON.stringify(info.neuroglancer.state).replaceAll('"precomputed:///', `"precomputed://${here}/`);
  a.href = NEUROGLANCER + '#!' + encodeURIComponent(json);
}

// ---- input ----
function bindInput() {
  const c = $('view');
  let drag = null;
  c.addEventListener('pointerdown', (e) => { drag = { x: e.clientX, y: e.clientY, pan: e.shiftKey || e.button === 2, moved: false }; c.setPointerCapture(e.pointerId); });
  c.addEventListener('pointermove', (e) => {
    if (!drag) return;
    const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
    if (Math.abs(dx) + Math.abs(dy) > 2) drag.moved = true;
    drag.x = e.clientX; drag.y = e.clientY;
    if (drag.pan) {
      const { r, u } = basis(), s = cam.dist * 0.0015;
      for (let i = 0; i < 3; i++) cam.target[i] += (-dx * r[i] + dy * u[i]) * s;
    } else {
      cam.yaw -= dx * 0.005;
      cam.pitch = Math.max(-1.55, Math.min(1.55, cam.pitch + dy * 0.005));
    }
    viewChanged();
  });
  c.addEventListener('pointerup', (e) => { if (drag && !drag.moved) pick(e); drag = null; });
  c.addEventListener('contextmenu', (e) => e.preventDefault());
  c.addEventListener('wheel', (e) => { e.preventDefault(); cam.dist *= Math.exp(e.deltaY * 0.001); viewChanged(); }, { passive: false });
  c.addEventListener('keydown', (e) => { if (e.key === 'f') fit(); });
  $('fit').onclick = fit;
  $('store').onchange = (e) => { state.box = null; state.obj = null; openStore(e.target.value).catch((err) => setStatus(`error: ${err.message}`, true)); };
  $('level').onchange = (e) => { state.level = e.target.value; loaded = null; writeHash(); loadView(); };
  $('color').onchange = (e) => { state.color = e.target.value; $('cmin').value = ''; $('cmax').value = ''; writeHash(); loadView(); };
  $('budget').onchange = (e) => { state.budget = Math.max(1000, Number(e.target.value) || 1000000); writeHash(); loadView(); };
  $('cmin').onchange = $('cmax').onchange = redraw;
  $('bquery').onclick = queryBox;
  $('oquery').onclick = queryObject;
  window.addEventListener('resize', redraw);
}

// measureFrames draws n frames synchronously and returns ms per frame
// (gl.finish waits for the GPU, or the software rasteriser).
hooks.measureFrames = (n) => {
  const gl = renderer.gl, m = mvp(), s = style(), px = new Uint8Array(4);
  // readPixels forces the frame to finish rasterising (gl.finish alone
  // may return early on some drivers).
  renderer.draw(m, s);
  gl.readPixels(0, 0, 1, 1, gl.RGBA, gl.UNSIGNED_BYTE, px);
  const t0 = performance.now();
  for (let i = 0; i < n; i++) { renderer.draw(m, s); gl.readPixels(0, 0, 1, 1, gl.RGBA, gl.UNSIGNED_BYTE, px); }
  return (performance.now() - t0) / n;
};

// loadSynthetic uploads n random points (frame-time checks without a big store).
hooks.loadSynthetic = (n) => {
  const pos = new Float32Array(n * 3);
  const [lo, hi] = info.bounds;
  for (let i = 0; i < n * 3; i++) pos[i] = lo[i % 3] + Math.random() * (hi[i % 3] - lo[i % 3]);
  renderer.setLayer('data', { pos, size: 1, mode: 'style' });
  redraw();
  return n;
};

async function main() {
  try {
    renderer = new Renderer($('view'));
  } catch (e) {
    setStatus(`error: ${e.message}`, true);
    return;
  }
  bindInput();
  readHash();
  $('budget').value = state.budget;
  try {
    const cat = await fetchJSON('api/v1/stores');
    const sel = $('store');
    for (const s of cat.stores) sel.add(new Option(`${s.name} (${s.geometry_types.join(', ')})`, s.name));
    if (!cat.stores.length) { setStatus('this server has no stores', true); return; }
    if (!cat.stores.some((s) => s.name === state.store)) state.store = cat.stores[0].name;
    sel.value = state.store;
    await openStore(state.store);
  } catch (e) {
    setStatus(`error: ${e.message}`, true);
  }
}

main();
