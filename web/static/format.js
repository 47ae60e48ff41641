// Parses the binary vertex format (docs/binary-format.md) into typed-array
// views over the response buffer: no per-vertex JavaScript objects.

const TYPED = {
  float32: Float32Array, float64: Float64Array, int8: Int8Array, uint8: Uint8Array,
  int16: Int16Array, uint16: Uint16Array, int32: Int32Array, uint32: Uint32Array,
  int64: BigInt64Array, uint64: BigUint64Array, bool: Uint8Array,
};

function view(dtype, buf, off, bytes) {
  const T = TYPED[dtype];
  if (!T) throw new Error(`unsupported dtype ${dtype}`);
  if (bytes % T.BYTES_PER_ELEMENT) throw new Error(`a ${dtype} block of ${bytes} bytes`);
  return new T(buf, off, bytes / T.BYTES_PER_ELEMENT);
}

// parseBinary checks every length against the bytes present before making
// a view, so a cut or malformed answer is an Error, never a wrong picture.
export function parseBinary(buf) {
  if (buf.byteLength < 16) throw new Error('not a zvfserve binary response');
  const dv = new DataView(buf);
  const magic = new TextDecoder().decode(new Uint8Array(buf, 0, 6));
  if (magic !== 'ZVFBIN') throw new Error('not a zvfserve binary response');
  const hlen = Number(dv.getBigUint64(8, true));
  if (hlen > buf.byteLength - 16) throw new Error('truncated response header');
  const header = JSON.parse(new TextDecoder().decode(new Uint8Array(buf, 16, hlen)));
  const out = { header, batches: [], edges: null, faces: null, faceWidth: 0, trailer: null, rows: 0 };
  let p = 16 + Math.ceil(hlen / 8) * 8;
  let cur = null;
  const need = (what) => { if (!cur) throw new Error(`${what} block before any vertices`); };
  while (p + 16 <= buf.byteLength) {
    const kind = dv.getUint32(p, true), aux = dv.getUint32(p + 4, true);
    const n = Number(dv.getBigUint64(p + 8, true));
    const off = p + 16;
    if (n > buf.byteLength - off) throw new Error('truncated response');
    switch (kind) {
      case 1:
        cur = { rows: aux, vertices: view(header.vertex_dtype, buf, off, n), ids: null, attrs: [] };
        if (cur.vertices.length !== aux * header.dims) throw new Error('vertex block size does not match its rows');
        out.batches.push(cur);
        out.rows += aux;
        break;
      case 6: {
        // Quantized vertices (precision=): dims float64 offsets and
        // scales, then one plane of rows unsigned aux-bit integers per
        // axis; flatten decodes offset + q × scale.
        const T = { 8: Uint8Array, 16: Uint16Array, 32: Uint32Array }[aux], d = header.dims;
        if (!T || n < 16 * d || (n - 16 * d) % (d * T.BYTES_PER_ELEMENT)) throw new Error(`a quantized vertex block of ${n} bytes at ${aux} bits`);
        const rows = (n - 16 * d) / (d * T.BYTES_PER_ELEMENT);
        const head = new Float64Array(buf, off, 2 * d);
        const planes = [];
        for (let a = 0; a < d; a++) planes.push(new T(buf, off + 16 * d + a * rows * T.BYTES_PER_ELEMENT, rows));
        cur = { rows, vertices: null, quant: { offset: head.subarray(0, d), scale: head.subarray(d), planes }, ids: null, attrs: [] };
        out.batches.push(cur);
        out.rows += rows;
        break;
      }
      case 2:
        need('object id');
        if (n !== cur.rows * 8) throw new Error('object id block size does not match its rows');
        cur.ids = new BigInt64Array(buf, off, n / 8);
        break;
      case 3: {
        need('attribute');
        const info = header.attribute_info[aux];
        if (!info) throw new Error(`attribute block ${aux} is not in the header`);
        cur.attrs[aux] = view(info.dtype, buf, off, n);
        break;
      }
      case 4: out.edges = view('uint32', buf, off, n); break;
      case 5: out.faces = view('uint32', buf, off, n); out.faceWidth = aux; break;
      // Exactly: an object attribute (a uint64 segment id) past 2^53.
      case 15: out.trailer = JSON.parse(new TextDecoder().decode(new Uint8Array(buf, off, n)), exactJSON); break;
    }
    p = off + Math.ceil(n / 8) * 8;
  }
  if (!out.trailer) throw new Error('response was cut off (no trailer)');
  // Indices count the rows of the whole answer (a later page's reach back
  // into earlier ones); none may name a row past this page.
  const end = (out.trailer.offset || 0) + out.rows;
  for (const idx of [out.edges, out.faces]) {
    if (idx) for (let i = 0; i < idx.length; i++) if (idx[i] >= end) throw new Error('connectivity names a row that is not in the answer');
  }
  return out;
}

