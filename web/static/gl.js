// WebGL2 drawing of tiles: points (round, shaded sprites whose size
// follows the zoom), lines (streamlines, skeleton and graph edges) and lit
// triangles (meshes, with normals computed here from the faces). Colour
// comes from one float per vertex in the shader (height, a numeric
// attribute through viridis, a categorical palette, a solid colour), so
// recolouring never loops over vertices in JavaScript; selection compares
// each vertex's int64 object id, as two 32-bit halves, with a uniform (the
// key, format.js idKey).

const VS = `#version 300 es
layout(location = 0) in vec3 a_pos;
layout(location = 1) in float a_val;
layout(location = 2) in ivec2 a_oid; // an int64 object id: low, high 32 bits
layout(location = 3) in vec3 a_nrm;
// Quantized positions (precision=): one integer per axis, as the server
// sent them, dequantized here as offset + q × scale (per draw).
layout(location = 4) in float a_qx;
layout(location = 5) in float a_qy;
layout(location = 6) in float a_qz;
uniform bool u_quant;
uniform vec3 u_qoff, u_qscale;
// The view maps coordinates relative to u_origin (near the target), taken
// before anything large is multiplied: u_qrel is u_qoff - u_origin, made
// in double precision by the page.
uniform vec3 u_origin, u_qrel;
uniform mat4 u_mvp;
uniform int u_kind, u_mode;
uniform ivec2 u_sel;
uniform bool u_hasSel;
uniform vec2 u_range, u_zr;
uniform vec3 u_pal[32], u_color;
uniform float u_ptWorld, u_ptScale, u_focal, u_dpr;
// The census (Renderer.census): vertex u_base + gl_VertexID on its own
// pixel of a u_grid[0]-wide canvas, one pixel big.
uniform bool u_census;
uniform int u_base;
uniform ivec2 u_grid;
out vec3 v_col, v_nrm, v_rel;
out float v_size;
vec3 viridis(float t) {
  t = clamp(t, 0.0, 1.0);
  vec3 c0 = vec3(0.267, 0.005, 0.329), c1 = vec3(0.231, 0.322, 0.545), c2 = vec3(0.129, 0.569, 0.549), c3 = vec3(0.369, 0.788, 0.384), c4 = vec3(0.992, 0.906, 0.145);
  if (t < 0.25) return mix(c0, c1, t * 4.0);
  if (t < 0.5) return mix(c1, c2, (t - 0.25) * 4.0);
  if (t < 0.75) return mix(c2, c3, (t - 0.5) * 4.0);
  return mix(c3, c4, (t - 0.75) * 4.0);
}
void main() {
  vec3 q = vec3(a_qx, a_qy, a_qz) * u_qscale;
  vec3 pos = u_quant ? u_qoff + q : a_pos;
  v_rel = u_quant ? u_qrel + q : a_pos - u_origin;
  gl_Position = u_mvp * vec4(v_rel, 1.0);
  vec3 c;
  if (u_mode == 0) c = viridis((pos.z - u_zr.x) / max(u_zr.y - u_zr.x, 1e-12));
  else if (u_mode == 1) c = (a_val != a_val) ? vec3(0.42) : viridis((a_val - u_range.x) / max(u_range.y - u_range.x, 1e-12));
  else if (u_mode == 2) c = (a_val < 0.0 || a_val != a_val) ? vec3(0.42) : u_pal[int(mod(a_val, 32.0))];
  else if (u_mode == 3) c = u_color;
  else if (u_mode == 5) c = (a_val != a_val) ? vec3(0.42) : vec3(floor(a_val / 65536.0), mod(floor(a_val / 256.0), 256.0), mod(a_val, 256.0)) / 255.0;
  else c = vec3(0.42, 0.43, 0.46);
  float grow = 1.0;
  if (u_hasSel) {
    if (a_oid == u_sel) { c = vec3(1.0, 0.3, 0.88); grow = 1.6; }
    else c *= 0.45;
  }
  v_col = c;
  v_nrm = a_nrm;
  // Points as big as they are (a share of the level's spacing) seen from
  // here, within 1..16 pixels, times the size slider.
  float px = clamp(u_ptWorld * u_focal / max(gl_Position.w, 1e-9), 1.0, 16.0) * u_ptScale * grow;
  v_size = px;
  gl_PointSize = px * u_dpr;
  if (u_census) {
    int i = u_base + gl_VertexID;
    gl_Position = vec4((vec2(i % u_grid.x, i / u_grid.x) + 0.5) / vec2(u_grid) * 2.0 - 1.0, 0.0, 1.0);
    gl_PointSize = 1.0;
    v_size = 1.0;
  }
}`;

