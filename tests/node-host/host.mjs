// A lockwarden host in Node.js: runs a policy component transpiled by jco,
// serving the contract's imports (clock, liveness, log) from a recorded
// request, the format `lockwarden policy eval` reads. Like the Rust host, it
// gives the policy no environment, no arguments and no files, instantiates it
// afresh for every evaluation, and checks the verdicts before returning them.

import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import * as cli from '@bytecodealliance/preview2-shim/cli';
import * as io from '@bytecodealliance/preview2-shim/io';

const CONTRACT = '0.1.0';
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

  imports() {
    const none = { tag: 'unknown', val: 'no answer recorded' };
    return {
      localHostname: () => this.localHostname,
      process: (hostname, pid, since) => this.process.get(`${hostname}\0${pid}\0${since}`) ?? none,
      host: (hostname, since) => this.host.get(`${hostname}\0${since}`) ?? none,
    };
  }
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
    const firstSeen = l.first_seen == null ? undefined : parseTime(l.first_seen);
    const pid = BigInt(l.pid ?? 0);
    evidence.insert(l.hostname ?? '', pid, time, liveness(l.process), liveness(l.host));
    return {
      id: l.id, time, exclusive: l.exclusive ?? false, hostname: l.hostname ?? '',
      username: l.username ?? '', pid, uid: l.uid ?? 0, gid: l.gid ?? 0, firstSeen,
    };
  });
  const request = {
    repository: recorded.repository,
    locks,
    unreadable: (recorded.unreadable ?? []).map((u) => ({ id: u.id, size: BigInt(u.size ?? 0), problem: u.problem })),
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

/** Checks that there is exactly one verdict per lock and unreadable file. */
function checkVerdicts(request, verdicts) {
  const expected = new Set([...request.locks, ...request.unreadable].map((l) => l.id));
  const seen = new Set();
  for (const v of verdicts) {
    if (!expected.has(v.id)) throw new Error(`policy returned a verdict on ${v.id}, which it was not asked about`);
    if (seen.has(v.id)) throw new Error(`policy returned two verdicts on ${v.id}`);
    seen.add(v.id);
  }
  if (seen.size !== expected.size) throw new Error(`policy returned ${seen.size} verdicts for ${expected.size} locks`);
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
  const start = (now, evidence, logs) => instantiate(getCoreModule, {
    ...wasi,
    [`lockwarden:policy/clock`]: { now: () => now },
    [`lockwarden:policy/liveness`]: evidence.imports(),
    [`lockwarden:policy/log`]: {
      log: (level, message) => {
        if (logs.length < MAX_LOG_LINES) logs.push({ level, message: truncate(message) });
      },
    },
  });
  const info = (await start(0n, new Recorded(), [])).policy.info();
  if (info.contractVersion !== CONTRACT) throw new Error(`policy implements contract ${info.contractVersion}, this host ${CONTRACT}`);
  return {
    info,
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
        verdicts = policy.evaluate(request);
      } catch (e) {
        if (e.payload?.tag) return { error: { kind: e.payload.tag, message: e.payload.val } };
        throw e;
      }
      checkVerdicts(request, verdicts);
      return {
        verdicts: verdicts.map(({ id, action, rule, reason }) => ({ id, action, rule, reason })),
        logs,
      };
    },
  };
}
