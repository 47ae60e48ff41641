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
  return new T(buf, off, bytes / T.BYTES_PER_ELEMENT);
}

export function parseBinary(buf) {
  const dv = new DataView(buf);
  const magic = new TextDecoder().decode(new Uint8Array(buf, 0, 6));
  if (magic !== 'ZVFBIN') throw new Error('not a zvfserve binary response');
  const hlen = Number(dv.getBigUint64(8, true));
  const header = JSON.parse(new TextDecoder().decode(new Uint8Array(buf, 16, hlen)));
  const out = { header, batches: [], edges: null, faces: null, faceWidth: 0, trailer: null, rows: 0 };
  let p = 16 + Math.ceil(hlen / 8) * 8;
  let cur = null;
  while (p + 16 <= buf.byteLength) {
    const kind = dv.getUint32(p, true), aux = dv.getUint32(p + 4, true);
    const n = Number(dv.getBigUint64(p + 8, true));
    const off = p + 16;
    if (off + n > buf.byteLength) throw new Error('truncated response');
    switch (kind) {
      case 1:
        cur = { rows: aux, vertices: view(header.vertex_dtype, buf, off, n), ids: null, attrs: [] };
        out.batches.push(cur);
        out.rows += aux;
        break;
      case 2: cur.ids = new BigInt64Array(buf, off, n / 8); break;
      case 3: cur.attrs[aux] = view(header.attribute_info[aux].dtype, buf, off, n); break;
      case 4: out.edges = new Uint32Array(buf, off, n / 4); break;
      case 5: out.faces = new Uint32Array(buf, off, n / 4); out.faceWidth = aux; break;
      case 15: out.trailer = JSON.parse(new TextDecoder().decode(new Uint8Array(buf, off, n))); break;
    }
    p = off + Math.ceil(n / 8) * 8;
  }
  if (!out.trailer) throw new Error('response was cut off (no trailer)');
  return out;
}

// Flattens batches into single Float32Arrays (positions, one attribute
// channel) for the GPU.
export function flatten(res, attrIndex) {
  const dims = res.header.dims;
  const pos = new Float32Array(res.rows * 3);
  const val = attrIndex >= 0 ? new Float32Array(res.rows) : null;
  const ids = res.header.has_object_ids ? new Float64Array(res.rows) : null;
  let r = 0;
  for (const b of res.batches) {
    const v = b.vertices;
    if (dims === 3 && v instanceof Float32Array) pos.set(v, r * 3);
    else for (let i = 0; i < b.rows; i++) for (let k = 0; k < 3; k++) pos[(r + i) * 3 + k] = k < dims ? Number(v[i * dims + k]) : 0;
    if (val && b.attrs[attrIndex]) {
      const a = b.attrs[attrIndex], ch = res.header.attribute_info[attrIndex].channels || 1;
      for (let i = 0; i < b.rows; i++) val[r + i] = Number(a[i * ch]);
    }
    if (ids && b.ids) for (let i = 0; i < b.rows; i++) ids[r + i] = Number(b.ids[i]);
    r += b.rows;
  }
  return { pos, val, ids };
}
