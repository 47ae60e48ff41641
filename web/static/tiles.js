// The tiles in the page: loading, ready or failed, by key (layer, tile,
// what it was asked with), and which of them to forget.

export class TileCache {
  constructor(renderer) {
    this.map = new Map(); // tile key -> tile
    this.renderer = renderer; // () => the Renderer, once there is one
  }

  get(l, node) { return this.map.get(l.tileKey(node)); }

  // shown: the tile to draw for node: the one coloured as asked, or while
  // that loads, the same vertices fetched for another colouring (drawn
  // grey, as the legend says).
  shown(l, node) {
    const t = this.get(l, node);
    if (t && t.state === 'ready') return t;
    const alt = l.byNode.get(node.key);
    return alt && alt.state === 'ready' && this.map.get(alt.key) === alt ? alt : null;
  }

  // loading: how many of the layer's tiles are in flight.
  loading(l) {
    let n = 0;
    for (const t of this.map.values()) if (t.layer === l && t.state === 'loading') n++;
    return n;
  }

  drop(k, t) {
    if (t.state === 'loading') t.ctrl.abort();
    if (t.g) this.renderer().free(t.g);
    this.map.delete(k);
  }

  dropLayer(l) {
    for (const [k, t] of this.map) if (t.layer === l) this.drop(k, t);
  }

  // expireFailed forgets the failed tiles whose wait (t.retryAt) is over,
  // and their errors, so the view asks for them again; it returns the
  // layers whose errors changed.
  expireFailed(now) {
    const changed = new Set();
    for (const [k, t] of this.map) {
      if (t.state !== 'failed' || now < t.retryAt) continue;
      this.map.delete(k);
      if (t.layer.tileErrors.delete(t.node.key)) changed.add(t.layer);
    }
    return changed;
  }

  // evict keeps the tiles of the current view (drawn, or in its tree of
  // levels) and, of the others, the most recently used ones up to twice
  // the vertex budget, so going back to a place is quick.
  evict(inTree, drawList, budget) {
    const now = performance.now();
    for (const k of inTree) { const t = this.map.get(k); if (t) t.used = now; }
    for (const d of drawList) d.t.used = now;
    let idleCount = 0;
    const idle = [];
    for (const [k, t] of this.map) {
      if (t.state !== 'ready' || t.used >= now) continue;
      idleCount += t.count;
      idle.push([k, t]);
    }
    idle.sort((a, b) => a[1].used - b[1].used);
    for (const [k, t] of idle) {
      if (idleCount <= 2 * budget) break;
      idleCount -= t.count;
      this.drop(k, t);
    }
  }
}
