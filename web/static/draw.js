// Drawing: one frame per animation frame when anything changed: the
// layers' tiles (each with its style and child mask), the box query's hits
// and the object found over them, then the overlay; and what the frame
// drew, for the layer cards, the status line and the tests.
const HIGHLIGHT = [1, 0.3, 0.88];
const HITS = [1, 1, 1];

export class Drawer {
  // app: {renderer, overlay, cam, layers, stream, density, selection, box, find, pick, view, cards, hooks, net, budget, size, statusError(), setStatus(), announce()}
  constructor(app) {
    this.app = app;
    this.queued = false;
  }

  redraw() {
    if (this.queued) return;
    this.queued = true;
    requestAnimationFrame(() => { this.queued = false; this.frame(); });
  }

  style(l, t) {
    let mode = 3;
    const at = l.attribute();
    if (l.colour === '_z') mode = 0;
    else if (at) mode = t.attr === l.colour ? (at.info.categories ? 2 : l.storedColour() ? 5 : 1) : 4;
    const zr = [l.lo[2], l.hi[2]];
    const hasConn = t.g && (t.g.tris || t.g.lines);
    return { mode, range: l.shownRange() || [0, 1], zr, color: l.rgb, alpha: l.alpha, sel: l.sel, ptWorld: hasConn ? 0 : l.spacing(t.level) * 0.3, ptScale: this.app.size };
  }

  // items: what to draw (only: one layer's tiles alone), with the
  // vertices, levels and edges drawn per layer.
  items(only) {
    // Keyed by store name: objects without a prototype, or a store named
    // constructor or toString starts from a function instead of 0.
    const app = this.app, drawn = Object.create(null), levels = Object.create(null), edges = Object.create(null), faces = Object.create(null);
    // The density overviews beneath (translucent, drawn after what is opaque).
    const out = app.density.items(only);
    for (const d of app.stream.drawList) {
      if (!d.l.visible || (only && d.l !== only)) continue;
      if (!d.t.g) { d.t.g = app.renderer.upload(d.t.arrays); d.t.arrays = null; }
      out.push({ g: d.t.g, style: this.style(d.l, d.t), mask: d.mask });
      drawn[d.l.name] = (drawn[d.l.name] || 0) + d.t.count;
      edges[d.l.name] = (edges[d.l.name] || 0) + d.t.edges;
      faces[d.l.name] = (faces[d.l.name] || 0) + d.t.faces;
      const lv = levels[d.l.name] || (levels[d.l.name] = {});
      lv[d.t.level] = (lv[d.t.level] || 0) + d.t.count;
    }
    if (!only) {
      for (const h of app.box.hits) if (h.layer.visible) out.push({ g: h.g, style: { mode: 3, range: [0, 1], zr: [0, 1], color: HITS, alpha: 1, sel: null, ptWorld: h.layer.spacing(h.level) * 0.45, ptScale: app.size * 1.5 }, mask: null });
      const f = app.find.item;
      if (f) {
        // The object over everything else: its surface or lines, and its
        // vertices as dots (one-pixel lines are easy to miss).
        const style = { mode: 3, range: [0, 1], zr: [0, 1], color: HIGHLIGHT, alpha: 1, sel: null, ptWorld: f.layer.spacing(f.level) * 0.3, ptScale: app.size };
        out.push({ g: f.g, last: true, style, mask: null });
        if (f.g.lines) out.push({ g: { ...f.g, lines: null }, last: true, style, mask: null });
      }
    }
    return { out, drawn, levels, edges, faces };
  }

  frame() {
    const app = this.app, hooks = app.hooks;
    if (!app.renderer || !app.renderer.linked) return;
    const v = app.view.info();
    const { out, drawn, levels, edges, faces } = this.items(null);
    app.renderer.draw(v, out);
    hooks.frames++;
    hooks.drawn = drawn;
    hooks.drawnLevels = levels;
    hooks.drawnEdges = edges;
    hooks.drawnFaces = faces;
    const [lo, hi] = app.view.sceneBounds();
    const shown = app.layers.filter((l) => l.desc && l.visible);
    const axes = shown[0]?.desc.axes || [];
    app.overlay.draw({ cam: app.cam, mvp: v.mvp, lo: shown.length ? lo : null, hi, axes, box: app.box.box, rubber: app.box.rubber, pick: app.pick.current?.pos });
    const total = Object.values(drawn).reduce((a, b) => a + b, 0);
    if (total && hooks.firstDataMs === null) hooks.firstDataMs = performance.now();
    // The first picture: every visible layer drew or has its error shown.
    if (!hooks.ready && total && app.layers.every((l) => !l.visible || drawn[l.name] || l.error || (!l.loading && l.grid && !l.grid.chain.length) || l.tileErrors.size)) {
      hooks.ready = true;
      hooks.firstPictureMs = performance.now();
    }
    for (const l of app.layers) app.cards.stat(l, drawn[l.name] || 0, levels[l.name] || {});
    // Settled: this frame shows everything the view asked for.
    const was = hooks.settled;
    hooks.settled = !app.stream.busy && !app.density.busy && !app.selection.busy && app.layers.every((l) => !l.loading && !l.retrying);
    // Said once the view has loaded, not while it loads (the status line
    // changes every frame meanwhile).
    if (hooks.settled && !was) app.announce(`${total.toLocaleString()} ${total === 1 ? 'vertex' : 'vertices'} drawn in ${app.layers.filter((l) => l.visible).length} of ${app.layers.length} layers`);
    if (!app.statusError()) {
      const loading = app.stream.inflight + app.stream.queue.length;
      app.setStatus(`${app.layers.filter((l) => l.visible).length} of ${app.layers.length} layers · ${total.toLocaleString()} ${total === 1 ? 'vertex' : 'vertices'} drawn (budget ${app.budget.toLocaleString()})` +
        `${loading ? ` · ${loading} tile${loading > 1 ? 's' : ''} to load` : ''} · ${(app.net.bytes / 1e6).toFixed(1)} MB fetched${offBounds(app.layers)}`);
    }
  }
}

// offBounds: the layers whose data lay outside the bounds their stores
// declare (their cards say what was drawn instead), for the status line.
function offBounds(layers) {
  const names = layers.filter((l) => l.boundsNote).map((l) => l.name);
  if (!names.length) return '';
  return ` · ${names.length > 2 ? `${names.length} stores` : names.join(', ')}: vertices outside the declared bounds, framed as measured (see ${names.length > 1 ? 'their cards' : 'its card'})`;
}
