// The 2D layer over the WebGL canvas: the axis box with ticks, numbers and
// units, a scale bar, the query box, the box being drawn and the picked
// vertex. Text is drawn here rather than in WebGL so it stays sharp and
// readable at any zoom.
import { project, niceStep, tickStep, fmtNum } from './math.js';

const BOTTOM = 30; // the status line covers the view's last pixels
const EDGES = [[0, 1], [2, 3], [4, 5], [6, 7], [0, 2], [1, 3], [4, 6], [5, 7], [0, 4], [1, 5], [2, 6], [3, 7]];
const MAX_TICKS = 20; // more ticks than this on an axis: its numbers are not what they seem (NaN, no extent in float64)

function corners(lo, hi) {
  const c = [];
  for (let i = 0; i < 8; i++) c.push([i & 1 ? hi[0] : lo[0], i & 2 ? hi[1] : lo[1], i & 4 ? hi[2] : lo[2]]);
  return c;
}

// unitLabel names the axes' common unit, or says there is none.
export function unitLabel(axes) {
  const units = [...new Set(axes.slice(0, 3).map((a) => a.unit || ''))];
  if (units.length === 1) return units[0];
  return null; // mixed: each axis title carries its own
}

export class Overlay {
  constructor(canvas) {
    this.canvas = canvas;
    // Drawn by the CPU: a software GPU would spend longer setting up its
    // 2D pipeline than the few lines and labels take.
    this.ctx = canvas.getContext('2d', { willReadFrequently: true });
  }

