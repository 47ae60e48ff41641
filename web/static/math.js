// Camera and geometry helpers: an orbit camera around a target (z up),
// column-major 4x4 matrices as WebGL wants them, frustum tests for tiles,
// rays for zooming and drawn boxes, and "nice" numbers for ticks and the
// scale bar.

// mat4mul is a × b in double precision: a float32 product loses the
// view's planes for a store far from the origin (at 10^6, hundreds of units).
export function mat4mul(a, b) {
  const o = new Float64Array(16);
  for (let i = 0; i < 4; i++) for (let j = 0; j < 4; j++) {
    let s = 0;
    for (let k = 0; k < 4; k++) s += a[k * 4 + j] * b[i * 4 + k];
    o[i * 4 + j] = s;
  }
  return o;
}

const sub = (a, b) => [a[0] - b[0], a[1] - b[1], a[2] - b[2]];
const dot = (a, b) => a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
const cross = (a, b) => [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]];
const norm = (a) => { const l = Math.hypot(a[0], a[1], a[2]) || 1; return [a[0] / l, a[1] / l, a[2] / l]; };
export { norm };

// Camera: yaw and pitch (radians) of the eye around target at dist; fov is
// the vertical field of view.
export class Camera {
  constructor() {
    this.yaw = -0.9; this.pitch = 0.45; this.dist = 1000; this.target = [0, 0, 0]; this.fov = 0.8;
    this.width = 1; this.height = 1; // CSS pixels of the canvas
    this.sceneLo = [0, 0, 0]; this.sceneHi = [1, 1, 1]; // for near and far planes
  }

  eye() {
    const cp = Math.cos(this.pitch);
    return [this.target[0] + this.dist * cp * Math.cos(this.yaw), this.target[1] + this.dist * cp * Math.sin(this.yaw),
      this.target[2] + this.dist * Math.sin(this.pitch)];
  }

  basis() {
    const e = this.eye();
    const fw = norm(sub(this.target, e));
    // Looking straight down (or up) the world z axis has no horizon: use
    // the yaw to orient the right vector instead.
    let r = cross(fw, [0, 0, 1]);
    if (Math.hypot(...r) < 1e-6) r = [Math.sin(this.yaw), -Math.cos(this.yaw), 0];
    r = norm(r);
    const u = cross(r, fw);
    return { e, fw, r, u };
  }

  // nearFar keeps the whole scene box between the planes, so zooming in
  // never clips data and depth precision follows the view.
  nearFar() {
    const { e, fw } = this.basis();
    let lo = Infinity, hi = -Infinity;
    for (let i = 0; i < 8; i++) {
      const c = [i & 1 ? this.sceneHi[0] : this.sceneLo[0], i & 2 ? this.sceneHi[1] : this.sceneLo[1], i & 4 ? this.sceneHi[2] : this.sceneLo[2]];
      const d = dot(sub(c, e), fw);
      lo = Math.min(lo, d); hi = Math.max(hi, d);
    }
    const far = Math.max(hi * 1.05, this.dist * 2);
    const near = Math.max(lo * 0.95, far / 20000, 1e-6);
    return [near, far];
  }

  // focalPx: pixels per world unit at depth 1 (CSS pixels).
  focalPx() { return this.height / 2 / Math.tan(this.fov / 2); }

  // matrices: mvp maps world coordinates (double precision, for the
  // page's own tests of what is in view); glMvp maps coordinates relative
  // to origin, the target rounded to a float32, which the vertex shader
  // subtracts first: in float32 a world of 10^6 units leaves no precision
  // for a view a few units deep, while the differences stay exact.
  matrices() {
    const { e, fw, r, u } = this.basis();
    const origin = this.target.map(Math.fround);
    const view = (o) => [r[0], u[0], -fw[0], 0, r[1], u[1], -fw[1], 0, r[2], u[2], -fw[2], 0,
      -dot(r, sub(e, o)), -dot(u, sub(e, o)), dot(fw, sub(e, o)), 1];
    const aspect = this.width / this.height;
    const [near, far] = this.nearFar();
    const f = 1 / Math.tan(this.fov / 2);
    const proj = [f / aspect, 0, 0, 0, 0, f, 0, 0, 0, 0, (far + near) / (near - far), -1, 0, 0, 2 * far * near / (near - far), 0];
    return { mvp: mat4mul(proj, view([0, 0, 0])), glMvp: new Float32Array(mat4mul(proj, view(origin))), origin, eye: e, fw, r, u };
  }

