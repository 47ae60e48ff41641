// The key to a layer's colours, always for the colouring the canvas uses
// (a colour picker, the height bar, the numeric bar with its editable
// range, or a swatch per category), with the levels that cannot be
// coloured that way; and the automatic range of a numeric colouring.
import { el } from './dom.js';
import { fmtNum } from './math.js';
import { PALETTE } from './gl.js';
import { hexOf, fromHex, rgbCss, autoRange } from './colour.js';

// MAX_LEGEND_CATEGORIES: swatches listed at most; a store may have
// thousands of categories, and colours repeat long before.
const MAX_LEGEND_CATEGORIES = 64;

// fillLegend: app gives writeURL() and redraw(), and drawList for the
// auto button.
export function fillLegend(app, l) {
  const lg = l.card.querySelector('.legend');
  lg.replaceChildren();
  if (!l.desc) return;
  const unit = (i) => l.desc.axes?.[i]?.unit || '';
  if (!l.colour) {
    const pick = el('input', { type: 'color', value: hexOf(l.rgb), title: 'layer colour' });
    pick.setAttribute('aria-label', `layer colour of ${l.name}`);
    pick.oninput = () => { l.rgb = fromHex(pick.value); l.card.querySelector('.sw').style.background = pick.value; app.writeURL(); app.redraw(); };
    lg.append(el('div', {}, pick, ' layer colour'));
    return;
  }
  if (l.colour === '_z') {
    const [a, b] = [l.lo[2], l.hi[2]], st = Math.abs(b - a) / 4 || 1;
    const z = l.desc.axes?.[2]?.name || 'z';
    lg.append(el('div', { className: 'bar' }),
      el('div', { className: 'ticks' }, ...[a, (a + b) / 2, b].map((v) => el('span', { textContent: fmtNum(v, st / 10) }))),
      el('div', { className: 'note', textContent: `height: ${z}${unit(2) ? ` (${unit(2)})` : ''}` }));
    return;
  }
  const at = l.attribute();
  if (!at) return;
  if (l.storedColour()) {
    lg.append(el('div', { className: 'note', textContent: `${l.colour}: the stored colours (RGB${at.info.channels === 4 ? ', alpha left out' : ''})` }));
  } else if (at.info.categories) {
    const cats = at.info.categories, shown = cats.slice(0, MAX_LEGEND_CATEGORIES);
    lg.append(el('div', {}, ...shown.map((name, i) => el('span', { className: 'cat', title: name },
      el('span', { className: 'sw', style: `background:${rgbCss(PALETTE[i % PALETTE.length])}` }), name))));
    const notes = [];
    if (cats.length > shown.length) notes.push(`… and ${(cats.length - shown.length).toLocaleString()} more`);
    if (cats.length > PALETTE.length) notes.push(`colours repeat after ${PALETTE.length} categories`);
    if (notes.length) lg.append(el('div', { className: 'note', textContent: notes.join(' · ') }));
  } else {
    const r = l.shownRange();
    const st = r ? Math.abs(r[1] - r[0]) / 4 || 1 : 1;
    const lo = el('input', { type: 'number', step: 'any', value: r ? r[0] : '', className: 'cmin', title: 'value at the bottom of the colour bar' });
    const hi = el('input', { type: 'number', step: 'any', value: r ? r[1] : '', className: 'cmax', title: 'value at the top of the colour bar' });
    const auto = el('button', { textContent: 'auto', title: 'the 2nd to 98th percentile of the values drawn now' });
    const set = () => {
      const a = Number(lo.value), b = Number(hi.value);
      if (lo.value !== '' && hi.value !== '' && Number.isFinite(a) && Number.isFinite(b)) { l.range = [a, b]; l.provisional = null; app.writeURL(); fillLegend(app, l); app.redraw(); }
    };
    lo.onchange = hi.onchange = set;
    auto.onclick = () => {
      l.range = drawnRange(app.drawList(), l);
      l.provisional = null;
      fillLegend(app, l); app.writeURL(); app.redraw();
    };
    lg.append(el('div', { className: 'bar' }),
      el('div', { className: 'ticks' }, ...(r ? [r[0], (r[0] + r[1]) / 2, r[1]] : []).map((v) => el('span', { textContent: fmtNum(v, st / 10) }))),
      el('div', { className: 'range' }, lo, hi, auto));
  }
  const missing = l.desc.levels.map((x) => x.level).filter((n) => !at.levels.includes(n));
  if (missing.length) lg.append(el('div', { className: 'note', textContent: `${missing.length > 1 ? 'levels' : 'level'} ${missing.join(', ')} hold${missing.length > 1 ? '' : 's'} no ${l.colour}: drawn grey` }));
}

// drawnRange: the automatic range of the layer's values drawn now (each
// tile's own rows, not the seam rows it borrows from its neighbours).
function drawnRange(drawList, l) {
  const arrays = [];
  for (const d of drawList) if (d.l === l && d.t.val && d.t.attr === l.colour) arrays.push({ values: d.t.val, n: d.t.count });
  return autoRange(arrays);
}

// autoRanges: for each numeric colouring without a fixed range, the range
// of what is drawn; provisional while the layer's tiles load, fixed (and
// in the URL) once the view has them all.
export function autoRanges(app, layers, queued) {
  for (const l of layers) {
    if (l.range || !l.numeric()) continue;
    const r = drawnRange(app.drawList(), l);
    if (!r) continue;
    const same = l.provisional && l.provisional[0] === r[0] && l.provisional[1] === r[1];
    if (queued(l)) {
      l.provisional = r;
      if (!same) fillLegend(app, l);
    } else {
      l.range = r;
      l.provisional = null;
      fillLegend(app, l);
      app.writeURL();
    }
  }
}