// flatten joins the batches of one or more answers (pages of one box):
// positions as parts, one per batch, as they came (the GPU dequantizes,
// gl.js), one float per vertex of the attribute named attr (first
// channel; NaN where missing), object ids as they came (int64, −1: none;
// shown, asked for and highlighted exactly: idKey), and connectivity as it comes: its indices already count the
// rows of the whole answer, pages in order.
//
// A part is rows [first, first + count) of the answer, either quantized:
// {offset, scale, planes, bits}, axis a of row i being offset[a] +
// planes[a][i − first] × scale[a] (an axis the store lacks has no plane,
// offset and scale 0), or exact: {pos}, float32 xyz.
export function flatten(pages, attr) {
  let rows = 0, ne = 0, nf = 0;
  for (const p of pages) {
    rows += p.rows;
    if (p.edges) ne += p.edges.length;
    if (p.faces) nf += p.faces.length;
  }
  const h = pages[0].header, dims = h.dims;
  const ai = attr ? h.attribute_info.findIndex((a) => a.name === attr) : -1;
  const parts = [];
  const val = ai >= 0 ? new Float32Array(rows).fill(NaN) : null;
  const ids = h.has_object_ids ? new BigInt64Array(rows) : null;
  const edges = ne ? new Uint32Array(ne) : null;
  const faceWidth = pages.find((p) => p.faces)?.faceWidth || 0;
  const faces = nf ? new Uint32Array(nf) : null;
  let r = 0, e = 0, f = 0;
  for (const p of pages) {
    for (const b of p.batches) {
      const v = b.vertices, z = b.quant;
      if (!b.rows) continue;
      if (z && z.planes[0].BYTES_PER_ELEMENT === 4) {
        // 32-bit integers: more than a float32 (the vertex shader) holds
        // exactly; decoded here.
        const pos = new Float32Array(b.rows * 3);
        for (let k = 0; k < Math.min(dims, 3); k++) {
          const o = z.offset[k], s = z.scale[k], q = z.planes[k];
          for (let i = 0; i < b.rows; i++) pos[i * 3 + k] = o + q[i] * s;
        }
        parts.push({ first: r, count: b.rows, pos });
      } else if (z) {
        const axis = (x, a) => (a < dims ? x[a] : 0);
        parts.push({ first: r, count: b.rows, bits: z.planes[0].BYTES_PER_ELEMENT * 8, offset: [0, 1, 2].map((a) => axis(z.offset, a)), scale: [0, 1, 2].map((a) => axis(z.scale, a)), planes: [0, 1, 2].map((a) => (a < dims ? z.planes[a] : null)) });
      } else if (dims === 3 && v instanceof Float32Array) parts.push({ first: r, count: b.rows, pos: v });
      else {
        const pos = new Float32Array(b.rows * 3);
        for (let i = 0; i < b.rows; i++) for (let k = 0; k < 3; k++) pos[i * 3 + k] = k < dims ? Number(v[i * dims + k]) : 0;
        parts.push({ first: r, count: b.rows, pos });
      }
      if (val && b.attrs[ai]) {
        const a = b.attrs[ai], ch = h.attribute_info[ai].channels || 1;
        // A colour (isRGB) as one float, r·65536 + g·256 + b: 24 bits,
        // exact in a float32; the vertex shader takes it apart.
        if (isRGB(h.attribute_info[ai])) for (let i = 0; i < b.rows; i++) val[r + i] = a[i * ch] * 65536 + a[i * ch + 1] * 256 + a[i * ch + 2];
        else for (let i = 0; i < b.rows; i++) val[r + i] = Number(a[i * ch]);
      }
      if (ids && b.ids) ids.set(b.ids, r); // a native copy
      r += b.rows;
    }
    // A page may carry an empty block (a coarse level's faces): nothing to copy.
    if (p.edges?.length) { edges.set(p.edges, e); e += p.edges.length; }
    if (p.faces?.length) { faces.set(p.faces, f); f += p.faces.length; }
  }
  return { rows, parts, val, ids, edges, faces, faceWidth };
}