  // fit frames the box [lo, hi] from the current direction: the nearest
  // distance at which every corner lies within 80% of the view (room for
  // the axis labels), with the target moved so the box is centred on
  // screen (a box seen from above its middle projects off-centre).
  fit(lo, hi) {
    this.target = [0, 1, 2].map((i) => (lo[i] + hi[i]) / 2);
    const ty = Math.tan(this.fov / 2), tx = ty * this.width / this.height;
    const cs = [];
    for (let i = 0; i < 8; i++) cs.push([i & 1 ? hi[0] : lo[0], i & 2 ? hi[1] : lo[1], i & 4 ? hi[2] : lo[2]]);
    const { r, u, fw } = this.basis();
    const need = () => {
      let dist = 0;
      for (const c of cs) {
        const v = sub(c, this.target), x = dot(v, r), y = dot(v, u), z = dot(v, fw);
        dist = Math.max(dist, Math.abs(x) / (tx * 0.8) - z, Math.abs(y) / (ty * 0.8) - z);
      }
      return Math.max(dist, Math.hypot(hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2]) * 0.05, 1e-6);
    };
    for (let k = 0; k < 4; k++) {
      const dist = need();
      let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
      for (const c of cs) {
        const v = sub(c, this.target), d = dist + dot(v, fw);
        const x = dot(v, r) / (d * tx), y = dot(v, u) / (d * ty);
        x0 = Math.min(x0, x); x1 = Math.max(x1, x); y0 = Math.min(y0, y); y1 = Math.max(y1, y);
      }
      const sx = (x0 + x1) / 2 * dist * tx, sy = (y0 + y1) / 2 * dist * ty;
      for (let i = 0; i < 3; i++) this.target[i] += sx * r[i] + sy * u[i];
    }
    this.dist = need();
  }
}

// project maps a world point to CSS pixels (x right, y down) and clip w.
export function project(m, p, width, height) {
  const w = m[3] * p[0] + m[7] * p[1] + m[11] * p[2] + m[15];
  const x = (m[0] * p[0] + m[4] * p[1] + m[8] * p[2] + m[12]) / w;
  const y = (m[1] * p[0] + m[5] * p[1] + m[9] * p[2] + m[13]) / w;
  return { x: (x + 1) / 2 * width, y: (1 - y) / 2 * height, w };
}

// frustum returns the six planes of a view-projection matrix (normals point
// inside), for box tests.
export function frustum(m) {
  const row = (i) => [m[i], m[4 + i], m[8 + i], m[12 + i]];
  const r0 = row(0), r1 = row(1), r2 = row(2), r3 = row(3);
  const planes = [];
  for (const [a, s] of [[r0, 1], [r0, -1], [r1, 1], [r1, -1], [r2, 1], [r2, -1]]) {
    planes.push([r3[0] + s * a[0], r3[1] + s * a[1], r3[2] + s * a[2], r3[3] + s * a[3]]);
  }
  return planes;
}

// boxVisible: whether any part of the box may be inside the frustum
// (conservative: the positive corner test).
export function boxVisible(planes, lo, hi) {
  for (const p of planes) {
    const x = p[0] >= 0 ? hi[0] : lo[0], y = p[1] >= 0 ? hi[1] : lo[1], z = p[2] >= 0 ? hi[2] : lo[2];
    if (p[0] * x + p[1] * y + p[2] * z + p[3] < 0) return false;
  }
  return true;
}

// ray returns the eye and direction through CSS pixel (px, py).
export function ray(cam, px, py) {
  const { e, fw, r, u } = cam.basis();
  const t = Math.tan(cam.fov / 2);
  const nx = (px / cam.width * 2 - 1) * t * cam.width / cam.height, ny = (1 - py / cam.height * 2) * t;
  return { o: e, d: norm([fw[0] + nx * r[0] + ny * u[0], fw[1] + nx * r[1] + ny * u[1], fw[2] + nx * r[2] + ny * u[2]]) };
}

// niceStep is the 1, 2 or 5 times a power of ten nearest above raw.
export function niceStep(raw) {
  if (!(raw > 0) || !Number.isFinite(raw)) return 1;
  const p = 10 ** Math.floor(Math.log10(raw));
  const f = raw / p;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
}

// tickStep is the smallest 1-2-5 step that puts at most max ticks on ext.
export function tickStep(ext, max) {
  let s = niceStep(ext / Math.max(1, max) / 10);
  while (ext / s > max) s = niceStep(s * 1.01);
  return s;
}

// fmtNum prints a tick value without float noise (0.30000000000000004).
export function fmtNum(v, step) {
  const dec = Math.max(0, Math.min(10, -Math.floor(Math.log10(step) + 1e-9)));
  return (Math.abs(v) < step * 1e-6 ? 0 : v).toFixed(dec);
}

// prevFloat32 is the largest float32 below v: a tile's upper face that is
// another tile's lower face is sent as this, so a vertex lying exactly on
// the face (the box query is closed) is answered by one tile only.
export function prevFloat32(v) {
  const f = new Float32Array(1), i = new Int32Array(f.buffer);
  f[0] = v;
  if (f[0] < v) return f[0];
  if (f[0] === 0) { i[0] = -2147483647; return f[0]; } // the negative subnormal nearest zero
  i[0] += f[0] > 0 ? -1 : 1;
  return f[0];
}

// prevFloat64 is the largest float64 below v (integer and float64 stores).
export function prevFloat64(v) {
  if (v === 0) return -Number.MIN_VALUE;
  const f = new Float64Array([v]), i = new BigInt64Array(f.buffer);
  i[0] += v > 0 ? -1n : 1n;
  return f[0];
}