const FS = `#version 300 es
precision highp float;
in vec3 v_col, v_nrm, v_rel;
in float v_size;
uniform int u_kind;
uniform float u_alpha;
uniform vec3 u_light;
// A tile whose children are drawn in its place hides itself there: the
// children are cells of a grid over the tile's cell, one mask bit each.
// Positions and the cells' corner u_cellLo are relative to u_origin (the
// page subtracts in double precision): absolute float32s are a whole
// unit apart at 10^7, and a point half a unit below a face fell in the
// cell above it.
uniform bool u_useMask;
uniform uvec2 u_mask;
uniform vec3 u_cellLo, u_cellSize;
uniform ivec3 u_cellN;
uniform bool u_census;
out vec4 o;
void main() {
  if (u_useMask) {
    ivec3 c = clamp(ivec3(floor((v_rel - u_cellLo) / max(u_cellSize, vec3(1e-30)))), ivec3(0), u_cellN - 1);
    int b = (c.x * u_cellN.y + c.y) * u_cellN.z + c.z;
    uint w = b < 32 ? u_mask.x : u_mask.y;
    if (((w >> uint(b & 31)) & 1u) == 1u) discard;
  }
  if (u_census) { o = vec4(1.0); return; }
  vec3 c = v_col;
  if (u_kind == 0 && v_size >= 3.0) {
    vec2 p = gl_PointCoord * 2.0 - 1.0;
    float r2 = dot(p, p);
    if (r2 > 1.0) discard;
    c *= 0.55 + 0.45 * sqrt(1.0 - r2);
  } else if (u_kind == 2) {
    // Two-sided: a surface seen from inside is lit as well.
    vec3 n = normalize(v_nrm);
    float d = abs(dot(n, u_light));
    c = c * (0.22 + 0.78 * d) + vec3(0.22) * pow(d, 28.0);
  }
  o = vec4(c, u_alpha);
}`;

export const PALETTE = [
  [0.90, 0.36, 0.30], [0.30, 0.69, 0.29], [0.22, 0.49, 0.72], [0.60, 0.31, 0.64], [1.00, 0.50, 0.00], [1.00, 1.00, 0.20],
  [0.65, 0.34, 0.16], [0.97, 0.51, 0.75], [0.60, 0.60, 0.60], [0.40, 0.76, 0.65], [0.99, 0.55, 0.38], [0.55, 0.63, 0.80],
];
export const CLEAR = [0.05, 0.06, 0.07];

const UNIFORMS = ['u_mvp', 'u_kind', 'u_mode', 'u_sel', 'u_hasSel', 'u_range', 'u_zr', 'u_pal', 'u_color', 'u_ptWorld', 'u_ptScale', 'u_focal', 'u_dpr',
  'u_alpha', 'u_light', 'u_useMask', 'u_mask', 'u_cellLo', 'u_cellSize', 'u_cellN', 'u_quant', 'u_qoff', 'u_qscale', 'u_origin', 'u_qrel',
  'u_census', 'u_base', 'u_grid'];

export class Renderer {
  constructor(canvas) {
    const gl = canvas.getContext('webgl2', { antialias: false, preserveDrawingBuffer: true });
    if (!gl) throw new Error('WebGL2 is not available in this browser');
    this.gl = gl;
    this.canvas = canvas;
    // Shaders compile in the background where the browser can
    // (KHR_parallel_shader_compile): a software renderer takes a while,
    // and the page handles its first tiles meanwhile.
    this.parallel = gl.getExtension('KHR_parallel_shader_compile');
    const prog = gl.createProgram();
    this.shaders = [[gl.VERTEX_SHADER, VS], [gl.FRAGMENT_SHADER, FS]].map(([type, src]) => {
      const s = gl.createShader(type);
      gl.shaderSource(s, src);
      gl.compileShader(s);
      gl.attachShader(prog, s);
      return s;
    });
    gl.linkProgram(prog);
    this.prog = prog;
    this.linked = false;
  }

