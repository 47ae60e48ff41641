// Hashes keys with Neuroglancer's own murmurhash3_x86_128 for sharding
// (murmurHash3_x86_128Hash64Bits_Bigint(0, key), lib/util/hash.js of the npm
// neuroglancer package), for external_test.go. Usage:
//   node ngmurmur.mjs HASH_JS < keys
// reads one decimal key a line and prints the hashed id, decimal, a line.
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

const { murmurHash3_x86_128Hash64Bits_Bigint: hash } = await import(pathToFileURL(process.argv[2]).href);
const out = [];
for (const line of readFileSync(0, 'utf8').split('\n')) {
  if (line !== '') out.push(hash(0, BigInt(line)).toString());
}
process.stdout.write(out.join('\n') + '\n');
