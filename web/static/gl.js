// WebGL2 drawing: points, lines and triangles from typed arrays, coloured
// in the shader by a value channel (numeric colormap or categorical
// palette), so colouring never loops over vertices in JavaScript.

const VS = `#version 300 es
in vec3 a_pos; in float a_val;
uniform mat4 u_mvp; uniform float u_size; uniform int u_mode; uniform vec2 u_range;
uniform vec3 u_pal[32]; uniform vec3 u_color; uniform vec3 u_zr;
out vec3 v_col;
vec3 viridis(float t) {
  t = clamp(t, 0.0, 1.0);
  vec3 c0 = vec3(0.267,0.005,0.329), c1 = vec3(0.231,0.322,0.545), c2 = vec3(0.129,0.569,0.549), c3 = vec3(0.369,0.788,0.384), c4 = vec3(0.992,0.906,0.145);
  if (t < 0.25) return mix(c0, c1, t * 4.0);
  if (t < 0.5) return mix(c1, c2, (t - 0.25) * 4.0);
  if (t < 0.75) return mix(c2, c3, (t - 0.5) * 4.0);
  return mix(c3, c4, (t - 0.75) * 4.0);
}
void main() {
  gl_Position = u_mvp * vec4(a_pos, 1.0);
  gl_PointSize = u_size;
  if (u_mode == 1) v_col = viridis((a_val - u_range.x) / max(u_range.y - u_range.x, 1e-12));
  else if (u_mode == 2) v_col = u_pal[int(mod(max(a_val, 0.0), 32.0))];
  else if (u_mode == 3) v_col = u_color;
  else v_col = viridis((a_pos.z - u_zr.x) / max(u_zr.y - u_zr.x, 1e-12));
}`;
const FS = `#version 300 es
precision mediump float; in vec3 v_col; out vec4 o;
void main() { o = vec4(v_col, 1.0); }`;

export const PALETTE = [
  [0.90, 0.36, 0.30], [0.30, 0.69, 0.29], [0.22, 0.49, 0.72], [0.60, 0.31, 0.64], [1.00, 0.50, 0.00], [1.00, 1.00, 0.20],
  [0.65, 0.34, 0.16], [0.97, 0.51, 0.75], [0.60, 0.60, 0.60], [0.40, 0.76, 0.65], [0.99, 0.55, 0.38], [0.55, 0.63, 0.80],
];

export class Renderer {
  constructor(canvas) {
    const gl = canvas.getContext('webgl2', { antialias: false, preserveDrawingBuffer: true });
    if (!gl) throw new Error('WebGL2 is not available in this browser');
    this.gl = gl;
    this.canvas = canvas;
    const prog = gl.createProgram();
    for (const [type, src] of [[gl.VERTEX_SHADER, VS], [gl.FRAGMENT_SHADER, FS]]) {
      const s = gl.createShader(type);
      gl.shaderSource(s, src);
      gl.compileShader(s);
      if (!gl.getShaderParameter(s, gl.COMPILE_STATUS)) throw new Error(gl.getShaderInfoLog(s));
      gl.attachShader(prog, s);
    }
    gl.bindAttribLocation(prog, 0, 'a_pos');
    gl.bindAttribLocation(prog, 1, 'a_val');
    gl.linkProgram(prog);
    if (!gl.getProgramParameter(prog, gl.LINK_STATUS)) throw new Error(gl.getProgramInfoLog(prog));
    this.prog = prog;
    this.u = {};
    for (const n of ['u_mvp', 'u_size', 'u_mode', 'u_range', 'u_pal', 'u_color', 'u_zr']) this.u[n] = gl.getUniformLocation(prog, n);
    this.layers = new Map();
  }

