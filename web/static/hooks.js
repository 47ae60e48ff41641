// What the browser tests (and a curious user in the console) read and do
// on window.__zvf: the state of the page (ready, settled, drawn, …) is
// set where it changes; these are the functions.
import { project } from './math.js';
import { boundsCheck } from './layer.js';

export function installHooks(app) {
  const hooks = app.hooks, cam = app.cam;
  hooks.net = app.net;
  hooks.requests = app.net.log;

  // measureFrames draws n frames synchronously and returns ms per frame
  // (readPixels waits for the GPU, or the software rasteriser, to finish).
  hooks.measureFrames = (n) => {
    const gl = app.renderer.gl, v = app.view.info(), { out } = app.draw.items(null), px = new Uint8Array(4);
    app.renderer.draw(v, out);
    gl.readPixels(0, 0, 1, 1, gl.RGBA, gl.UNSIGNED_BYTE, px);
    const t0 = performance.now();
    for (let i = 0; i < n; i++) { app.renderer.draw(v, out); gl.readPixels(0, 0, 1, 1, gl.RGBA, gl.UNSIGNED_BYTE, px); }
    return (performance.now() - t0) / n;
  };

  // coverage draws each visible layer alone and counts its pixels.
  hooks.coverage = () => {
    const v = app.view.info(), out = {};
    for (const l of app.layers) {
      if (!l.visible) continue;
      app.renderer.draw(v, app.draw.items(l).out);
      out[l.name] = app.renderer.coverage();
    }
    app.draw.frame();
    return out;
  };

  // vertexOnScreen: a drawn vertex of the layer, near the middle of the
  // view, that a click at its position picks (CSS pixels relative to the
  // canvas).
  hooks.vertexOnScreen = (name) => {
    const m = app.view.info().mvp, W = cam.width, H = cam.height, cands = [];
    for (const d of app.drawList()) {
      if (d.l.name !== name || !d.l.visible) continue;
      for (let i = 0; i < d.t.count; i += Math.max(1, d.t.count >> 8)) {
        const pos = d.t.coords.pos, p = [pos[3 * i], pos[3 * i + 1], pos[3 * i + 2]];
        const s = project(m, p, W, H);
        if (s.w > 0 && s.x > 20 && s.y > 20 && s.x < W - 20 && s.y < H - 40) cands.push({ x: s.x, y: s.y, dd: (s.x - W / 2) ** 2 + (s.y - H / 2) ** 2 });
      }
    }
    cands.sort((a, b) => a.dd - b.dd);
    for (const c of cands.slice(0, 200)) {
      const hit = app.pick.at(c.x, c.y);
      if (hit && hit.d.l.name === name && hit.dd < 1) return { x: c.x, y: c.y, pos: hit.pos, level: hit.d.t.level };
    }
    return null;
  };

  hooks.setCamera = (c) => {
    Object.assign(cam, c);
    if (c.target) cam.target = [...c.target];
    app.view.moved();
    app.stream.update();
  };
  hooks.camera = () => ({ yaw: cam.yaw, pitch: cam.pitch, dist: cam.dist, target: [...cam.target], fov: cam.fov, width: cam.width, height: cam.height });
  hooks.project = (p) => project(app.view.info().mvp, p, cam.width, cam.height);
  hooks.findBounds = () => app.find.bounds;
  hooks.labels = () => (app.overlay ? app.overlay.labels : []);
  hooks.picked = () => app.pick.current;
  hooks.cached = () => [...app.tiles.map.values()].map((t) => `${t.key} ${t.state}`);
  // layers: each layer's bounds and colour range (null until known).
  // The bounds check's limit, for tests of a store too large to check.
  hooks.boundsCheck = boundsCheck;
  hooks.layers = () => app.layers.map((l) => ({ name: l.name, bounds: l.desc ? l.desc.bounds : null, range: l.range, provisional: l.provisional }));
  // overview: each layer's density overview drawn (box, level, cells).
  hooks.overview = () => app.density.info();
  // census: each drawn tile's vertices the GPU keeps (Renderer.census),
  // and those a pick considers, counted per child cell of its mask (one
  // cell when it has none) by their positions in float64, with each
  // cell's closed box as a request for it would give it.
  hooks.census = () => {
    const list = app.drawList().filter((d) => d.l.visible), v = app.view.info();
    const items = list.map((d) => app.draw.items(d.l).out.find((it) => it.g === d.t.g));
    const kept = app.renderer.census(v, items);
    app.draw.frame();
    return list.map((d, k) => {
      const grid = d.l.grid, box = grid.requestBox(d.t.node), m = d.mask;
      const n = m ? m.n : [1, 1, 1], cells = [];
      for (let x = 0; x < n[0]; x++) for (let y = 0; y < n[1]; y++) for (let z = 0; z < n[2]; z++) {
        const c = [x, y, z], min = [], max = [];
        for (let i = 0; i < 3; i++) {
          min.push(m ? Math.max(m.lo[i] + m.size[i] * c[i], box.min[i]) : box.min[i]);
          max.push(m && c[i] < n[i] - 1 ? Math.min(grid.prev(m.lo[i] + m.size[i] * (c[i] + 1)), box.max[i]) : box.max[i]);
        }
        const b = (x * n[1] + y) * n[2] + z;
        cells.push({ min, max, masked: !!m && ((m.bits[b >> 5] >>> (b & 31)) & 1) === 1, kept: 0, pickable: 0 });
      }
      for (let i = 0; i < d.t.count; i++) {
        const p = d.t.coords.at(i);
        const c = [0, 1, 2].map((j) => (m ? Math.min(n[j] - 1, Math.max(0, Math.floor((p[j] - m.lo[j]) / (m.size[j] || 1e-30)))) : 0));
        const cell = cells[(c[0] * n[1] + c[1]) * n[2] + c[2]];
        cell.kept += kept[k][i];
        if (!app.pick.hidden(d, i)) cell.pickable++;
      }
      return { layer: d.l.name, level: d.t.level, count: d.t.count, cells };
    });
  };
  hooks.tiles = () => app.drawList().map((d) => ({ layer: d.l.name, level: d.t.level, lo: d.t.node.lo, hi: d.t.node.hi, count: d.t.count, masked: !!d.mask, decoded: d.t.coords.decoded, posBytes: d.t.g ? d.t.g.posBytes : null, parts: d.t.g ? d.t.g.parts.length : null }));
}
