// The questions of one evaluation, asked in one batch.
//
// Contract 0.2.0 has a single evidence import, `liveness.ask`: a policy
// collects every question it has, each distinct question once, and calls it
// once per evaluation; the answers come back in the questions' order.

/** Every distinct question asked so far, and where each one is. */
export class Batch {
  constructor() {
    this.questions = [];
    this.index = new Map();
  }

  /** Whether process `pid` on `hostname`, which wrote a lock at `since`,
   *  still holds it: the index of the answer to come. */
  process(hostname, pid, since) {
    return this.add(JSON.stringify([hostname, String(pid), String(since)]),
      () => ({ tag: 'process', val: { hostname, pid, since } }));
  }

  /** Whether host `hostname`, which wrote a lock at `since`, still exists:
   *  the index of the answer to come. */
  host(hostname, since) {
    return this.add(JSON.stringify([hostname, null, String(since)]),
      () => ({ tag: 'host', val: { hostname, since } }));
  }

  add(key, question) {
    if (!this.index.has(key)) {
      this.index.set(key, this.questions.length);
      this.questions.push(question());
    }
    return this.index.get(key);
  }

  /** Asks every question at once with `ask` (the host's `liveness.ask`), or
   *  not at all when there is none; returns a lookup by index, `unknown`
   *  where the host gave no answer (never a reason to remove a lock). */
  answer(ask) {
    const answers = this.questions.length === 0 ? [] : ask(this.questions);
    return (i) => answers[i] ?? { tag: 'unknown', val: 'the host gave no answer' };
  }
}
