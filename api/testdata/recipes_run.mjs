// Runs the recipe modules named on the command line one after another in
// this one Node process (Node and apache-arrow load once, not once a
// recipe) and prints a JSON object: by file, what the recipe logged and
// the error it threw, if any. TestArrowRecipes checks the output.
import { format } from 'node:util';
import { pathToFileURL } from 'node:url';

const results = {};
const log = console.log;
for (const file of process.argv.slice(2)) {
  let out = '';
  console.log = (...args) => { out += format(...args) + '\n'; };
  try {
    await import(pathToFileURL(file).href);
    results[file] = { out };
  } catch (err) {
    results[file] = { out, error: String(err?.stack ?? err) };
  } finally {
    console.log = log;
  }
}
process.stdout.write(JSON.stringify(results));
