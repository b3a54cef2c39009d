// A lockwarden host in Node.js: runs a policy component transpiled by jco,
// serving the contract's imports (clock, liveness, log) from a recorded
// request, the format `lockwarden policy eval` reads. Like the Rust host, it
// gives the policy no environment, no arguments and no files, instantiates it
// afresh for every evaluation, and checks the verdicts before returning them:
// one per input, in the request's order, and no removal of an unreadable file
// without 30 minutes of the host's own age evidence.
//
// It runs policies of the current contract (CONTRACT) and, like the Rust host,
// of the one before (CONTRACT_0_1): those get the facts that one has (no
// stored-at, no first sighting of unreadable files), one question per liveness
// call, and name each verdict's input by id.

import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import * as cli from '@bytecodealliance/preview2-shim/cli';
import * as io from '@bytecodealliance/preview2-shim/io';

/** The contract this host implements. */
const CONTRACT = '0.2.0';
/** The older contract it also runs. */
const CONTRACT_0_1 = '0.1.0';
/** Restic's stale age (ns): the least age evidence for removing an unreadable file. */
const UNREADABLE_MIN_AGE = 30n * 60n * 1_000_000_000n;
const MAX_LOG_LINES = 1000;
const MAX_LOG_BYTES = 1024;

/** Nanoseconds since the epoch (BigInt) of an RFC 3339 time, any offset. */
export function parseTime(text) {
  const m = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/.exec(text);
  if (!m) throw new Error(`\`${text}\` is not an RFC 3339 time`);
  const [, y, mo, d, h, mi, s, frac = '', , sign, oh, om] = m;
  const date = new Date(0);
  date.setUTCFullYear(Number(y), Number(mo) - 1, Number(d));
  date.setUTCHours(Number(h), Number(mi), Number(s), 0);
  let ns = BigInt(date.getTime()) * 1_000_000n + BigInt(frac.padEnd(9, '0') || '0');
  if (sign) {
    const offset = BigInt(Number(oh) * 3600 + Number(om) * 60) * 1_000_000_000n;
    ns += sign === '+' ? -offset : offset;
  }
  return ns;
}

/** The answers a recorded request holds, looked up as the Rust host does. */
class Recorded {
  constructor(localHostname) {
    this.localHostname = localHostname ?? undefined;
    this.process = new Map();
    this.host = new Map();
  }

  // Where two locks ask the same question with different answers, the safer
  // one wins: alive over unknown over dead.
  static merge(map, key, answer) {
    const safety = { dead: 0, unknown: 1, alive: 2 };
    const old = map.get(key);
    if (!old || safety[answer.tag] > safety[old.tag]) map.set(key, answer);
  }

  insert(hostname, pid, since, process, host) {
    Recorded.merge(this.process, `${hostname}\0${pid}\0${since}`, process);
    Recorded.merge(this.host, `${hostname}\0${since}`, host);
  }

  answerProcess(hostname, pid, since) {
    return this.process.get(`${hostname}\0${pid}\0${since}`) ?? NOT_RECORDED;
  }

  answerHost(hostname, since) {
    return this.host.get(`${hostname}\0${since}`) ?? NOT_RECORDED;
  }

  /**
   * The `liveness` import of `contract`: one batch `ask`, or CONTRACT_0_1's
   * call per question; both while the contract is not known yet.
   */
  imports(contract) {
    const current = {
      ask: (questions) => questions.map(({ tag, val }) => (tag === 'process'
        ? this.answerProcess(val.hostname, val.pid, val.since)
        : this.answerHost(val.hostname, val.since))),
    };
    const older = {
      process: (hostname, pid, since) => this.answerProcess(hostname, pid, since),
      host: (hostname, since) => this.answerHost(hostname, since),
    };
    return {
      localHostname: () => this.localHostname,
      ...(contract !== CONTRACT_0_1 && current),
      ...(contract !== CONTRACT && older),
    };
  }
}

const NOT_RECORDED = { tag: 'unknown', val: 'no answer recorded' };

function optionalTime(text) {
  return text == null ? undefined : parseTime(text);
}

function liveness(recorded = 'unknown') {
  const { state, detail } = typeof recorded === 'string' ? { state: recorded } : recorded;
  if (!['alive', 'dead', 'unknown'].includes(state)) throw new Error(`\`${state}\` is not alive, dead or unknown`);
  return { tag: state, val: detail ?? 'recorded in the request' };
}

