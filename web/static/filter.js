// A layer's selection: its CQL2 filter box (the store's queryables as
// hints) and, for line stores, its sample slider. Both go into every tile
// URL of the layer (Layer.tileQuery) and the page URL (f.NAME, s.NAME).
import { el } from './dom.js';
import { countURL, queryablesURL } from './api.js';
import { retryDelay, retryNote, hopeless } from './net.js';

// The geometries whose objects are lines: sampling keeps whole objects,
// which thins a tangle of streamlines; points and meshes are not sampled.
const LINE_GEOMETRIES = new Set(['streamline', 'streamlines', 'polyline', 'polylines', 'line', 'lines', 'skeleton', 'skeletons', 'graph']);

export const takesSample = (desc) => (desc.geometry_types || []).some((g) => LINE_GEOMETRIES.has(g));

// MAX_HINT_LABELS: a categorical's labels listed in the hints, at most.
const MAX_HINT_LABELS = 12;

// probeFilter asks each level that holds vertices whether it takes filter:
// a count over a box of one point (the server checks a filter against the
// level before reading anything, so this costs no scan). Coarse levels
// often lack the attributes level 0 has; those levels are left out of the
// layer's tiles. {levels: the levels that take it, error: why the level
// the layer is fixed at, or else the finest, refused it; '' when the
// layer can draw with it}.
export async function probeFilter(net, l, filter) {
  const d = l.desc, levels = d.levels.filter((x) => x.vertex_count > 0).map((x) => x.level).sort((a, b) => a - b);
  const at = d.bounds[0];
  const errors = await Promise.all(levels.map((level) =>
    net.json(countURL(l.ref, { min: at, max: at, dims: d.dims, level, filter }), { kind: 'filter', layer: l.name, level })
      .then(() => null, (e) => e)));
  // A level that said to come back later (503 while the store changes,
  // 429, a lost connection) has not refused the filter: the question is
  // asked again (the caller's error), not answered no; nor has one whose
  // storage refused the server (hopeless: the caller says so).
  const later = errors.find((e) => e && (retryDelay(e, 1) !== null || hopeless(e)));
  if (later) throw later;
  const answers = errors.map((e) => e && (e.detail || e.message));
  const ok = new Set(levels.filter((_, i) => answers[i] === null));
  let error = '';
  if (l.level !== 'auto') error = ok.has(Number(l.level)) ? '' : answers[levels.indexOf(Number(l.level))] || `level ${l.level} holds no vertices`;
  else if (!ok.size) error = answers.find((a) => a !== null) || 'no level holds vertices';
  return { levels: ok, error };
}

export class SelectionTool {
  // app: {net, writeURL(), scheduleUpdate(), redraw(), cards, box}
  constructor(app) {
    this.app = app;
    this.queryables = new Map(); // store|version -> Promise of its queryables' schema
    this.checking = 0; // filters being asked about
    this.waiting = 0; // filters to be asked about again (retry)
    this.lists = 0; // datalists made
  }

  get busy() { return this.checking > 0 || this.waiting > 0; }

  // rows: the card's filter and sample rows for layer l.
  rows(l) {
    // Its own id: store names that differ only in a character an id
    // cannot hold (a.b, a_b) must not share one.
    const list = `ql-${++this.lists}`;
    const f = el('input', { className: 'filter', placeholder: 'filter (CQL2)', spellcheck: false, value: l.filterText });
    f.setAttribute('list', list);
    f.setAttribute('aria-label', `filter ${l.name}`);
    f.title = 'CQL2 text; applied on Enter or when you leave the box; empty: every vertex';
    f.onfocus = () => this.hints(l);
    f.onchange = () => this.applyFilter(l, f.value);
    const s = el('input', { type: 'range', className: 'sample', min: 0.01, max: 1, step: 0.01, value: l.sample });
    s.setAttribute('aria-label', `sample ${l.name}`);
    const out = el('output', { className: 'sampleval', textContent: pct(l.sample) });
    s.oninput = () => { out.textContent = pct(Number(s.value)); };
    s.onchange = () => { out.textContent = pct(Number(s.value)); this.applySample(l, Number(s.value)); };
    return [
      el('label', { className: 'lfilter' }, 'Filter ', f),
      el('datalist', { id: list }),
      el('div', { className: 'fhint' }),
      el('label', { className: 'lsample', hidden: true, title: 'share of the objects drawn (kept by id, the same at every level)' }, 'Sample ', s, out),
    ];
  }

  // fill: once the descriptor is in, the sample row for line stores.
  fill(l) {
    const c = l.card;
    c.querySelector('.lsample').hidden = !takesSample(l.desc);
    c.querySelector('.sample').value = l.sample;
    c.querySelector('.sampleval').textContent = pct(l.sample);
    c.querySelector('.filter').value = l.filterText;
    c.querySelector('.filter').placeholder = filterExample(l.desc);
    if (l.filterText) this.hints(l);
  }

