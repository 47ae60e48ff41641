// zvfserve viewer: several stores as layers in one scene, streamed by view
// (the tiles the camera sees, at the level whose density fits the screen,
// coarse first, within a vertex budget shared by the layers), with
// picking, object lookup, box queries, and the page state in the URL.
//
// This module makes the page's parts and joins them (docs/viewer.md has
// the map): each part gets the app object and reaches the others through
// it, so no module imports another's state.
import { Camera } from './math.js';
import { Renderer } from './gl.js';
import { Net, retryDelay, retryNote } from './net.js';
import { Overlay } from './overlay.js';
import { $ } from './dom.js';
import { catalogURL } from './api.js';
import { Layer } from './layer.js';
import { TileCache } from './tiles.js';
import { Streamer } from './stream.js';
import { Drawer } from './draw.js';
import { View } from './view.js';
import { Cards } from './cards.js';
import { SelectionTool } from './filter.js';
import { DensityOverview } from './density.js';
import { autoRanges } from './legend.js';
import { freeColour, paletteColour } from './colour.js';
import { PickTool } from './pick.js';
import { FindTool } from './find.js';
import { BoxTool } from './box.js';
import { bindInput } from './input.js';
import { readURL, writeURL, DEFAULT_BUDGET } from './urlstate.js';
import { installHooks } from './hooks.js';

const MAX_DEFAULT_LAYERS = 8; // colour.js has a colour for each

// hooks: the page's state as the browser tests (and the console) read it.
const hooks = {
  ready: false, firstPictureMs: null, firstDataMs: null, firstTileMs: null, settled: false, pending: 0,
  drawn: {}, drawnLevels: {}, drawnEdges: {}, drawnFaces: {}, frames: 0,
  announced: [], // what the live region said, oldest first (the latest ANNOUNCED_MAX)
};
window.__zvf = hooks;

const statusEl = $('status'), announceEl = $('announce');
const ANNOUNCED_MAX = 100;
let statusError = '';
let gpuReady;

const app = {
  hooks,
  canvas: $('view'),
  cam: new Camera(),
  net: new Net(() => setStatus('waiting for the access token…'), (name) => storeChanged(name)),
  renderer: null, overlay: null,
  gpu: new Promise((resolve) => { gpuReady = resolve; }), // resolves once the shaders are linked
  layers: [], catalog: null, budget: DEFAULT_BUDGET, size: 1,
  camFromURL: null, fitted: false,

  layerByName: (name) => app.layers.find((l) => l.name === name),
  drawList: () => app.stream.drawList,
  redraw: () => app.draw.redraw(),
  scheduleUpdate: () => app.stream.schedule(),
  writeURL: () => writeURL({ layers: app.layers, budget: app.budget, size: app.size, cam: app.cam, box: app.box.box, blevel: $('blevel').value, find: app.find.current }),
  setStatus, statusError: () => statusError, announce,
  addLayer, removeLayer,
  // After each tile selection: the automatic colour ranges of what is drawn.
  onTiles: (layers) => autoRanges(app, layers, (l) => app.stream.queued(l)),
  onTileError: (l) => {
    app.cards.showError(l);
    const first = l.tileErrors.values().next();
    if (!first.done) announce(`${l.name}: ${l.tileErrors.size > 1 ? `${l.tileErrors.size} tiles failed, the first: ` : ''}${first.value}`);
  },
};
app.tiles = new TileCache(() => app.renderer);
app.stream = new Streamer(app);
app.draw = new Drawer(app);
app.view = new View(app);
app.cards = new Cards(app);
app.selection = new SelectionTool(app);
app.density = new DensityOverview(app);
app.pick = new PickTool(app);
app.find = new FindTool(app);
app.box = new BoxTool(app);

// setStatus shows msg on the status line, which changes with every frame
// while tiles load (counts, bytes): it is no live region. An error is
// also announced.
function setStatus(msg, isErr) {
  statusError = isErr ? msg : '';
  if (isErr) announce(msg);
  statusEl.textContent = msg;
  statusEl.className = isErr ? 'error' : '';
}