// Settings in byte order of their keys, as the Rust host passes them.
const byteOrder = ([a], [b]) => Buffer.compare(Buffer.from(a), Buffer.from(b));

/** Turns a recorded request into the contract's request, clock and evidence. */
export function prepare(recorded) {
  const evidence = new Recorded(recorded.local_hostname);
  const locks = (recorded.locks ?? []).map((l, i) => {
    const time = parseTime(l.time);
    const firstSeen = optionalTime(l.first_seen);
    const pid = BigInt(l.pid ?? 0);
    evidence.insert(l.hostname ?? '', pid, time, liveness(l.process), liveness(l.host));
    return {
      id: l.id, time, exclusive: l.exclusive ?? false, hostname: l.hostname ?? '',
      username: l.username ?? '', pid, uid: l.uid ?? 0, gid: l.gid ?? 0, firstSeen,
      storedAt: optionalTime(l.stored_at),
    };
  });
  const request = {
    repository: recorded.repository,
    locks,
    unreadable: (recorded.unreadable ?? []).map((u) => ({
      id: u.id, size: BigInt(u.size ?? 0), problem: u.problem,
      storedAt: optionalTime(u.stored_at), firstSeen: optionalTime(u.first_seen),
    })),
    settings: Object.entries(recorded.settings ?? {}).sort(byteOrder),
  };
  return { now: parseTime(recorded.now), request, evidence };
}

function truncate(message) {
  const bytes = Buffer.from(message);
  if (bytes.length <= MAX_LOG_BYTES) return message;
  let end = MAX_LOG_BYTES;
  while ((bytes[end] & 0xc0) === 0x80) end -= 1;
  return bytes.subarray(0, end).toString() + '…';
}

/** The CONTRACT_0_1 form of a request: the same locks and files without the newer facts. */
function requestV0_1(request) {
  return {
    ...request,
    locks: request.locks.map(({ storedAt, ...lock }) => lock),
    unreadable: request.unreadable.map(({ storedAt, firstSeen, ...file }) => file),
  };
}

/**
 * Puts a CONTRACT_0_1 policy's verdicts, which name their input by id, in the
 * request's order, as the Rust host does: no unknown id, none twice, none
 * missing, and no `remove` of an unreadable file.
 */
function positional(request, verdicts) {
  const slots = new Map([...request.locks, ...request.unreadable].map((l) => [l.id, undefined]));
  for (const { id, action, rule, reason } of verdicts) {
    if (!slots.has(id)) throw new Error(`a verdict for \`${id}\`, which was not in its input`);
    if (slots.get(id)) throw new Error(`two verdicts for \`${id}\``);
    slots.set(id, { action, rule, reason });
  }
  const missing = [...slots].filter(([, v]) => !v);
  if (missing.length) throw new Error(`no verdict for ${missing.length} of ${slots.size} inputs (first: \`${missing[0][0]}\`)`);
  // Contract 0.1.0 promised that no unreadable file is ever removed.
  const removed = request.unreadable.find((u) => slots.get(u.id).action === 'remove');
  if (removed) throw new Error(`\`remove\` for \`${removed.id}\`, an unreadable file: a contract 0.1.0 policy never removes one`);
  return {
    locks: request.locks.map((l) => slots.get(l.id)),
    unreadable: request.unreadable.map((u) => slots.get(u.id)),
  };
}

/**
 * Checks verdicts as the Rust host does: one per lock and unreadable file, and
 * no `remove` of an unreadable file without 30 minutes of the host's own age
 * evidence (stored-at or first-seen against now).
 */
function checkVerdicts(request, now, verdicts) {
  for (const [what, want, got] of [
    ['locks', request.locks.length, verdicts.locks.length],
    ['unreadable files', request.unreadable.length, verdicts.unreadable.length],
  ]) {
    if (want !== got) throw new Error(`${got} verdicts for ${want} ${what}`);
  }
  request.unreadable.forEach((file, i) => {
    const oldEnough = [file.storedAt, file.firstSeen].some((at) => at !== undefined && now - at >= UNREADABLE_MIN_AGE);
    if (verdicts.unreadable[i].action === 'remove' && !oldEnough) {
      throw new Error(`\`remove\` for \`${file.id}\`, an unreadable file for which the host holds no age evidence of at least 30m`);
    }
  });
}

