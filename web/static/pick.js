// Picking: the drawn vertex under a click, its layer, level, position and
// object in a box over the view, then every vertex attribute at that level
// (a box query of exactly that point).
import { $ } from './dom.js';
import { masked } from './lod.js';
import { bboxURL } from './api.js';
import { idKey, idOf, exactJSON, showJSON, showID } from './format.js';

const PICK_PX = 8; // how near a click must be to a vertex
const PICK_ROWS = 16; // the vertices at a picked position listed, at most

export class PickTool {
  // app: {cam, layers, net, view, find, drawList(), redraw(), announce()}
  constructor(app) {
    this.app = app;
    this.current = null; // {store, level, pos, oid: the object id's decimal, or null}
    this.seq = 0;
  }

  // at finds the drawn vertex nearest to CSS pixel (px, py), within
  // radius (PICK_PX); of vertices about as near, the one closest to the eye.
  at(px, py, radius = PICK_PX) {
    const app = this.app, m = app.view.info().mvp, W = app.cam.width, H = app.cam.height;
    let best = null;
    for (const d of app.drawList()) {
      if (!d.l.visible) continue;
      const p = d.t.coords.pos; // decoded on the first pick
      for (let i = 0, n = d.t.count; i < n; i++) {
        const X = p[3 * i], Y = p[3 * i + 1], Z = p[3 * i + 2];
        const w = m[3] * X + m[7] * Y + m[11] * Z + m[15];
        if (w <= 0) continue;
        const sx = ((m[0] * X + m[4] * Y + m[8] * Z + m[12]) / w + 1) / 2 * W, sy = (1 - (m[1] * X + m[5] * Y + m[9] * Z + m[13]) / w) / 2 * H;
        const dd = (sx - px) ** 2 + (sy - py) ** 2;
        if (dd > radius * radius || (best && dd > best.dd + 4) || (best && dd > best.dd - 4 && w >= best.w)) continue;
        if (this.hidden(d, i)) continue;
        best = { dd, w, d, i, pos: [X, Y, Z], sx, sy };
      }
    }
    return best;
  }

  // hidden: vertex i of drawn tile d lies in a child its mask leaves out,
  // as the fragment shader decides it: by its position in float64 (the
  // decoded float32 is a whole unit off at 10^7, across a face).
  hidden(d, i) {
    return !!d.mask && masked(d.mask, d.t.coords.at(i));
  }

  clear() {
    const app = this.app;
    this.current = null;
    this.seq++;
    $('pickbox').hidden = true;
    $('picked').textContent = '';
    for (const l of app.layers) l.sel = app.find.current && app.find.current.store === l.name ? idKey(app.find.current.id) : null;
    app.redraw();
  }

