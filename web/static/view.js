// The view: the camera fitted to the canvas and the visible layers' bounds,
// the matrices and frustum the streaming and drawing use, framing (Fit,
// Top, Front, Side) and what follows a camera move.
import { frustum, norm } from './math.js';

const URL_DELAY_MS = 250; // the URL follows the camera once it rests
const FAR_OFF = 1e4; // a camera from the URL further off than this many scene sizes is not taken

export class View {
  // app: {cam, canvas, layers, redraw(), scheduleUpdate(), writeURL()}
  constructor(app) {
    this.app = app;
    this.urlTimer = 0;
  }

  // info sizes the camera to the canvas and returns what a frame needs.
  info() {
    const { cam, canvas } = this.app;
    cam.width = canvas.clientWidth || 1; cam.height = canvas.clientHeight || 1;
    const [lo, hi] = this.sceneBounds();
    cam.sceneLo = lo; cam.sceneHi = hi;
    const m = cam.matrices();
    const light = norm([-m.fw[0] + 0.45 * m.u[0] + 0.2 * m.r[0], -m.fw[1] + 0.45 * m.u[1] + 0.2 * m.r[1], -m.fw[2] + 0.45 * m.u[2] + 0.2 * m.r[2]]);
    return { mvp: m.mvp, glMvp: m.glMvp, origin: m.origin, planes: frustum(m.mvp), eye: m.eye, focalPx: cam.focalPx(), width: cam.width, height: cam.height, light };
  }

  // sceneBounds: the box around the visible layers (a unit box when none).
  sceneBounds() {
    const lo = [Infinity, Infinity, Infinity], hi = [-Infinity, -Infinity, -Infinity];
    for (const l of this.app.layers) {
      if (!l.desc || !l.visible) continue;
      for (let i = 0; i < 3; i++) { lo[i] = Math.min(lo[i], l.lo[i]); hi[i] = Math.max(hi[i], l.hi[i]); }
    }
    if (!(lo[0] <= hi[0])) return [[0, 0, 0], [1, 1, 1]];
    // A box of no size (a store of one point) gets one, so the camera can
    // stand off it: framed from a millionth of a unit, float32 matrices
    // lose the point. A unit, or more far from the origin.
    if (lo.every((v, i) => v === hi[i])) {
      const pad = Math.max(0.5, ...lo.map((v) => Math.abs(v) * 2 ** -10));
      return [lo.map((v) => v - pad), hi.map((v) => v + pad)];
    }
    return [lo, hi];
  }

  fit() {
    const [lo, hi] = this.sceneBounds();
    this.info();
    this.app.cam.fit(lo, hi);
    this.moved();
  }

  // apply sets the camera from the URL's cam=yaw,pitch,dist,x,y,z; one
  // that stands or looks further from the scene than FAR_OFF times its
  // size (a garbled link: dist=1e308) would show nothing, and fits instead.
  apply(c) {
    const cam = this.app.cam, [lo, hi] = this.sceneBounds();
    const size = Math.max(Math.hypot(hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2]), 1e-9);
    const off = Math.hypot(...[0, 1, 2].map((i) => c[3 + i] - (lo[i] + hi[i]) / 2));
    if (!(c[2] <= FAR_OFF * size && off <= FAR_OFF * size)) { this.fit(); return; }
    [cam.yaw, cam.pitch, cam.dist] = c;
    cam.target = c.slice(3, 6);
    this.moved();
  }

  // preset looks from a direction at the whole scene.
  preset(yaw, pitch) {
    const cam = this.app.cam;
    cam.yaw = yaw; cam.pitch = pitch;
    this.fit();
  }

  moved() {
    const app = this.app;
    app.redraw();
    app.scheduleUpdate();
    clearTimeout(this.urlTimer);
    this.urlTimer = setTimeout(() => app.writeURL(), URL_DELAY_MS);
  }
}
