// Usage: node run-conformance.mjs TRANSPILED_DIR CASES_DIR
// Runs every case through the policy and prints, as JSON, what it answered:
// {"policy": {...}, "cases": [{"name", "observed"}]}. A case that needs a newer
// contract than the policy implements (its "contract") is skipped:
// {"name", "skipped": true, "needs_contract"}. Comparing that with
// `lockwarden policy conformance --json` shows whether two hosts agree.

import { readdir, readFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { loadPolicy } from './host.mjs';

const [dir, casesDir] = process.argv.slice(2);
if (!dir || !casesDir) {
  console.error('usage: node run-conformance.mjs TRANSPILED_DIR CASES_DIR');
  process.exit(2);
}

/** Whether contract version `needs` is newer than `has` (major.minor.patch, by number). */
function newer(needs, has) {
  const key = (v) => v.split('.').map(Number);
  const [a, b] = [key(needs), key(has)];
  for (let i = 0; i < 3; i += 1) {
    if (a[i] !== b[i]) return !(a[i] < b[i]);
  }
  return false;
}

const policy = await loadPolicy(dir);
const files = (await readdir(casesDir)).filter((f) => f.endsWith('.json')).sort();
const cases = [];
for (const file of files) {
  const recorded = JSON.parse(await readFile(join(casesDir, file), 'utf8'));
  const name = basename(file, '.json');
  if (recorded.contract != null && newer(recorded.contract, policy.contract)) {
    cases.push({ name, skipped: true, needs_contract: recorded.contract });
  } else {
    cases.push({ name, observed: await policy.evaluate(recorded) });
  }
}
const { name, version, contractVersion } = policy.info;
console.log(JSON.stringify({
  policy: { name, version, contract_version: contractVersion },
  contract: policy.contract,
  cases,
}, null, 2));