  // draw: s = {cam, mvp, lo, hi, axes, box, rubber, pick}
  draw(s) {
    const c = this.canvas, ctx = this.ctx, dpr = devicePixelRatio;
    const W = c.clientWidth, H = c.clientHeight;
    if (c.width !== Math.round(W * dpr) || c.height !== Math.round(H * dpr)) { c.width = Math.round(W * dpr); c.height = Math.round(H * dpr); }
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, W, H);
    this.labels = []; // what was written where (the browser tests read it)
    ctx.font = '11px ui-monospace, monospace';
    ctx.textBaseline = 'middle';
    if (s.lo) this.axisBox(s, W, H);
    if (s.lo) this.scaleBar(s, W, H);
    if (s.box) this.wire(s.mvp, s.box[0], s.box[1], W, H, '#ffd24a', 1.5);
    if (s.rubber) {
      const [x0, y0, x1, y1] = s.rubber;
      ctx.setLineDash([5, 4]);
      ctx.strokeStyle = '#ffd24a';
      ctx.strokeRect(Math.min(x0, x1), Math.min(y0, y1), Math.abs(x1 - x0), Math.abs(y1 - y0));
      ctx.setLineDash([]);
    }
    if (s.pick) {
      const p = project(s.mvp, s.pick, W, H);
      if (p.w > 0) {
        ctx.strokeStyle = '#ffffff';
        ctx.lineWidth = 1.5;
        ctx.beginPath(); ctx.arc(p.x, p.y, 7, 0, 2 * Math.PI); ctx.stroke();
      }
    }
  }

  text(t, x, y, kind) {
    this.ctx.fillText(t, x, y);
    const w = this.ctx.measureText(t).width, a = this.ctx.textAlign;
    const x0 = a === 'center' ? x - w / 2 : a === 'right' ? x - w : x;
    this.labels.push({ text: t, kind, x0, x1: x0 + w, y });
  }

  wire(m, lo, hi, W, H, color, width) {
    const ctx = this.ctx, p = corners(lo, hi).map((q) => project(m, q, W, H));
    ctx.strokeStyle = color;
    ctx.lineWidth = width;
    ctx.beginPath();
    for (const [a, b] of EDGES) {
      if (p[a].w <= 0 || p[b].w <= 0) continue;
      ctx.moveTo(p[a].x, p[a].y); ctx.lineTo(p[b].x, p[b].y);
    }
    ctx.stroke();
    return p;
  }

  // axisBox draws the bounds' edges, and along one outer edge per axis
  // (the one whose middle lies furthest from the box's centre on screen)
  // ticks at round numbers with their values and the axis name and unit.
  axisBox(s, W, H) {
    const ctx = this.ctx, m = s.mvp, lo = s.lo, hi = s.hi;
    const p = this.wire(m, lo, hi, W, H, 'rgba(150,160,172,0.45)', 1);
    if (p.some((q) => q.w <= 0)) return; // inside the box: no outside edge to label
    const cx = p.reduce((a, q) => a + q.x, 0) / 8, cy = p.reduce((a, q) => a + q.y, 0) / 8;
    const unit = unitLabel(s.axes);
    ctx.lineWidth = 1;
    const placed = []; // labels already drawn: a tick label never covers another
    const free = (x, y, w) => !placed.some((q) => Math.abs(q[0] - x) < (q[2] + w) / 2 + 4 && Math.abs(q[1] - y) < 12);
    for (let a = 0; a < 3; a++) {
      const ext = hi[a] - lo[a];
      if (!(ext > 0)) continue;
      let best = null;
      for (const [i, j] of EDGES) {
        const ci = corners(lo, hi)[i], cj = corners(lo, hi)[j];
        if (ci[a] === cj[a]) continue; // not parallel to axis a
        const mx = (p[i].x + p[j].x) / 2, my = (p[i].y + p[j].y) / 2;
        const score = Math.hypot(mx - cx, my - cy) + (my - cy) * 0.05;
        if (!best || score > best.score) best = { score, i, j, mx, my };
      }
      const a0 = corners(lo, hi)[best.i], a1 = corners(lo, hi)[best.j];
      const from = a0[a] < a1[a] ? a0 : a1;
      const len = Math.hypot(p[best.j].x - p[best.i].x, p[best.j].y - p[best.i].y);
      if (!(len >= 40)) continue; // seen end on (or projected to NaN): nothing readable to label
      let ox = best.mx - cx, oy = best.my - cy;
      const ol = Math.hypot(ox, oy) || 1;
      ox /= ol; oy /= ol;
      const step = tickStep(ext, Math.max(2, Math.min(10, len / 55)));
      ctx.strokeStyle = 'rgba(200,210,220,0.8)';
      ctx.fillStyle = '#c9d3dd';
      ctx.textAlign = 'center';
      // Ticks by index: far from zero, v + step can be v again (an
      // extent of 64 at 1e17), and a loop adding steps never ends.
      const k0 = Math.ceil(lo[a] / step - 1e-9), k1 = Math.floor(hi[a] / step + 1e-9);
      if (!(k1 - k0 <= MAX_TICKS)) continue;
      for (let k = k0; k <= k1; k++) {
        const v = k * step, q = [...from];
        q[a] = v;
        const t = project(m, q, W, H);
        ctx.beginPath(); ctx.moveTo(t.x, t.y); ctx.lineTo(t.x + ox * 6, t.y + oy * 6); ctx.stroke();
        const text = fmtNum(v, step), lx = t.x + ox * 18, ly = t.y + oy * 14, w = ctx.measureText(text).width;
        // A tick whose label would leave the view (or hide under the
        // status line) goes unlabelled rather than labelled elsewhere.
        if (t.w > 0 && lx - w / 2 >= 2 && lx + w / 2 <= W - 2 && ly >= 8 && ly <= H - BOTTOM && free(lx, ly, w)) {
          this.text(text, lx, ly, 'tick');
          placed.push([lx, ly, w]);
        }
      }
      const name = s.axes[a]?.name ?? 'xyz'[a];
      const u = unit === null ? s.axes[a]?.unit : unit;
      ctx.fillStyle = '#9fb3c8';
      ctx.font = 'bold 12px ui-monospace, monospace';
      const title = u ? `${name} (${u})` : name, tw = ctx.measureText(title).width;
      const tx = best.mx + ox * 38, ty = best.my + oy * 32;
      if (tx - tw / 2 >= 2 && tx + tw / 2 <= W - 2 && ty >= 8 && ty <= H - BOTTOM) this.text(title, tx, ty, 'axis');
      ctx.font = '11px ui-monospace, monospace';
    }
  }

  // scaleBar: a round length at the depth of the view's centre.
  scaleBar(s, W, H) {
    const ctx = this.ctx, cam = s.cam;
    const perPx = 2 * cam.dist * Math.tan(cam.fov / 2) / H;
    let len = niceStep(110 * perPx);
    if (len / perPx > 170) len /= 2;
    const px = len / perPx, x = 16, y = H - 40;
    ctx.strokeStyle = '#e6edf3';
    ctx.lineWidth = 2;
    ctx.beginPath();
    ctx.moveTo(x, y - 5); ctx.lineTo(x, y); ctx.lineTo(x + px, y); ctx.lineTo(x + px, y - 5);
    ctx.stroke();
    const unit = unitLabel(s.axes);
    ctx.fillStyle = '#e6edf3';
    ctx.textAlign = 'left';
    this.text(`${fmtNum(len, len)} ${unit || (unit === null ? 'units (axes differ)' : '(no unit declared)')}`, x, y - 12, 'scale');
  }
}