  // hints fetches the store's queryables (once) and lists them under the
  // box: property names, with the labels of categorical ones; the
  // datalist offers each name and each label's comparison.
  async hints(l) {
    if (!l.desc) return;
    // Per version: a store replaced since may have other properties.
    const key = `${l.name}|${l.desc.version}`;
    if (!this.queryables.has(key)) this.queryables.set(key, this.app.net.json(queryablesURL(l.ref), { kind: 'queryables', layer: l.name }));
    let schema;
    try {
      schema = await this.queryables.get(key);
    } catch (e) {
      this.queryables.delete(key); // asked again on the next focus
      l.card.querySelector('.fhint').textContent = `queryables: ${e.message}`;
      return;
    }
    if (!l.card.isConnected) return;
    const parts = [], opts = [];
    for (const [name, p] of Object.entries(schema.properties || {})) {
      const q = quote(name);
      opts.push(q);
      if (Array.isArray(p.enum)) {
        const labels = p.enum.slice(0, MAX_HINT_LABELS);
        parts.push(`${name}: ${labels.join(' | ')}${p.enum.length > labels.length ? ' | …' : ''}`);
        for (const v of labels) opts.push(`${q} = '${String(v).replace(/'/g, "''")}'`);
      } else {
        const lv = p['x-zvf-levels'];
        parts.push(`${name} (${p.type || 'value'}${lv && lv.length < l.desc.levels.length ? `, level ${lv.join(', ')}` : ''})`);
      }
    }
    l.card.querySelector('.fhint').textContent = parts.length ? parts.join(' · ') : 'this store has nothing to filter on';
    const dl = l.card.querySelector('datalist');
    dl.replaceChildren(...opts.map((v) => el('option', { value: v })));
  }

  // applyFilter: the server is asked first (probeFilter); a filter no
  // level takes is shown as the server's detail and the layer keeps what
  // it draws; otherwise the layer's tiles are those of the new filter. A
  // check the server could not answer (a 503 while the store changes, a
  // lost connection) is shown and made again as tiles are (retryDelay),
  // until it is answered or another filter is typed (attempt: the
  // failures in a row so far, plus one).
  async applyFilter(l, text, attempt = 1) {
    text = text.trim();
    l.filterText = text;
    const seq = l.filterSeq = (l.filterSeq || 0) + 1;
    this.cancelRetry(l);
    if (!l.desc) return;
    if (text === l.filter) {
      // Back to the filter in use: its drawing is the one shown.
      if (l.filterError) { l.filterError = ''; this.app.cards.showError(l); }
      return;
    }
    let levels = null;
    if (text) {
      this.checking++;
      this.app.scheduleUpdate();
      let p, wait = null;
      try {
        p = await probeFilter(this.app.net, l, text);
      } catch (e) {
        wait = retryDelay(e, attempt);
        p = { error: `${e.message}${retryNote(e, wait)}` }; // shown, the text kept in the box
      } finally {
        this.checking--;
      }
      if (seq !== l.filterSeq || !l.desc) { this.app.redraw(); return; } // another filter was typed meanwhile
      if (p.error) {
        l.filterError = filterMessage(p.error);
        this.app.cards.showError(l);
        this.app.redraw();
        if (wait !== null) this.retry(l, text, seq, attempt, wait);
        return;
      }
      levels = p.levels;
    }
    l.filter = text;
    l.filterLevels = levels;
    l.filterError = '';
    this.app.cards.showError(l);
    l.buildGrid();
    this.app.writeURL(); this.app.scheduleUpdate(); this.app.redraw();
    this.app.box.requery();
  }

  // retry checks the filter text again after wait ms, if it is still
  // the one typed (seq) in a layer still in the page; the page is not
  // settled meanwhile.
  retry(l, text, seq, attempt, wait) {
    this.waiting++;
    l.filterRetry = setTimeout(() => {
      l.filterRetry = 0;
      this.waiting--;
      if (seq === l.filterSeq && l.card.isConnected) this.applyFilter(l, text, attempt + 1);
      else this.app.redraw();
    }, wait);
  }

  // cancelRetry: a retry due is dropped (another filter was typed).
  cancelRetry(l) {
    if (!l.filterRetry) return;
    clearTimeout(l.filterRetry);
    l.filterRetry = 0;
    this.waiting--;
  }

  applySample(l, v) {
    if (!(v > 0 && v <= 1) || v === l.sample) return;
    l.sample = v;
    this.app.writeURL(); this.app.scheduleUpdate(); this.app.redraw();
    this.app.box.requery();
  }
}

// filterExample is a filter box's placeholder: an example on the store's
// own first single-channel attribute of level 0 (one naming an attribute
// the store lacks would be refused), or none when it has no such one.
export function filterExample(desc) {
  const a = (((desc.levels || [])[0] || {}).vertex_attributes || []).find((x) => (x.channels || 1) === 1);
  if (!a) return 'filter (CQL2)';
  if (a.categories && a.categories.length) return `filter (CQL2), e.g. ${quote(a.name)} = '${String(a.categories[0]).replace(/'/g, "''")}'`;
  return `filter (CQL2), e.g. ${quote(a.name)} > 0`;
}

// filterMessage: the server's detail says it is about the filter; other
// failures (the network) are said to be.
export const filterMessage = (m) => (m.startsWith('filter') ? m : `filter: ${m}`);

const pct = (v) => `${+(v * 100).toFixed(1)} %`;

// quote writes a property name as CQL2 text takes it: bare when it can be.
const KEYWORDS = new Set(['and', 'or', 'not', 'like', 'between', 'in', 'is', 'null', 'true', 'false']);
function quote(name) {
  if (/^[A-Za-z_:][A-Za-z0-9_:.]*(\[\d+\])?$/.test(name) && !KEYWORDS.has(name.toLowerCase())) return name;
  return `"${name.replace(/"/g, '""')}"`;
}
