// An example lockwarden policy in JavaScript, stricter than the default: the
// same rules as lockwarden's Rust example (see rules.js).
//
// build.sh builds it with componentize-js (pinned in package.json) against
// the contract `lockwarden:policy@0.2.0` (wit/policy.wit), with every
// optional WASI feature disabled: the component imports nothing but the
// contract (docs/writing-a-policy.md in lockwarden's sources). This file is
// glue only: the decisions are in rules.js, the one batch of questions in
// questions.js.

import { now } from 'lockwarden:policy/clock@0.2.0';
import { ask, localHostname } from 'lockwarden:policy/liveness@0.2.0';
import { Batch } from './questions.js';
import * as rules from './rules.js';

export const policy = {
  info() {
    return rules.info();
  },

  evaluate(request) {
    const settings = rules.parseSettings(request.settings);
    // componentize-js 0.23 gives the s64 of an import's result as unsigned:
    // a time before 1970 would read as far in the future.
    const time = BigInt.asIntN(64, now());
    const local = localHostname();

    // First every question, each once; then one call to the host.
    const batch = new Batch();
    const asked = request.locks.map((lock) => [
      // Only the host's own processes can be asked about.
      local === lock.hostname ? batch.process(lock.hostname, lock.pid, lock.time) : undefined,
      batch.host(lock.hostname, lock.time),
    ]);
    const answer = batch.answer(ask);

    // One verdict per input, in the request's order.
    return {
      locks: request.locks.map((lock, i) => {
        const [process, host] = asked[i];
        return rules.decide(time, settings, lock, process === undefined ? undefined : answer(process), answer(host));
      }),
      unreadable: request.unreadable.map((file) => rules.unreadable(time, file)),
    };
  },
};