  // ready resolves once the program is linked (rejects with the
  // compiler's message).
  ready() {
    const gl = this.gl, done = () => !this.parallel || gl.getProgramParameter(this.prog, this.parallel.COMPLETION_STATUS_KHR);
    return new Promise((resolve, reject) => {
      const check = () => {
        if (!done()) { setTimeout(check, 16); return; }
        try { this.finishLink(); resolve(); } catch (e) { reject(e); }
      };
      check();
    });
  }

  finishLink() {
    const gl = this.gl, prog = this.prog;
    if (!gl.getProgramParameter(prog, gl.LINK_STATUS)) {
      const log = this.shaders.map((s) => gl.getShaderInfoLog(s)).filter(Boolean).join('\n');
      throw new Error(`the viewer's shaders did not compile: ${log || gl.getProgramInfoLog(prog)}`);
    }
    this.u = {};
    for (const n of UNIFORMS) this.u[n] = gl.getUniformLocation(prog, n);
    gl.useProgram(prog);
    gl.uniform3fv(this.u.u_pal, new Float32Array(Array.from({ length: 32 }, (_, i) => PALETTE[i % PALETTE.length]).flat()));
    // Generic values for arrays a tile does not have (context state, not
    // per vertex array): no object, a normal facing up, no value.
    gl.vertexAttribI4i(2, -2147483648, 0, 0, 0);
    gl.vertexAttrib3f(3, 0, 0, 1);
    gl.vertexAttrib1f(1, NaN);
    for (let a = 4; a < 7; a++) gl.vertexAttrib1f(a, 0); // an axis the store lacks
    this.linked = true;
    this.warm();
  }

  // warm draws one point, line and triangle where nothing lands on screen:
  // a software renderer builds a pipeline for each kind on its first draw
  // (hundreds of milliseconds each), better done before the first tiles.
  warm() {
    const pos = new Float32Array([0, 0, 0, 1, 0, 0, 0, 1, 0]);
    const g = this.upload({ pos, edges: new Uint32Array([0, 1]), tris: new Uint32Array([0, 1, 2]) });
    const style = { mode: 3, range: [0, 1], zr: [0, 1], color: [0, 0, 0], alpha: 1, sel: null, ptWorld: 1 };
    const view = { glMvp: new Float32Array(16), origin: [0, 0, 0], focalPx: 1, light: [0, 0, 1] }; // w = 0 everywhere: clipped
    const lines = { ...g, tris: null }, points = { ...g, tris: null, lines: null };
    this.draw(view, [{ g, style, mask: null }, { g: lines, style, mask: null }, { g: points, style, mask: null }]);
    this.free(g);
  }