// announce tells a screen reader msg (the live region, polite): what a
// user waits for — the view loaded, with its count; a query's, lookup's
// or pick's answer; an error — never the progress between. The same
// message twice in a row is said once.
function announce(msg) {
  if (!msg || hooks.announced[hooks.announced.length - 1] === msg) return;
  hooks.announced.push(msg);
  if (hooks.announced.length > ANNOUNCED_MAX) hooks.announced.shift();
  announceEl.textContent = msg;
}

// ---- layers ----

// addLayer adds store name as a layer set up as o says; rgb: its colour
// unless o names one (by default one no layer has).
function addLayer(name, o = {}, rgb = freeColour(app.layers)) {
  if (app.layerByName(name)) return null;
  const l = new Layer(name, rgb, o);
  app.layers.push(l);
  app.cards.build(l);
  app.cards.refreshObjectLayers();
  l.described = describe(l, 1);
  return l;
}

function removeLayer(l) {
  app.tiles.dropLayer(l);
  app.density.forget(l);
  app.selection.cancelRetry(l);
  app.layers = app.layers.filter((x) => x !== l);
  l.card.remove();
  app.box.freeHits(l);
  if (app.find.current && app.find.current.store === l.name) app.find.clear();
  if (app.pick.current && app.pick.current.store === l.name) app.pick.clear();
  app.cards.refreshObjectLayers();
  app.cards.refreshAddList();
  app.writeURL();
  app.scheduleUpdate();
}

// describe loads the layer's descriptor, fills its card and, once every
// layer has answered, frames the scene (or takes the URL's camera). A
// failure the server says will pass (a store changing, a backend down,
// too many requests) is shown and asked again when it says, later each
// time, while the layer is in the page; the page goes on meanwhile (this
// attempt's promise is what start-up waits for).
async function describe(l, attempt, again = false) {
  let wait = null;
  try {
    await l.describe(app.net);
    l.error = '';
  } catch (e) {
    wait = retryDelay(e, attempt);
    l.error = `${l.name}: ${e.message}${retryNote(e, wait)}`;
    announce(l.error);
    l.desc = null;
    l.grid = null;
  }
  l.loading = false;
  l.retrying = wait !== null;
  app.cards.fill(l);
  app.cards.refreshObjectLayers();
  if (!app.fitted && app.layers.every((x) => !x.loading)) {
    app.fitted = true;
    if (app.camFromURL) app.view.apply(app.camFromURL); else app.view.fit();
  } else if (!again && l.desc && app.fitted && app.layers.every((x) => x === l || !x.desc)) {
    // The only layer with bounds (added to an empty page, or the first to
    // answer a retry): the view was framed on nothing. After a retry, the
    // link's camera, if it has one, is taken now (checked against these
    // bounds: View.apply).
    if (attempt > 1 && app.camFromURL) app.view.apply(app.camFromURL); else app.view.fit();
  }
  app.scheduleUpdate();
  app.redraw();
  if (wait !== null) setTimeout(() => { if (app.layers.includes(l)) describe(l, attempt + 1, again); }, wait);
}

// AGAIN_MS: how soon a layer's descriptor is read again after the last
// time a change of its store made it so (a replica that has not seen the
// change yet answers the old version: asked again a little later).
const AGAIN_MS = 1000;

