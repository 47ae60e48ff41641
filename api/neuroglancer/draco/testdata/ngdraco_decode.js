// Decodes Draco files with Neuroglancer's own fragment decoder
// (neuroglancer_draco.wasm: Draco 1.4.1 and the glue that checks the
// position attribute, from the npm neuroglancer package), called the way
// Neuroglancer's src/mesh/draco/index.ts calls it, for external_test.go.
// Usage:
//   node ngdraco_decode.js WASM BITS FILE...
// Prints one JSON line per file: the decoder's return code (0 is success)
// and on success the vertex and face counts, the positions and the indices
// as base64 of their little-endian uint32 bytes.
'use strict';
const fs = require('fs');

const [wasmPath, bits, ...files] = process.argv.slice(2);
let instance;
let result;
const env = {
  emscripten_notify_memory_growth: () => {},
  neuroglancer_draco_receive_decoded_mesh: (numFaces, numVertices, indicesPtr, positionsPtr) => {
    const mem = instance.exports.memory.buffer;
    result = {
      numFaces,
      numVertices,
      faces: Buffer.from(new Uint8Array(mem, indicesPtr, numFaces * 12)).toString('base64'),
      positions: Buffer.from(new Uint8Array(mem, positionsPtr, numVertices * 12)).toString('base64'),
    };
  },
  proc_exit: (code) => {
    throw new Error(`proc exit: ${code}`);
  },
};

WebAssembly.instantiate(fs.readFileSync(wasmPath), { env, wasi_snapshot_preview1: env }).then((m) => {
  instance = m.instance;
  instance.exports._initialize();
  for (const file of files) {
    const data = fs.readFileSync(file);
    const offset = instance.exports.malloc(data.byteLength); // the decoder frees it
    new Uint8Array(instance.exports.memory.buffer).set(data, offset);
    result = undefined;
    const code = instance.exports.neuroglancer_draco_decode(offset, data.byteLength, false, Number(bits), true);
    process.stdout.write(JSON.stringify({ file, code, ...(code === 0 ? result : {}) }) + '\n');
  }
});
