// The layer cards in the side panel: a card per layer (visibility, name,
// what it holds, its Neuroglancer link, its colouring, level and opacity,
// its legend, its errors and what it draws), and the lists of stores to
// add and of layers to find objects in.
import { $, el } from './dom.js';
import { rgbCss } from './colour.js';
import { fillLegend } from './legend.js';
import { neuroglancerSources, neuroglancerURL } from './neuroglancer.js';
import { isRGB } from './format.js';

export class Cards {
  // app: {layers, catalog, tiles, selection, density, writeURL(), scheduleUpdate(), redraw(), removeLayer(l), drawList()}
  constructor(app) {
    this.app = app;
  }

  build(l) {
    const app = this.app;
    const c = el('div', { className: 'layer' });
    c.dataset.store = l.name;
    l.card = c;
    const vis = el('input', { type: 'checkbox', className: 'vis', checked: l.visible, title: 'show or hide' });
    vis.setAttribute('aria-label', `show ${l.name}`);
    const rm = el('button', { className: 'rm', textContent: '×', title: 'remove this layer' });
    rm.setAttribute('aria-label', `remove ${l.name}`);
    const ng = el('a', { className: 'ng', textContent: 'Neuroglancer', target: '_blank', rel: 'noopener', hidden: true, title: 'open this store in Neuroglancer' });
    // The name has the head's line to itself (the geometry and the link go
    // on the line below), so it is cut only when longer than the card.
    c.append(
      el('div', { className: 'lhead' }, vis, el('span', { className: 'sw' }), el('b', { className: 'lname', textContent: l.name, title: l.name }), rm),
      el('div', { className: 'lmeta' }, el('span', { className: 'geom' }), ng),
      el('div', { className: 'lerr', role: 'alert' }),
      el('div', { className: 'lbody', hidden: true },
        // Each control's name says its layer: with several cards a screen
        // reader would otherwise list as many "Opacity" sliders.
        el('div', { className: 'lctl' },
          el('label', {}, 'Colour ', named(el('select', { className: 'colour' }), `colour of ${l.name}`)),
          el('label', {}, 'Level ', named(el('select', { className: 'level' }), `level of ${l.name}`))),
        el('label', {}, 'Opacity ', named(el('input', { type: 'range', className: 'alpha', min: 0.1, max: 1, step: 0.05, value: l.alpha }), `opacity of ${l.name}`)),
        ...app.selection.rows(l),
        el('div', { className: 'legend' })),
      el('div', { className: 'lstat', textContent: 'loading…' }));
    vis.onchange = () => { l.visible = vis.checked; c.classList.toggle('off', !l.visible); app.writeURL(); app.scheduleUpdate(); app.redraw(); };
    rm.onclick = () => app.removeLayer(l);
    c.querySelector('.colour').onchange = (e) => {
      l.colour = e.target.value;
      l.range = null;
      l.provisional = null;
      app.writeURL(); fillLegend(app, l); app.scheduleUpdate(); app.redraw();
    };
    c.querySelector('.level').onchange = (e) => {
      l.level = e.target.value;
      l.buildGrid();
      app.writeURL(); app.scheduleUpdate(); app.redraw();
    };
    c.querySelector('.alpha').oninput = (e) => { l.alpha = Number(e.target.value); app.writeURL(); app.redraw(); };
    c.classList.toggle('off', !l.visible);
    $('layers').append(c);
    this.refreshAddList();
  }

  // fill completes the card once the descriptor is in (or failed).
  fill(l) {
    const c = l.card, d = l.desc;
    c.querySelector('.sw').style.background = rgbCss(l.rgb);
    this.showError(l);
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
      cs.add(new Option(`${n}${a.categories ? ' · categories' : isRGB(a) ? ' · RGB' : ''}${only}`, n));
    }
    cs.value = l.colour;
    const ls = c.querySelector('.level');
    ls.replaceChildren(new Option('auto (by view)', 'auto'));
    for (const lv of d.levels) ls.add(new Option(`${lv.level} · ${lv.vertex_count.toLocaleString()} vertices`, String(lv.level)));
    ls.value = String(l.level);
    const ng = c.querySelector('.ng'), href = neuroglancerURL(d.neuroglancer, location);
    ng.hidden = !href;
    if (href) ng.href = href;
    // The sources themselves, to paste into a Neuroglancer of one's own.
    ng.title = ['open this store in Neuroglancer; its sources:', ...neuroglancerSources(d.neuroglancer, location)].join('\n');
    this.app.selection.fill(l);
    fillLegend(this.app, l);
  }

  showError(l) {
    const errs = [];
    if (l.error) errs.push(l.error);
    if (l.filterError) errs.push(l.filterError);
    if (l.boundsNote) errs.push(l.boundsNote);
    const te = [...l.tileErrors.values()];
    if (te.length) errs.push(`${te.length} tile${te.length > 1 ? 's' : ''} failed: ${te.slice(0, 2).join('; ')}${te.length > 2 ? '; …' : ''}`);
    const e = l.card.querySelector('.lerr');
    const text = errs.join('\n');
    if (e.textContent !== text) e.textContent = text;
  }

  // stat: what the layer draws (n vertices, by level).
  stat(l, n, levels) {
    const s = l.card.querySelector('.lstat');
    let text = '';
    if (l.desc && !l.desc.levels.some((x) => x.vertex_count > 0)) {
      // Nothing to draw, whatever the view: say so rather than draw a blank.
      text = l.desc.levels.length ? 'the store holds no vertices' : 'the store has no levels';
    } else if (l.desc && l.visible) {
      const ks = Object.keys(levels).sort((a, b) => a - b);
      const by = ks.length === 1 ? ` (level ${ks[0]})` : ks.length ? ` (${ks.map((k) => `${levels[k].toLocaleString()} at level ${k}`).join(', ')})` : '';
      const loading = this.app.tiles.loading(l);
      text = `${n.toLocaleString()} ${n === 1 ? 'vertex' : 'vertices'} drawn${by}${loading ? ` · ${loading} tile${loading > 1 ? 's' : ''} loading` : ''}`;
      const o = this.app.density.note(l);
      if (o) text += `\n${o}`;
    } else if (l.desc) text = 'hidden';
    if (s.textContent !== text) s.textContent = text;
  }

  refreshAddList() {
    const s = $('addstore'), app = this.app;
    s.replaceChildren();
    for (const st of app.catalog?.stores || []) {
      if (app.layers.some((l) => l.name === st.name)) continue;
      const what = st.status === 'error' ? 'does not open' : (st.geometry_types || []).join(', ');
      s.add(new Option(`${st.name}${what ? ` · ${what}` : ''}`, st.name));
    }
    s.disabled = $('addlayer').disabled = !s.length;
  }

  refreshObjectLayers() {
    const s = $('olayer'), keep = s.value;
    s.replaceChildren();
    for (const l of this.app.layers) s.add(new Option(l.name, l.name));
    if (this.app.layers.some((l) => l.name === keep)) s.value = keep;
  }
}

// named gives element e the accessible name name.
function named(e, name) {
  e.setAttribute('aria-label', name);
  return e;
}
