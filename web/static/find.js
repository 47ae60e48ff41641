// Find object: a layer and an id; the object's levels, the object at its
// finest level and its manifest, framed, highlighted, with its object
// attributes and manifest blocks listed.
import { $, el } from './dom.js';
import { flatten, merge, decode, idKey, idOf, showValue } from './format.js';
import { triangles } from './gl.js';
import { objectURL } from './api.js';
import { retryDelay, retryNote } from './net.js';

const MANIFEST_BLOCKS = 60; // blocks listed; the rest are counted

export class FindTool {
  // app: {cam, layers, net, gpu, renderer, view, layerByName(n), writeURL(), redraw(), announce()}
  constructor(app) {
    this.app = app;
    this.current = null; // {store, id: the object id's canonical decimal}
    this.item = null; // {layer, level, g}: the object drawn over the rest
    this.bounds = null; // its box, once framed
    this.seq = 0;
  }

  clear() {
    this.current = null;
    this.seq++;
    if (this.item) { this.app.renderer.free(this.item.g); this.item = null; }
    for (const l of this.app.layers) l.sel = null;
    $('oresult').textContent = ''; $('oattrs').replaceChildren(); $('manifest').textContent = '';
    this.app.redraw();
  }

  // find looks up the object the panel names; frame: move the camera to
  // it. An answer that says to come back later (a 503 while the store
  // changes, a lost connection) is shown and the same object looked up
  // again as tiles are (retryDelay), unless another find or a clear comes
  // first (attempt: the failures in a row so far, plus one).
  async find(frame = true, attempt = 1) {
    const app = this.app;
    // The id as typed, in digits: never a Number, which rounds ids past 2^53.
    const l = app.layerByName($('olayer').value), id = idOf($('oid').value);
    if (!l || !l.desc) { $('oresult').textContent = 'choose a layer that loaded'; return; }
    if (id === null) { $('oresult').textContent = 'enter an object id (a whole number from 0 to 2^63 − 1)'; return; }
    this.clear();
    const seq = this.seq;
    this.current = { store: l.name, id };
    app.writeURL();
    $('oresult').textContent = `looking up object ${id} in ${l.name}…`;
    $('oresult').className = 'result';
    try {
      const t0 = performance.now();
      const lv = await app.net.json(objectURL(l.ref, id, '/levels'), { kind: 'object', layer: l.name });
      if (!lv.levels.length) throw new Error(`object ${id} is in no level of ${l.name}`);
      const level = lv.levels.includes(0) ? 0 : Math.min(...lv.levels);
      const [res, man] = await Promise.all([
        // Drawn as a tile of its level is: within what a pixel shows there.
        app.net.binary(objectURL(l.ref, id, '', { level, precision: l.precision(level) }), { kind: 'object', layer: l.name, level }),
        app.net.json(objectURL(l.ref, id, '/manifest', { level }), { kind: 'manifest', layer: l.name, level })]);
      await app.gpu;
      if (seq !== this.seq) return;
      const f = flatten([res], '');
      const tris = f.faces && f.faceWidth >= 3 ? triangles(f.faces, f.faceWidth) : null;
      this.item = { layer: l, level, g: app.renderer.upload({ parts: [merge(f.parts)], val: null, ids: null, edges: f.edges, tris }) };
      l.sel = idKey(id);
      $('oresult').textContent = `object ${id} · ${l.name} · level ${level} · ${f.rows.toLocaleString()} vertices · ${(performance.now() - t0).toFixed(0)} ms\nin levels ${lv.levels.join(', ')}`;
      app.announce(`found object ${id} in ${l.name}: ${f.rows.toLocaleString()} vertices at level ${level}`);
      const oa = res.trailer.object_attributes || {};
      const rows = Object.entries(oa).map(([k, v]) => el('tr', {}, el('td', { textContent: k }), el('td', { textContent: showValue(v) })));
      $('oattrs').replaceChildren(rows.length ? el('table', {}, ...rows) : el('div', { className: 'note', textContent: 'no object attributes at this level' }));
      const frags = man.blocks.reduce((n, b) => n + b.fragments.length, 0);
      $('manifest').textContent = `manifest: ${man.blocks.length} blocks, ${frags} fragments\n` +
        man.blocks.slice(0, MANIFEST_BLOCKS).map((b) => `chunk ${b.chunk.join('.')} mode ${b.mode}: ` + b.fragments.map((x) => `#${x.fragment}(${x.count})`).join(' ')).join('\n') +
        (man.blocks.length > MANIFEST_BLOCKS ? `\n… ${man.blocks.length - MANIFEST_BLOCKS} more blocks` : '');
      if (frame && f.rows) {
        const lo = [Infinity, Infinity, Infinity], hi = [-Infinity, -Infinity, -Infinity];
        const pos = decode(f.parts);
        for (let i = 0; i < pos.length; i++) { const k = i % 3; lo[k] = Math.min(lo[k], pos[i]); hi[k] = Math.max(hi[k], pos[i]); }
        this.bounds = [lo, hi];
        app.view.info();
        app.cam.fit(lo, hi);
        app.cam.dist = Math.max(app.cam.dist, l.spacing(0) * 4);
        app.view.moved();
      }
      app.redraw();
    } catch (e) {
      if (seq !== this.seq) return;
      const wait = retryDelay(e, attempt);
      $('oresult').textContent = `object ${id} in ${l.name}: ${e.message}${retryNote(e, wait)}`;
      app.announce($('oresult').textContent);
      $('oresult').className = 'result error';
      if (wait !== null) {
        setTimeout(() => {
          if (seq !== this.seq || !app.layers.includes(l)) return;
          $('olayer').value = l.name; $('oid').value = id; // the object asked about, whatever was typed since
          this.find(frame, attempt + 1);
        }, wait);
      }
    }
  }
}
