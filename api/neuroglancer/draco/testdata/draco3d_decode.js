// Decodes Draco files with npm draco3d (Draco's own decoder, compiled to
// WebAssembly) for external_test.go. Usage:
//   node draco3d_decode.js DRACO3D_DIR FILE...
// DRACO3D_DIR is the folder holding draco3d.js. Prints one JSON line per
// file: the vertex and face counts, the position attribute's data type and
// component count, and the positions (int32) and faces (uint32) as base64
// of their little-endian bytes; or an error.
'use strict';
const fs = require('fs');
const path = require('path');

const [dir, ...files] = process.argv.slice(2);
const draco3d = require(path.resolve(dir, 'draco3d.js'));

draco3d.createDecoderModule({}).then((m) => {
  const decoder = new m.Decoder();
  for (const file of files) {
    const out = { file };
    const data = fs.readFileSync(file);
    const buf = new m.DecoderBuffer();
    buf.Init(new Int8Array(data.buffer, data.byteOffset, data.byteLength), data.byteLength);
    const mesh = new m.Mesh();
    try {
      if (decoder.GetEncodedGeometryType(buf) !== m.TRIANGULAR_MESH) {
        throw new Error('not a triangular mesh');
      }
      const status = decoder.DecodeBufferToMesh(buf, mesh);
      if (!status.ok()) {
        throw new Error('decode: ' + status.error_msg());
      }
      out.numPoints = mesh.num_points();
      out.numFaces = mesh.num_faces();
      const id = decoder.GetAttributeId(mesh, m.POSITION);
      if (id < 0) {
        throw new Error('no POSITION attribute');
      }
      const att = decoder.GetAttribute(mesh, id);
      out.dataType = att.data_type() === m.DT_INT32 ? 'int32' : String(att.data_type());
      out.components = att.num_components();

      const nv = out.numPoints * out.components;
      let ptr = m._malloc(Math.max(4, nv * 4));
      if (!decoder.GetAttributeDataArrayForAllPoints(mesh, att, m.DT_INT32, nv * 4, ptr)) {
        throw new Error('GetAttributeDataArrayForAllPoints failed');
      }
      out.positions = Buffer.from(m.HEAPU8.slice(ptr, ptr + nv * 4)).toString('base64');
      m._free(ptr);

      const ni = out.numFaces * 3;
      ptr = m._malloc(Math.max(4, ni * 4));
      if (!decoder.GetTrianglesUInt32Array(mesh, ni * 4, ptr)) {
        throw new Error('GetTrianglesUInt32Array failed');
      }
      out.faces = Buffer.from(m.HEAPU8.slice(ptr, ptr + ni * 4)).toString('base64');
      m._free(ptr);
    } catch (e) {
      out.error = String(e.message || e);
    }
    m.destroy(mesh);
    m.destroy(buf);
    process.stdout.write(JSON.stringify(out) + '\n');
  }
  m.destroy(decoder);
});