  // upload puts a tile's arrays on the GPU: its position parts (format.js:
  // quantized planes as they came, each axis an integer attribute the
  // vertex shader dequantizes, or float32 xyz; pos alone is one float
  // part), val (one float per vertex or null), ids (the object ids, a
  // BigInt64Array, or null: the shader reads each one as two 32-bit
  // halves, the selection's key, format.js idKey),
  // edges (uint32 pairs), tris (uint32 triples, with normals computed from
  // them). Each part is drawn on its own (its own offset and scale), so
  // edges and triangles, which index across rows, need one part (merge).
  // g.posBytes: the positions' bytes on the GPU.
  upload({ parts, pos, val, ids, edges, tris }) {
    const gl = this.gl;
    if (!parts) parts = [{ first: 0, count: pos.length / 3, pos }];
    if ((edges?.length || tris?.length) && parts.length !== 1) throw new Error('indexed drawing needs one position part');
    const n = parts.reduce((a, p) => Math.max(a, p.first + p.count), 0);
    const g = { bufs: [], parts: [], n, lines: null, nl: 0, tris: null, nt: 0, posBytes: 0 };
    const buffer = (data) => {
      const b = gl.createBuffer();
      gl.bindBuffer(gl.ARRAY_BUFFER, b);
      gl.bufferData(gl.ARRAY_BUFFER, data, gl.STATIC_DRAW);
      g.bufs.push(b);
      return b;
    };
    // Every part's planes (or floats) in one buffer, each at a multiple of
    // 4 bytes, copied straight from the answer.
    const arrays = parts.flatMap((p) => (p.pos ? [p.pos] : p.planes.filter(Boolean)));
    const at = [];
    for (const a of arrays) { at.push(g.posBytes); g.posBytes += Math.ceil(a.byteLength / 4) * 4; }
    const pb = buffer(g.posBytes);
    arrays.forEach((a, i) => gl.bufferSubData(gl.ARRAY_BUFFER, at[i], a));
    const vb = val ? buffer(val) : null, ob = ids ? buffer(ids) : null;
    const nb = tris && tris.length ? buffer(normals(parts[0], tris)) : null;
    const TYPES = { 1: gl.UNSIGNED_BYTE, 2: gl.UNSIGNED_SHORT, 4: gl.UNSIGNED_INT };
    let next = 0;
    for (const p of parts) {
      const vao = gl.createVertexArray();
      gl.bindVertexArray(vao);
      const attr = (loc, b, size, type, off, int) => {
        gl.bindBuffer(gl.ARRAY_BUFFER, b);
        gl.enableVertexAttribArray(loc);
        if (int) gl.vertexAttribIPointer(loc, size, type, 0, off);
        else gl.vertexAttribPointer(loc, size, type, false, 0, off);
      };
      if (p.pos) attr(0, pb, 3, gl.FLOAT, at[next++]);
      else for (let a = 0; a < 3; a++) if (p.planes[a]) attr(4 + a, pb, 1, TYPES[p.planes[a].BYTES_PER_ELEMENT], at[next++]);
      if (vb) attr(1, vb, 1, gl.FLOAT, p.first * 4);
      // Each int64 id as two int32s, low (little-endian: first) and high.
      if (ob) attr(2, ob, 2, gl.INT, p.first * 8, true);
      if (nb) attr(3, nb, 3, gl.FLOAT, p.first * 12);
      gl.bindVertexArray(null);
      g.parts.push({ vao, first: p.first, count: p.count, quant: !p.pos, offset: p.offset, scale: p.scale });
    }
    const elements = (data) => {
      const b = gl.createBuffer();
      gl.bindBuffer(gl.ELEMENT_ARRAY_BUFFER, b);
      gl.bufferData(gl.ELEMENT_ARRAY_BUFFER, data, gl.STATIC_DRAW);
      return b;
    };
    if (edges && edges.length) { g.lines = elements(edges); g.nl = edges.length; }
    if (tris && tris.length) { g.tris = elements(tris); g.nt = tris.length; }
    gl.bindBuffer(gl.ELEMENT_ARRAY_BUFFER, null);
    gl.bindBuffer(gl.ARRAY_BUFFER, null);
    return g;
  }

  free(g) {
    const gl = this.gl;
    for (const b of g.bufs) gl.deleteBuffer(b);
    if (g.lines) gl.deleteBuffer(g.lines);
    if (g.tris) gl.deleteBuffer(g.tris);
    for (const p of g.parts) gl.deleteVertexArray(p.vao);
  }

  resize() {
    const c = this.canvas;
    const w = Math.max(1, Math.round(c.clientWidth * devicePixelRatio)), h = Math.max(1, Math.round(c.clientHeight * devicePixelRatio));
    if (c.width !== w || c.height !== h) { c.width = w; c.height = h; }
  }

  // draw renders items: [{g, style: {mode, range, zr, color, alpha, sel,
  // ptWorld, ptScale}, mask: null or {bits: [lo32, hi32], lo, size, n}, last}].
  // Opaque items first, then translucent ones without depth writes.
  draw(view, items) {
    const gl = this.gl, c = this.canvas;
    if (!this.linked) return;
    this.resize();
    gl.viewport(0, 0, c.width, c.height);
    gl.clearColor(CLEAR[0], CLEAR[1], CLEAR[2], 1);
    gl.clear(gl.COLOR_BUFFER_BIT | gl.DEPTH_BUFFER_BIT);
    gl.enable(gl.DEPTH_TEST);
    this.setView(view);
    const order = [...items.filter((it) => it.style.alpha >= 1 && !it.last), ...items.filter((it) => it.style.alpha < 1 && !it.last), ...items.filter((it) => it.last)];
    for (const it of order) {
      const s = it.style, g = it.g;
      // Highlights drawn over what they highlight win the depth tie.
      gl.depthFunc(it.last ? gl.LEQUAL : gl.LESS);
      if (s.alpha < 1) { gl.enable(gl.BLEND); gl.blendFunc(gl.SRC_ALPHA, gl.ONE_MINUS_SRC_ALPHA); gl.depthMask(false); } else { gl.disable(gl.BLEND); gl.depthMask(true); }
      this.setItem(view, it);
      for (const p of g.parts) {
        this.setPart(view, p);
        if (g.tris) {
          gl.uniform1i(this.u.u_kind, 2);
          gl.bindBuffer(gl.ELEMENT_ARRAY_BUFFER, g.tris);
          gl.drawElements(gl.TRIANGLES, g.nt, gl.UNSIGNED_INT, 0);
        } else if (g.lines) {
          gl.uniform1i(this.u.u_kind, 1);
          gl.bindBuffer(gl.ELEMENT_ARRAY_BUFFER, g.lines);
          gl.drawElements(gl.LINES, g.nl, gl.UNSIGNED_INT, 0);
        } else {
          gl.uniform1i(this.u.u_kind, 0);
          gl.drawArrays(gl.POINTS, 0, p.count);
        }
      }
    }
    gl.bindVertexArray(null);
    gl.disable(gl.BLEND);
    gl.depthMask(true);
    gl.depthFunc(gl.LESS);
  }