// idKey is the selection key of object id (a BigInt, or its decimal
// text): its low and high 32 bits as int32s, as the vertex shader reads
// the ids (gl.js, an ivec2: GLSL ES has no 64-bit integers).
export function idKey(id) {
  const v = BigInt(id);
  return [Number(BigInt.asIntN(32, v)), Number(BigInt.asIntN(32, v >> 32n))];
}

// MAX_ID: the largest object id (ZVF ids are int64), and the only ids the
// API looks up (/objects/{id}): whole numbers from 0 to it.
export const MAX_ID = 2n ** 63n - 1n;

// idOf is the canonical decimal of the object id text s names (digits, a
// whole number in [0, MAX_ID]; leading zeros dropped), or null: never
// through a Number, which rounds ids past 2^53.
export function idOf(s) {
  const t = String(s ?? '').trim();
  if (!/^\d{1,25}$/.test(t)) return null;
  const v = BigInt(t);
  return v <= MAX_ID ? v.toString() : null;
}

// exactJSON is a JSON.parse reviver that keeps every whole number written
// as digits that a Number would round (past 2^53: object ids, int64
// attributes) exactly, as a BigInt, where the browser gives a reviver the
// number's text (JSON.parse source text access); elsewhere such a number
// stays a rounded Number.
export function exactJSON(key, v, ctx) {
  if (typeof v !== 'number' || Number.isSafeInteger(v) || !Number.isInteger(v)) return v;
  const src = ctx && ctx.source;
  return typeof src === 'string' && /^-?\d+$/.test(src) ? BigInt(src) : v;
}

// showJSON is the text of a value parsed with exactJSON, BigInts as their
// digits.
export function showJSON(v) {
  if (typeof v === 'bigint') return v.toString();
  if (Array.isArray(v) && v.some((x) => typeof x === 'bigint')) return `[${v.map(showJSON).join(',')}]`;
  return JSON.stringify(v);
}

// showID is the text of an object id parsed with exactJSON: one a Number
// rounded (a browser without source text access) is marked ≈.
export const showID = (v) => (typeof v === 'number' && !Number.isSafeInteger(v) ? `≈${v}` : String(v));

// showValue is the text of a value parsed with exactJSON for people: a
// fraction to 7 significant digits (float32 holds about that many), a
// whole number in every digit (marked ≈ when the browser rounded it).
export function showValue(v) {
  if (typeof v === 'number') return Number.isInteger(v) ? showID(v) : String(+v.toPrecision(7));
  return showJSON(v);
}

// decode is the parts' positions as xyz numbers of type T: float64 gives
// the quantized values exactly as the format defines them.
export function decode(parts, T = Float32Array) {
  const n = parts.reduce((a, p) => Math.max(a, p.first + p.count), 0), out = new T(n * 3);
  for (const p of parts) {
    if (p.pos) { out.set(p.pos.subarray(0, p.count * 3), p.first * 3); continue; }
    for (let a = 0; a < 3; a++) {
      const q = p.planes[a], o = p.offset[a], s = p.scale[a];
      if (q) for (let i = 0; i < p.count; i++) out[(p.first + i) * 3 + a] = o + q[i] * s;
    }
  }
  return out;
}

// coordOf is a getter of part's axis k of its row i (counted from the
// part's first), in float64, without decoding the others.
export function coordOf(p) {
  if (p.pos) return (i, k) => p.pos[3 * i + k];
  return (i, k) => (p.planes[k] ? p.offset[k] + p.planes[k][i] * p.scale[k] : 0);
}

// Coords: a tile's positions on the CPU (picking, framing, the tests),
// decoded from its parts only when first asked for.
export class Coords {
  constructor(parts) { this.parts = parts; this.cached = null; }
  get decoded() { return this.cached !== null; }
  get pos() { return (this.cached ??= decode(this.parts)); }
  // at: row i's position in float64 (pos is float32: a whole unit at 10^7).
  at(i) {
    const p = this.parts.find((q) => q.first <= i && i < q.first + q.count);
    if (!p) return null;
    const c = coordOf(p);
    return [0, 1, 2].map((k) => c(i - p.first, k));
  }
}

