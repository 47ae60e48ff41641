// Box query: typed corners, or a rectangle drawn on the view; every
// visible layer is asked for the box (with its filter and sample) at the
// chosen level, and its count, level, time and bytes listed; the hits are
// drawn white, the box yellow.
import { $, el } from './dom.js';
import { ray } from './math.js';
import { flatten } from './format.js';
import { bboxURL } from './api.js';
import { retryDelay, retryNote } from './net.js';

// fmtBytes: a size for people (the exact count is the cell's title).
function fmtBytes(n) {
  if (n < 1e3) return `${n} B`;
  if (n < 1e6) return `${(n / 1e3).toFixed(1)} kB`;
  return `${(n / 1e6).toFixed(2)} MB`;
}

function parseTriple(s) {
  const v = s.split(',').map((x) => Number(x.trim()));
  return v.length === 3 && v.every(Number.isFinite) ? v : null;
}

export class BoxTool {
  // app: {cam, layers, net, gpu, renderer, view, budget, writeURL(), redraw(), announce()}
  constructor(app) {
    this.app = app;
    this.box = null; // [min, max]
    this.hits = []; // {layer, level, g}
    this.seq = 0;
    this.drawing = false; // the next drag draws a box
    this.rubber = null; // the rectangle being drawn, in CSS pixels
  }

  clear() {
    this.seq++; // a query in flight or due again is dropped
    this.box = null;
    this.freeHits();
    $('bresult').replaceChildren();
    this.app.writeURL();
    this.app.redraw();
  }

  freeHits(only) {
    this.hits = this.hits.filter((h) => {
      if (only && h.layer !== only) return true;
      this.app.renderer.free(h.g);
      return false;
    });
  }

  setDrawing(on) {
    this.drawing = on;
    $('bdraw').setAttribute('aria-pressed', String(on));
    $('view').classList.toggle('drawing', on);
  }

  // query asks every visible layer for the box the panel holds. When a
  // layer's answer says to come back later (a 503 while its store
  // changes, a lost connection), its row says so and the query is made
  // again as tiles are (retryDelay), unless another query or a clear
  // comes first (attempt: the failures in a row so far, plus one).
  async query(attempt = 1) {
    const app = this.app;
    const min = parseTriple($('bmin').value), max = parseTriple($('bmax').value);
    if (!min || !max) { $('bresult').textContent = 'enter min and max as three comma-separated numbers'; return; }
    if (min.some((v, i) => v > max[i])) { $('bresult').textContent = 'each min must be at most its max'; return; }
    this.freeHits();
    this.box = [min, max];
    app.writeURL();
    const level = $('blevel').value;
    const layers = app.layers.filter((l) => l.visible && l.desc);
    const seq = ++this.seq;
    $('bresult').textContent = 'querying…';
    const rows = await Promise.all(layers.map(async (l) => {
      const lv = level === 'auto' || l.desc.levels.some((x) => String(x.level) === level) ? level : '0';
      const t0 = performance.now();
      try {
        // With the layer's filter and sample: the hits are rows it draws.
        const url = bboxURL(l.ref, { min, max, dims: l.desc.dims, level: lv, limit: app.budget, connectivity: false, filter: l.filter || undefined, sample: l.sample });
        const res = await app.net.binary(url, { kind: 'box', layer: l.name });
        const ms = performance.now() - t0;
        const f = flatten([res], '');
        await app.gpu;
        if (seq === this.seq && f.rows) this.hits.push({ layer: l, level: res.header.level, g: app.renderer.upload({ parts: f.parts }) });
        const count = res.trailer.next ? `${res.trailer.count.toLocaleString()}+ (more pages)` : (res.trailer.number_matched ?? res.trailer.count).toLocaleString();
        return { cells: [l.name, count, String(res.header.level), `${ms.toFixed(0)} ms`, fmtBytes(res.bytes)], bytes: res.bytes };
      } catch (e) {
        const wait = retryDelay(e, attempt);
        return { cells: [l.name, `${e.message}${retryNote(e, wait)}`, '', '', ''], wait };
      }
    }));
    if (seq !== this.seq) return;
    const waits = rows.map((r) => r.wait).filter((w) => w !== undefined && w !== null);
    if (waits.length) {
      const [bmin, bmax] = [$('bmin').value, $('bmax').value];
      setTimeout(() => {
        if (seq !== this.seq) return;
        $('bmin').value = bmin; $('bmax').value = bmax; // the box asked about, whatever was typed since
        this.query(attempt + 1);
      }, Math.max(...waits));
    }
    const head = el('tr', {}, ...['layer', 'vertices', 'level', 'time', 'bytes'].map((h) => el('th', { textContent: h })));
    const tr = (r) => {
      const row = el('tr', {}, ...r.cells.map((x) => el('td', { textContent: x })));
      if (r.bytes !== undefined) {
        row.lastChild.dataset.bytes = r.bytes;
        row.lastChild.title = `${r.bytes.toLocaleString()} bytes`;
      }
      return row;
    };
    $('bresult').replaceChildren(el('table', {}, head, ...rows.map(tr)));
    app.announce(`box query: ${rows.map((r) => `${r.cells[0]} ${r.cells[1]}${r.cells[2] ? ` vertices at level ${r.cells[2]}` : ''}`).join('; ') || 'no visible layer'}`);
    app.redraw();
  }

  // requery: a layer's selection (filter, sample) changed; the box in use
  // is asked for again, so its rows and hits are what the layers draw.
  requery() {
    if (!this.box) return;
    $('bmin').value = this.box[0].join(','); $('bmax').value = this.box[1].join(',');
    this.query();
  }

  // rect turns a rectangle drawn on the view into a box of the scene:
  // across the screen, the rectangle where it meets the plane through the
  // view's centre; along the axis nearest the line of sight, the whole
  // scene. Seen along an axis (Top, Front, Side) that is the box drawn.
  rect(x0, y0, x1, y1) {
    const { cam, view } = this.app;
    view.info();
    const [slo, shi] = view.sceneBounds();
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

  // drawn: a rectangle was dragged; query the box it makes.
  drawn(x0, y0, x1, y1) {
    const b = this.rect(Math.min(x0, x1), Math.min(y0, y1), Math.max(x0, x1), Math.max(y0, y1));
    if (b) { $('bmin').value = b[0].join(','); $('bmax').value = b[1].join(','); this.query(); }
  }
}