  // setView sets what every item of a frame shares.
  setView(view) {
    const gl = this.gl, o = view.origin, l = view.light;
    gl.useProgram(this.prog);
    gl.uniform1i(this.u.u_census, 0);
    gl.uniformMatrix4fv(this.u.u_mvp, false, view.glMvp);
    gl.uniform3f(this.u.u_origin, o[0], o[1], o[2]);
    gl.uniform1f(this.u.u_focal, view.focalPx);
    gl.uniform1f(this.u.u_dpr, devicePixelRatio);
    gl.uniform3f(this.u.u_light, l[0], l[1], l[2]);
  }

  // setItem sets an item's style and child mask.
  setItem(view, it) {
    const gl = this.gl, s = it.style, m = it.mask, o = view.origin;
    gl.uniform1i(this.u.u_mode, s.mode);
    gl.uniform2f(this.u.u_range, s.range[0], s.range[1]);
    gl.uniform2f(this.u.u_zr, s.zr[0], s.zr[1]);
    gl.uniform3fv(this.u.u_color, s.color);
    gl.uniform1f(this.u.u_alpha, s.alpha);
    gl.uniform1i(this.u.u_hasSel, s.sel !== null && s.sel !== undefined ? 1 : 0);
    gl.uniform2i(this.u.u_sel, ...(s.sel ?? [0, 0]));
    gl.uniform1f(this.u.u_ptWorld, s.ptWorld);
    gl.uniform1f(this.u.u_ptScale, s.ptScale ?? 1);
    gl.uniform1i(this.u.u_useMask, m ? 1 : 0);
    if (m) {
      gl.uniform2ui(this.u.u_mask, m.bits[0], m.bits[1]);
      gl.uniform3f(this.u.u_cellLo, m.lo[0] - o[0], m.lo[1] - o[1], m.lo[2] - o[2]);
      gl.uniform3fv(this.u.u_cellSize, m.size);
      gl.uniform3iv(this.u.u_cellN, m.n);
    }
  }

  // setPart binds a position part and its dequantization.
  setPart(view, p) {
    const gl = this.gl, o = view.origin;
    gl.uniform1i(this.u.u_quant, p.quant ? 1 : 0);
    if (p.quant) {
      gl.uniform3f(this.u.u_qoff, p.offset[0], p.offset[1], p.offset[2]);
      gl.uniform3f(this.u.u_qrel, p.offset[0] - o[0], p.offset[1] - o[1], p.offset[2] - o[2]);
      gl.uniform3f(this.u.u_qscale, p.scale[0], p.scale[1], p.scale[2]);
    }
    gl.bindVertexArray(p.vao);
  }