// MAX_GPU_Q: the largest integer a float32 (the vertex shader's
// arithmetic) holds exactly; wider frames are decoded on the CPU.
const MAX_GPU_Q = 2 ** 24;

// frame puts quantized parts in one integer frame, for a draw that indexes
// across them (lines and faces): every part's scale must be the same and
// its offset a whole number of scales from the smallest (the server puts
// every batch on one lattice, docs/binary-format.md), and q then moves by
// that number. Returns {offset, scale, shifts, top} or null.
function frame(parts) {
  if (!parts.length || !parts.every((p) => p.planes)) return null;
  const scale = parts[0].scale, offset = [0, 1, 2].map((a) => Math.min(...parts.map((p) => p.offset[a])));
  let top = 0;
  const shifts = [];
  for (const p of parts) {
    const sh = [0, 0, 0];
    for (let a = 0; a < 3; a++) {
      if (p.scale[a] !== scale[a]) return null;
      if (!p.planes[a]) continue;
      const k = (p.offset[a] - offset[a]) / scale[a];
      if (!Number.isInteger(k)) return null;
      sh[a] = k;
      // The bound from the width; the values themselves only when it is
      // too wide.
      let hi = k + 2 ** p.bits - 1;
      if (hi >= 2 ** 16) { hi = 0; for (const q of p.planes[a]) if (q > hi) hi = q; hi += k; }
      top = Math.max(top, hi);
    }
    shifts.push(sh);
  }
  return top < MAX_GPU_Q ? { offset, scale, shifts, top } : null;
}

function planeType(top) { return top < 2 ** 8 ? Uint8Array : top < 2 ** 16 ? Uint16Array : Uint32Array; }

// merge makes one part of parts (rows 0 to the last): quantized in one
// integer frame when they allow it (frame), else float32 decoded here.
export function merge(parts) {
  if (parts.length === 1 && parts[0].first === 0) return parts[0];
  const n = parts.reduce((a, p) => Math.max(a, p.first + p.count), 0);
  const fr = frame(parts);
  if (!fr) return { first: 0, count: n, pos: decode(parts) };
  const T = planeType(fr.top), planes = [0, 1, 2].map((a) => (parts[0].planes[a] ? new T(n) : null));
  parts.forEach((p, j) => {
    for (let a = 0; a < 3; a++) {
      const out = planes[a], q = p.planes[a], k = fr.shifts[j][a];
      if (!out) continue;
      if (!k) out.set(q, p.first); // a native copy (and widening)
      else for (let i = 0; i < p.count; i++) out[p.first + i] = q[i] + k;
    }
  });
  return { first: 0, count: n, offset: fr.offset, scale: fr.scale, planes, bits: T.BYTES_PER_ELEMENT * 8 };
}

// gather is one part of the rows idx of parts (numbered as the answer's),
// in that order, starting at row first: quantized when the parts allow it.
export function gather(parts, idx, first) {
  const at = (r) => {
    let lo = 0, hi = parts.length - 1;
    while (lo < hi) { const m = (lo + hi + 1) >> 1; if (parts[m].first <= r) lo = m; else hi = m - 1; }
    return lo;
  };
  const fr = frame(parts);
  if (!fr) {
    const all = decode(parts), pos = new Float32Array(idx.length * 3);
    idx.forEach((r, i) => { pos[3 * i] = all[3 * r]; pos[3 * i + 1] = all[3 * r + 1]; pos[3 * i + 2] = all[3 * r + 2]; });
    return { first, count: idx.length, pos };
  }
  const T = planeType(fr.top), planes = [0, 1, 2].map((a) => (parts[0].planes[a] ? new T(idx.length) : null));
  idx.forEach((r, i) => {
    const j = at(r), p = parts[j];
    for (let a = 0; a < 3; a++) if (planes[a]) planes[a][i] = p.planes[a][r - p.first] + fr.shifts[j][a];
  });
  return { first, count: idx.length, offset: fr.offset, scale: fr.scale, planes, bits: T.BYTES_PER_ELEMENT * 8 };
}

// isRGB: an attribute that is a colour, 3 or 4 uint8 channels (RGB or
// RGBA, as point clouds store them): drawn as its red, green and blue, not
// through a colour map.
export function isRGB(info) {
  return info.dtype === 'uint8' && (info.channels === 3 || info.channels === 4) && !info.categories;
}
