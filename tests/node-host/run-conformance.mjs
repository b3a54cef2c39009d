// Usage: node run-conformance.mjs TRANSPILED_DIR CASES_DIR
// Runs every case through the policy and prints, as JSON, what it answered:
// {"policy": {...}, "cases": [{"name", "observed"}]}. Comparing that with
// `lockwarden policy conformance --json` shows whether two hosts agree.

import { readdir, readFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { loadPolicy } from './host.mjs';

const [dir, casesDir] = process.argv.slice(2);
if (!dir || !casesDir) {
  console.error('usage: node run-conformance.mjs TRANSPILED_DIR CASES_DIR');
  process.exit(2);
}
const policy = await loadPolicy(dir);
const files = (await readdir(casesDir)).filter((f) => f.endsWith('.json')).sort();
const cases = [];
for (const file of files) {
  const recorded = JSON.parse(await readFile(join(casesDir, file), 'utf8'));
  cases.push({ name: basename(file, '.json'), observed: await policy.evaluate(recorded) });
}
const { name, version, contractVersion } = policy.info;
console.log(JSON.stringify({ policy: { name, version, contract_version: contractVersion }, cases }, null, 2));
