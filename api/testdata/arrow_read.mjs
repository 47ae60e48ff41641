// Reads each Arrow IPC stream named on the command line with the npm
// apache-arrow package (what browsers run) and prints one JSON line per
// file: the schema (names, types, field metadata), the number of record
// batches, the last batch's custom metadata and every column's values.
// Values are plain JSON: numbers as JavaScript prints them (NaN and the
// infinities as strings), 64-bit integers as decimal strings, dictionary
// entries as their labels, lists as arrays; null is null.
import { readFileSync } from 'node:fs';
import { tableFromIPC, Type } from 'apache-arrow';

function plain(v) {
  if (v === null || v === undefined) return null;
  if (typeof v === 'bigint') return v.toString();
  if (typeof v === 'number') return Number.isFinite(v) ? v : String(v);
  if (typeof v === 'boolean' || typeof v === 'string') return v;
  if (typeof v[Symbol.iterator] === 'function') return Array.from(v, plain);
  return String(v);
}

for (const file of process.argv.slice(2)) {
  try {
    const table = tableFromIPC(readFileSync(file));
    const last = table.batches.at(-1);
    const out = {
      file,
      rows: table.numRows,
      batches: table.batches.length,
      last: last ? Object.fromEntries(last.metadata) : {},
      fields: table.schema.fields.map((f) => ({
        name: f.name,
        type: String(f.type),
        dictionary: f.type.typeId === Type.Dictionary,
        metadata: Object.fromEntries(f.metadata),
      })),
      columns: {},
    };
    for (const f of table.schema.fields) {
      out.columns[f.name] = Array.from(table.getChild(f.name), plain);
    }
    console.log(JSON.stringify(out));
  } catch (e) {
    console.log(JSON.stringify({ file, error: String(e && e.stack || e) }));
  }
}