// storeChanged: a request of layer name's was planned on a version of its
// store the server no longer serves (410 store-changed). The layer's
// tiles and counts, of that version, are forgotten, its descriptor is
// read again (revalidated: the new version's), and the view asks for its
// tiles, and the box query its hits, under the new version; the camera
// stays. Once at a time a layer.
function storeChanged(name) {
  const l = app.layerByName(name);
  if (!l || l.reloading) return;
  l.reloading = true;
  l.loading = true; // not settled meanwhile
  const wait = performance.now() - (l.reloadedAt ?? -Infinity) < AGAIN_MS ? AGAIN_MS : 0;
  setTimeout(async () => {
    if (!app.layers.includes(l)) return;
    app.tiles.dropLayer(l);
    app.density.forget(l);
    app.box.freeHits(l);
    for (const m of [l.counts, l.byNode, l.tileErrors, l.tileFailures]) m.clear();
    l.grid = null; // no tiles asked for until the descriptor is read
    await describe(l, 1, true);
    l.reloading = false;
    l.reloadedAt = performance.now();
    app.box.requery();
  }, wait);
}

// ---- start ----

async function main() {
  hooks.marks = [['main', performance.now()]];
  installHooks(app);
  bindInput(app);
  const u = readURL(location);
  app.budget = u.budget;
  app.size = u.size;
  app.camFromURL = u.cam;
  app.box.box = u.box;
  if (u.blevel) $('blevel').value = u.blevel;
  $('budget').value = app.budget;
  $('size').value = app.size;
  if (u.box) { $('bmin').value = u.box[0].join(','); $('bmax').value = u.box[1].join(','); }
  // Layers named in the URL start at once, with the catalog alongside.
  // Each the colour of its place in the list, as writeURL expects.
  for (const w of u.layers) addLayer(w.name, w.o, paletteColour(app.layers.length));
  let catalog;
  for (let attempt = 1; !catalog; attempt++) {
    try {
      catalog = await app.net.json(catalogURL(), { kind: 'catalog' });
    } catch (e) {
      const wait = retryDelay(e, attempt);
      setStatus(`error: the catalog: ${e.message}${retryNote(e, wait)}`, true);
      if (wait === null) return;
      await new Promise((r) => setTimeout(r, wait));
    }
  }
  setStatus('loading…');
  app.catalog = catalog;
  if (!catalog.stores.length) { setStatus('this server has no stores', true); return; }
  if (!u.layers.length) {
    const ok = catalog.stores.filter((s) => s.status !== 'error');
    for (const s of (ok.length ? ok : catalog.stores).slice(0, MAX_DEFAULT_LAYERS)) addLayer(s.name, {});
  }
  app.cards.refreshAddList();
  app.writeURL();
  await Promise.all(app.layers.map((l) => l.described));
  // The GL context comes after the first tiles are asked for: creating it
  // can take a software renderer a second or two, during which the
  // answers arrive.
  app.stream.update();
  hooks.marks.push(['requested', performance.now()]);
  try {
    app.renderer = new Renderer(app.canvas);
    app.overlay = new Overlay($('overlay'));
  } catch (e) {
    setStatus(`error: ${e.message}`, true);
    return;
  }
  hooks.marks.push(['context', performance.now()]);
  // A lost context (a GPU reset, too many contexts) leaves the canvas blank
  // under a status line that says all is drawn: say so, and when the
  // browser gives it back, load the page again (the URL holds the view;
  // the tiles' arrays left the page once on the GPU).
  app.canvas.addEventListener('webglcontextlost', (e) => {
    e.preventDefault(); // without this the browser never gives it back
    app.renderer.linked = false; // no frame is drawn meanwhile
    setStatus('error: the graphics context was lost (the GPU reset?); the view is drawn again when the browser restores it', true);
  });
  app.canvas.addEventListener('webglcontextrestored', () => { app.writeURL(); location.reload(); });
  try {
    await app.renderer.ready();
  } catch (e) {
    setStatus(`error: ${e.message}`, true);
    return;
  }
  hooks.marks.push(['linked', performance.now()]);
  gpuReady();
  app.redraw();
  if (app.box.box) app.box.query();
  if (u.find && app.layerByName(u.find.store)) {
    $('olayer').value = u.find.store;
    $('oid').value = u.find.id;
    app.find.find(!app.camFromURL);
  }
}

main();