/** The report's form of checked verdicts: each with its input's id, locks first. */
function verdictsJson(request, verdicts) {
  const pair = (inputs, list) => inputs.map(({ id }, i) => {
    const { action, rule, reason } = list[i];
    return { id, action, rule, reason };
  });
  return [...pair(request.locks, verdicts.locks), ...pair(request.unreadable, verdicts.unreadable)];
}

/** Whether `found` is semver-compatible with `supported` (0.x.* with 0.x.*, N.* with N.*). */
function compatible(found, supported) {
  const key = (v) => {
    const [major, minor] = v.split('.');
    return major === '0' ? `0.${minor}` : major;
  };
  return key(found) === key(supported);
}

/** The contract of the `lockwarden:policy/policy` interface an instance exports. */
function exportedContract(instance) {
  const name = Object.keys(instance).find((k) => k.startsWith('lockwarden:policy/policy@'));
  if (!name) throw new Error('the component does not export lockwarden:policy/policy; is it a lockwarden policy?');
  const found = name.slice(name.indexOf('@') + 1);
  const contract = [CONTRACT, CONTRACT_0_1].find((c) => compatible(found, c));
  if (!contract) throw new Error(`policy implements contract ${found}, this host ${CONTRACT} or ${CONTRACT_0_1}`);
  return contract;
}

/** Loads a component transpiled with `jco transpile --instantiation async`. */
export async function loadPolicy(dir, name = 'policy') {
  const modules = new Map();
  const getCoreModule = (path) => {
    if (!modules.has(path)) modules.set(path, readFile(join(dir, path)).then((b) => WebAssembly.compile(b)));
    return modules.get(path);
  };
  const { instantiate } = await import(pathToFileURL(join(dir, `${name}.js`)).href);
  // No ambient authority: an empty environment, no arguments, no directory.
  const environment = { getEnvironment: () => [], getArguments: () => [], initialCwd: () => undefined };
  // jco's generated code looks imports up by interface name without version;
  // the contract version is checked on info() below.
  const wasi = {
    [`wasi:cli/environment`]: environment,
    [`wasi:cli/exit`]: cli.exit,
    [`wasi:cli/stderr`]: cli.stderr,
    [`wasi:cli/stdin`]: cli.stdin,
    [`wasi:cli/stdout`]: cli.stdout,
    [`wasi:cli/terminal-input`]: cli.terminalInput,
    [`wasi:cli/terminal-output`]: cli.terminalOutput,
    [`wasi:cli/terminal-stderr`]: cli.terminalStderr,
    [`wasi:cli/terminal-stdin`]: cli.terminalStdin,
    [`wasi:cli/terminal-stdout`]: cli.terminalStdout,
    [`wasi:io/error`]: io.error,
    [`wasi:io/poll`]: io.poll,
    [`wasi:io/streams`]: io.streams,
  };
  // The contract is known after the first instantiation (info() must not use
  // the imports, which serve every contract until then).
  let contract;
  const start = (now, evidence, logs) => instantiate(getCoreModule, {
    ...wasi,
    [`lockwarden:policy/clock`]: { now: () => now },
    [`lockwarden:policy/liveness`]: evidence.imports(contract),
    [`lockwarden:policy/log`]: {
      log: (level, message) => {
        if (logs.length < MAX_LOG_LINES) logs.push({ level, message: truncate(message) });
      },
    },
  });
  const first = await start(0n, new Recorded(), []);
  contract = exportedContract(first);
  const info = first.policy.info();
  return {
    info,
    /** The contract version the policy implements. */
    contract,
    /**
     * Evaluates a recorded request. Returns what every lockwarden host reports:
     * {verdicts, logs}, or {error: {kind, message}} when the policy refuses.
     */
    evaluate(recorded) {
      return this.evaluatePrepared(prepare(recorded));
    },

    /** Evaluates a request made by `prepare`, in a fresh instance. */
    async evaluatePrepared({ now, request, evidence }) {
      const logs = [];
      const { policy } = await start(now, evidence, logs);
      let verdicts;
      try {
        verdicts = contract === CONTRACT_0_1
          ? positional(request, policy.evaluate(requestV0_1(request)))
          : policy.evaluate(request);
      } catch (e) {
        if (e.payload?.tag) return { error: { kind: e.payload.tag, message: e.payload.val } };
        throw e;
      }
      checkVerdicts(request, now, verdicts);
      return { verdicts: verdictsJson(request, verdicts), logs };
    },
  };
}