  // census says which vertices of each item the GPU keeps (its child
  // mask): every vertex drawn as one pixel of its own, the pixels read
  // back. Returns a Uint8Array per item, 1 for a vertex kept. The canvas
  // then holds the census; the caller draws the frame again.
  census(view, items) {
    const gl = this.gl, c = this.canvas;
    if (!this.linked) throw new Error('the shaders are not ready');
    this.resize();
    const W = c.width, H = c.height, px = new Uint8Array(W * H * 4), out = items.map((it) => new Uint8Array(it.g.n));
    gl.viewport(0, 0, W, H);
    gl.disable(gl.DEPTH_TEST);
    gl.disable(gl.BLEND);
    gl.clearColor(0, 0, 0, 0);
    this.setView(view);
    gl.uniform1i(this.u.u_census, 1);
    gl.uniform2i(this.u.u_grid, W, H);
    gl.uniform1i(this.u.u_kind, 0);
    // Batches of at most W × H vertices, pixel j showing vertex at[j] of
    // item of[j].
    const of = new Int32Array(W * H), at = new Int32Array(W * H);
    let used = 0;
    const flush = () => {
      gl.readPixels(0, 0, W, H, gl.RGBA, gl.UNSIGNED_BYTE, px);
      for (let j = 0; j < used; j++) if (px[4 * j + 3]) out[of[j]][at[j]] = 1;
      used = 0;
      gl.clear(gl.COLOR_BUFFER_BIT);
    };
    gl.clear(gl.COLOR_BUFFER_BIT);
    items.forEach((it, k) => {
      this.setItem(view, it);
      for (const p of it.g.parts) {
        this.setPart(view, p);
        for (let first = 0; first < p.count;) {
          if (used === W * H) flush();
          const n = Math.min(p.count - first, W * H - used);
          gl.uniform1i(this.u.u_base, used - first);
          gl.drawArrays(gl.POINTS, first, n);
          for (let i = 0; i < n; i++) { of[used] = k; at[used++] = p.first + first + i; }
          first += n;
        }
      }
    });
    flush();
    gl.bindVertexArray(null);
    gl.uniform1i(this.u.u_census, 0);
    gl.enable(gl.DEPTH_TEST);
    return out;
  }

  // coverage counts the pixels that differ from the background.
  coverage() {
    const gl = this.gl, c = this.canvas, px = new Uint8Array(c.width * c.height * 4);
    gl.readPixels(0, 0, c.width, c.height, gl.RGBA, gl.UNSIGNED_BYTE, px);
    const bg = CLEAR.map((v) => Math.round(v * 255));
    let n = 0;
    for (let i = 0; i < px.length; i += 4) {
      if (Math.abs(px[i] - bg[0]) > 6 || Math.abs(px[i + 1] - bg[1]) > 6 || Math.abs(px[i + 2] - bg[2]) > 6) n++;
    }
    return n;
  }
}

// normals are per-vertex normals of a position part: the area-weighted
// sum of the normals of the faces around each vertex. A quantized part's
// differences are taken on its integers (the offset cancels).
export function normals(part, tris) {
  const n = new Float32Array(part.count * 3), P = part.pos, Q = part.planes, sc = part.scale;
  const c = P ? (i, k) => P[3 * i + k] : (i, k) => (Q[k] ? Q[k][i] * sc[k] : 0);
  for (let t = 0; t + 2 < tris.length; t += 3) {
    const a = tris[t], b = tris[t + 1], d = tris[t + 2];
    const ux = c(b, 0) - c(a, 0), uy = c(b, 1) - c(a, 1), uz = c(b, 2) - c(a, 2);
    const vx = c(d, 0) - c(a, 0), vy = c(d, 1) - c(a, 1), vz = c(d, 2) - c(a, 2);
    const nx = uy * vz - uz * vy, ny = uz * vx - ux * vz, nz = ux * vy - uy * vx;
    for (const i of [3 * a, 3 * b, 3 * d]) { n[i] += nx; n[i + 1] += ny; n[i + 2] += nz; }
  }
  for (let i = 0; i < n.length; i += 3) {
    const l = Math.hypot(n[i], n[i + 1], n[i + 2]);
    if (l > 0) { n[i] /= l; n[i + 1] /= l; n[i + 2] /= l; } else n[i + 2] = 1;
  }
  return n;
}

// triangles turns faces of width w (quads and larger polygons) into
// triangle fans.
export function triangles(faces, w) {
  if (w === 3) return faces;
  const n = faces.length / w, out = new Uint32Array(n * (w - 2) * 3);
  let o = 0;
  for (let f = 0; f < n; f++) for (let k = 1; k + 1 < w; k++) {
    out[o++] = faces[f * w]; out[o++] = faces[f * w + k]; out[o++] = faces[f * w + k + 1];
  }
  return out;
}
