// Usage: node bench.mjs TRANSPILED_DIR REQUEST [SECONDS]
// Times evaluations of a recorded request in the Node.js host the way
// `lockwarden policy bench` times them in the Rust host: the request prepared
// once, then a fresh instance and one `evaluate` per call. Prints JSON.

import { readFile } from 'node:fs/promises';
import { loadPolicy, prepare } from './host.mjs';

const [dir, requestFile, seconds = '3'] = process.argv.slice(2);
if (!dir || !requestFile) {
  console.error('usage: node bench.mjs TRANSPILED_DIR REQUEST [SECONDS]');
  process.exit(2);
}
const policy = await loadPolicy(dir);
const prepared = prepare(JSON.parse(await readFile(requestFile, 'utf8')));
const time = async () => {
  const started = process.hrtime.bigint();
  await policy.evaluatePrepared(prepared);
  return Number(process.hrtime.bigint() - started) / 1e9;
};
const first = await time();
const samples = [];
const deadline = performance.now() + Number(seconds) * 1000;
while (performance.now() < deadline) samples.push(await time());
samples.sort((a, b) => a - b);
const at = (q) => samples[Math.round((samples.length - 1) * q)];
console.log(JSON.stringify({
  locks: prepared.request.locks.length + prepared.request.unreadable.length,
  first_evaluation_seconds: first,
  evaluation_seconds: {
    median: at(0.5), p10: at(0.1), p90: at(0.9), min: at(0), max: at(1),
    mean: samples.reduce((a, b) => a + b, 0) / samples.length, n: samples.length,
  },
}));
