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
      case 15: out.trailer = JSON.parse(new TextDecoder().decode(new Uint8Array(buf, off, n))); break;
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

// flatten joins the batches of one or more answers (pages of one box)
// into the arrays the GPU takes: positions as float32 xyz, one float per
// vertex of the attribute named attr (first channel; NaN where missing),
// object ids as int32 (ids beyond 2^31 wrap; they only drive the
// selection highlight), and connectivity as it comes: its indices
// already count the rows of the whole answer, pages in order.
export function flatten(pages, attr) {
  let rows = 0, ne = 0, nf = 0;
  for (const p of pages) {
    rows += p.rows;
    if (p.edges) ne += p.edges.length;
    if (p.faces) nf += p.faces.length;
  }
  const h = pages[0].header, dims = h.dims;
  const ai = attr ? h.attribute_info.findIndex((a) => a.name === attr) : -1;
  const pos = new Float32Array(rows * 3);
  const val = ai >= 0 ? new Float32Array(rows).fill(NaN) : null;
  const oid = h.has_object_ids ? new Int32Array(rows) : null;
  const edges = ne ? new Uint32Array(ne) : null;
  const faceWidth = pages.find((p) => p.faces)?.faceWidth || 0;
  const faces = nf ? new Uint32Array(nf) : null;
  let r = 0, e = 0, f = 0;
  for (const p of pages) {
    for (const b of p.batches) {
      const v = b.vertices, z = b.quant;
      if (z) {
        for (let k = 0; k < Math.min(dims, 3); k++) {
          const o = z.offset[k], s = z.scale[k], q = z.planes[k];
          for (let i = 0; i < b.rows; i++) pos[(r + i) * 3 + k] = o + q[i] * s;
        }
      } else if (dims === 3 && v instanceof Float32Array) pos.set(v, r * 3);
      else for (let i = 0; i < b.rows; i++) for (let k = 0; k < 3; k++) pos[(r + i) * 3 + k] = k < dims ? Number(v[i * dims + k]) : 0;
      if (val && b.attrs[ai]) {
        const a = b.attrs[ai], ch = h.attribute_info[ai].channels || 1;
        for (let i = 0; i < b.rows; i++) val[r + i] = Number(a[i * ch]);
      }
      if (oid && b.ids) {
        // The low 32 bits of each little-endian int64.
        const w = new Int32Array(b.ids.buffer, b.ids.byteOffset, b.rows * 2);
        for (let i = 0; i < b.rows; i++) oid[r + i] = w[2 * i];
      }
      r += b.rows;
    }
    // A page may carry an empty block (a coarse level's faces): nothing to copy.
    if (p.edges?.length) { edges.set(p.edges, e); e += p.edges.length; }
    if (p.faces?.length) { faces.set(p.faces, f); f += p.faces.length; }
  }
  return { rows, pos, val, oid, edges, faces, faceWidth };
}