  async show(hit) {
    const app = this.app, seq = ++this.seq;
    $('pickbox').hidden = false;
    if (!hit) { this.current = null; $('picked').textContent = `nothing here: no drawn vertex within ${PICK_PX} pixels`; app.announce($('picked').textContent); app.redraw(); return; }
    const l = hit.d.l, t = hit.d.t;
    // The id exactly, from the tile's int64s (−1: no object); the
    // highlight draws its key.
    const id = t.ids ? t.ids[hit.i] : null, oid = id === null || id === -1n ? null : id.toString();
    this.current = { store: l.name, level: t.level, pos: hit.pos, oid };
    for (const x of app.layers) x.sel = null;
    if (oid !== null) {
      l.sel = idKey(id);
      // Only an id the API looks up goes to Find (a negative one is not).
      if (idOf(oid) !== null) { $('olayer').value = l.name; $('oid').value = oid; }
    }
    app.redraw();
    // The position drawn is quantized (within the tile's precision): it is
    // marked ≈ until the server gives the stored one.
    const p = l.tileQuery(t.level).precision || 0;
    const head = [`layer ${l.name} · level ${t.level}`, `position ${p > 0 ? '≈ ' : ''}${hit.pos.map((v) => +v.toPrecision(7)).join(', ')}`];
    if (t.ids) head.push(oid !== null ? `object ${oid}` : 'object none');
    $('picked').textContent = head.join('\n') + '\nattributes: loading…';
    // Every attribute of the vertex at the level drawn: a box around the
    // vertex exactly (as drawn: within the tile's precision and a float32
    // rounding), with all attributes; with the layer's filter and sample,
    // so a vertex the layer hides there is not listed as if picked.
    const q = { min: hit.pos.map((v) => v - p - Math.abs(v) * 2 ** -23), max: hit.pos.map((v) => v + p + Math.abs(v) * 2 ** -23), dims: l.desc.dims, level: t.level, limit: PICK_ROWS, filter: l.filter || undefined, sample: l.sample };
    const meta = { kind: 'pick', layer: l.name, level: t.level };
    try {
      // Exactly: an object id (or an int64 attribute) past 2^53 is a BigInt.
      const r = await app.net.json(bboxURL(l.ref, { ...q, attributes: '*', format: 'json' }), meta, undefined, exactJSON);
      if (seq !== this.seq) return;
      // Where the browser rounded ids or int64 values past 2^53 (no JSON
      // source text), the same rows in binary carry them as int64s.
      if (rounded(r)) {
        await exactRows(app.net, l.ref, q, meta, r);
        if (seq !== this.seq) return;
      }
      const lines = [...head];
      // The stored position, as the server holds it: of the vertices
      // found when they share it, else of each (within the precision).
      const at = (i) => (r.vertices && r.vertices[i] ? r.vertices[i].map(showJSON).join(', ') : null);
      const shared = r.count > 0 && at(0) && Array.from({ length: r.count }, (_, i) => at(i)).every((v) => v === at(0));
      if (shared) lines[1] = `position ${at(0)}`;
      const names = Object.keys(r.attributes || {});
      if (r.count > 1) lines.push(`${r.count} vertices at this position`);
      for (let i = 0; i < r.count; i++) {
        if (r.count > 1) lines.push(`— vertex ${i + 1}${r.object_ids ? ` (object ${showID(r.object_ids[i])})` : ''}${!shared && at(i) ? ` at ${at(i)}` : ''}`);
        if (!names.length) lines.push(`level ${t.level} holds no vertex attributes`);
        for (const n of names) lines.push(`${n} = ${showJSON(r.attributes[n][i])}`);
      }
      if (!r.count) lines.push('the server found no vertex here (the store changed?)');
      $('picked').textContent = lines.join('\n');
      app.announce(`picked: ${lines.join('; ')}`);
    } catch (e) {
      if (seq !== this.seq) return;
      $('picked').textContent = head.join('\n') + `\nattributes: ${e.message}`;
      app.announce(`picked: ${head.join('; ')}; attributes: ${e.message}`);
    }
  }
}

// rounded: JSON answer r holds a whole number a Number could not hold
// exactly (an object id or an int64 value past 2^53, parsed without
// source text).
const inexact = (v) => (Array.isArray(v) ? v.some(inexact) : typeof v === 'number' && Number.isInteger(v) && !Number.isSafeInteger(v));
const rounded = (r) => inexact(r.object_ids || []) || Object.values(r.attributes || {}).some(inexact);

// exactRows puts into r (the JSON answer of box query q, with every
// attribute) the object ids and int64 attribute values of the same query's
// binary answer, which carries them as int64s: the same query answers the
// same rows in the same order, and each value taken is checked to round
// to the JSON's. What cannot be taken (the request failed, the rows
// differ) stays as it was: ids shown ≈.
async function exactRows(net, store, q, meta, r) {
  let page;
  try {
    page = await net.binary(bboxURL(store, { ...q, attributes: '*', connectivity: false }), meta);
  } catch {
    return;
  }
  if (page.rows !== r.count) return;
  const same = (big, v) => Number(big) === v;
  const ids = page.batches.flatMap((b) => (b.ids ? [...b.ids] : []));
  if (r.object_ids && ids.length === r.count && ids.every((v, i) => same(v, Number(r.object_ids[i])))) r.object_ids = ids;
  (page.header.attribute_info || []).forEach((info, a) => {
    const json = r.attributes && r.attributes[info.name];
    if (!json || !/^u?int64$/.test(info.dtype)) return;
    const c = info.channels || 1, vals = page.batches.flatMap((b) => (b.attrs[a] ? [...b.attrs[a]] : []));
    if (vals.length !== r.count * c) return;
    for (let i = 0; i < r.count; i++) {
      const row = vals.slice(i * c, (i + 1) * c), v = json[i];
      if (c === 1 && same(row[0], v)) json[i] = row[0];
      else if (c > 1 && Array.isArray(v) && v.length === c && row.every((x, k) => same(x, v[k]))) json[i] = row;
    }
  });
}