  // setLayer uploads (or replaces) a named layer.
  setLayer(name, { pos, val, edges, faces, faceWidth, color, size, mode }) {
    const gl = this.gl;
    this.removeLayer(name);
    const vao = gl.createVertexArray();
    gl.bindVertexArray(vao);
    const pb = gl.createBuffer();
    gl.bindBuffer(gl.ARRAY_BUFFER, pb);
    gl.bufferData(gl.ARRAY_BUFFER, pos, gl.STATIC_DRAW);
    gl.enableVertexAttribArray(0);
    gl.vertexAttribPointer(0, 3, gl.FLOAT, false, 0, 0);
    const bufs = [pb];
    if (val) {
      const vb = gl.createBuffer();
      gl.bindBuffer(gl.ARRAY_BUFFER, vb);
      gl.bufferData(gl.ARRAY_BUFFER, val, gl.STATIC_DRAW);
      gl.enableVertexAttribArray(1);
      gl.vertexAttribPointer(1, 1, gl.FLOAT, false, 0, 0);
      bufs.push(vb);
    } else {
      gl.disableVertexAttribArray(1);
      gl.vertexAttrib1f(1, 0);
    }
    let lines = null, tris = null;
    if (edges && edges.length) {
      lines = gl.createBuffer();
      gl.bindBuffer(gl.ELEMENT_ARRAY_BUFFER, lines);
      gl.bufferData(gl.ELEMENT_ARRAY_BUFFER, edges, gl.STATIC_DRAW);
    }
    let nt = 0;
    if (faces && faces.length && faceWidth >= 3) {
      const idx = faceWidth === 3 ? faces : fan(faces, faceWidth);
      tris = gl.createBuffer();
      gl.bindBuffer(gl.ELEMENT_ARRAY_BUFFER, tris);
      gl.bufferData(gl.ELEMENT_ARRAY_BUFFER, idx, gl.STATIC_DRAW);
      nt = idx.length;
    }
    gl.bindVertexArray(null);
    this.layers.set(name, { vao, bufs, n: pos.length / 3, lines, nl: edges ? edges.length : 0, tris, nt, color, size: size || 2, mode: mode ?? 0, prim: arguments[1].prim || 'points' });
  }

  removeLayer(name) {
    const l = this.layers.get(name);
    if (!l) return;
    const gl = this.gl;
    for (const b of l.bufs) gl.deleteBuffer(b);
    if (l.lines) gl.deleteBuffer(l.lines);
    if (l.tris) gl.deleteBuffer(l.tris);
    gl.deleteVertexArray(l.vao);
    this.layers.delete(name);
  }

  draw(mvp, style) {
    const gl = this.gl, c = this.canvas;
    const w = c.clientWidth * devicePixelRatio | 0, h = c.clientHeight * devicePixelRatio | 0;
    if (c.width !== w || c.height !== h) { c.width = w; c.height = h; }
    gl.viewport(0, 0, c.width, c.height);
    gl.clearColor(0.05, 0.06, 0.07, 1);
    gl.clear(gl.COLOR_BUFFER_BIT | gl.DEPTH_BUFFER_BIT);
    gl.enable(gl.DEPTH_TEST);
    gl.useProgram(this.prog);
    gl.uniformMatrix4fv(this.u.u_mvp, false, mvp);
    gl.uniform2f(this.u.u_range, style.range[0], style.range[1]);
    gl.uniform3f(this.u.u_zr, style.zr[0], style.zr[1], 0);
    gl.uniform3fv(this.u.u_pal, new Float32Array(Array.from({ length: 32 }, (_, i) => PALETTE[i % PALETTE.length]).flat()));
    for (const l of this.layers.values()) {
      gl.bindVertexArray(l.vao);
      const mode = l.mode === 'style' ? style.mode : l.mode;
      gl.uniform1i(this.u.u_mode, mode);
      gl.uniform3fv(this.u.u_color, l.color || [1, 1, 1]);
      gl.uniform1f(this.u.u_size, l.size * devicePixelRatio);
      if (l.tris && l.nt) {
        gl.bindBuffer(gl.ELEMENT_ARRAY_BUFFER, l.tris);
        gl.drawElements(gl.TRIANGLES, l.nt, gl.UNSIGNED_INT, 0);
      }
      if (l.lines) {
        gl.bindBuffer(gl.ELEMENT_ARRAY_BUFFER, l.lines);
        gl.drawElements(gl.LINES, l.nl, gl.UNSIGNED_INT, 0);
      }
      gl.drawArrays(l.prim === 'lines' ? gl.LINES : gl.POINTS, 0, l.n);
    }
    gl.bindVertexArray(null);
  }
}

// fan triangulates polygons of width w (quads and larger).
function fan(faces, w) {
  const n = faces.length / w, out = new Uint32Array(n * (w - 2) * 3);
  let o = 0;
  for (let f = 0; f < n; f++) for (let k = 1; k + 1 < w; k++) {
    out[o++] = faces[f * w]; out[o++] = faces[f * w + k]; out[o++] = faces[f * w + k + 1];
  }
  return out;
}
