// The strict policy's rules, first match wins (the same rules, in the same
// order and with the same words, as lockwarden's Rust example,
// examples/policies/strict):
//
// | rule            | when                                             | action |
// |-----------------|--------------------------------------------------|--------|
// | trusted-host    | hostname matches `always-alive`                  | keep   |
// | holder-alive    | process or host evidence says alive              | keep   |
// | young-exclusive | exclusive and younger than `exclusive-min-age`   | keep   |
// | process-dead    | process evidence (same host) says dead           | remove |
// | host-gone       | host evidence says dead                          | remove |
// | expired         | older than `stale-after`                         | remove |
// | fresh           | otherwise                                        | keep   |
// | unreadable      | the file could not be read                       | keep   |
//
// Each function decides about one input and returns its verdict; the glue in
// policy.js puts them in the request's order. Times are nanoseconds since the
// epoch as BigInts, as the contract's s64 arrives in JavaScript; arithmetic
// on them saturates at 64 bits, as the Rust example's does.

export const NAME = 'lockwarden-strict-example-js';
export const VERSION = '0.2.0';
export const CONTRACT = '0.2.0';

const SECOND = 1_000_000_000n;
// restic's stale age, the shortest `stale-after`: a live restic refreshes its
// lock every 5 minutes but may go 22.5 minutes between refreshes.
const RESTIC_STALE_AGE = 30n * 60n * SECOND;
const I64_MIN = -(2n ** 63n);
const I64_MAX = 2n ** 63n - 1n;
// What Rust's `str::trim` takes off (Unicode's White_Space): JavaScript's
// own `trim()` differs (it takes U+FEFF, leaves U+0085) and would read a
// setting otherwise.
const WHITE_SPACE = new Set([...'\t\n\v\f\r \u0085\u00a0\u1680\u2028\u2029\u202f\u205f\u3000',
  ...Array.from({ length: 11 }, (_, i) => String.fromCodePoint(0x2000 + i))]);

function trim(text) {
  const chars = [...text];
  let [start, end] = [0, chars.length];
  while (start < end && WHITE_SPACE.has(chars[start])) start += 1;
  while (end > start && WHITE_SPACE.has(chars[end - 1])) end -= 1;
  return chars.slice(start, end).join('');
}

/** The contract's invalid-setting error, thrown out of `evaluate`. */
function invalid(message) {
  return { tag: 'invalid-setting', val: message };
}

/**
 * Validates key/value settings ([key, value] pairs); unknown keys and bad
 * values are errors that name the key.
 */
export function parseSettings(pairs) {
  const settings = {
    staleAfter: 30n * 60n * SECOND,
    exclusiveMinAge: 2n * 3600n * SECOND,
    alwaysAlive: [],
  };
  for (const [key, value] of pairs) {
    if (key === 'stale-after') {
      settings.staleAfter = duration(key, value);
    } else if (key === 'exclusive-min-age') {
      settings.exclusiveMinAge = duration(key, value);
    } else if (key === 'always-alive') {
      settings.alwaysAlive = value.split(',').map(trim).filter((p) => p !== '');
    } else {
      throw invalid(`unknown setting \`${key}\`: this policy accepts stale-after, `
        + 'exclusive-min-age and always-alive');
    }
  }
  if (settings.staleAfter < RESTIC_STALE_AGE) {
    throw invalid("setting `stale-after`: must be at least 30m (restic's stale age): a live restic "
      + 'may go 22.5 minutes between refreshes, so a shorter age removes live locks. '
      + 'Evidence removes a dead holder\'s lock sooner: process-dead for locks from this '
      + 'machine, host-gone with --hosts-command or --hosts-file (a pod inventory)');
  }
  return settings;
}

/** Parses whole hours, minutes and seconds: `2h`, `90m`, `1h30m`, `45s`. */
function duration(key, value) {
  const bad = invalid(`setting \`${key}\`: \`${value}\` is not a duration such as 2h, 90m, 1h30m or 45s`);
  const units = { h: 3600n, m: 60n, s: 1n };
  let total = 0n;
  let number = null;
  for (const c of value) {
    if (c >= '0' && c <= '9') {
      number = (number ?? 0n) * 10n + BigInt(c);
      if (number > I64_MAX) throw bad;
    } else {
      const unit = units[c];
      if (unit === undefined || number === null) throw bad;
      total += number * unit * SECOND;
      number = null;
      if (total > I64_MAX) throw bad;
    }
  }
  if (number !== null || value === '') throw bad;
  return total;
}

/**
 * `*` matches any run of characters; everything else matches itself,
 * ignoring ASCII case (hostnames are case-insensitive). One pass that lets
 * the last `*` seen take one more character whenever the rest fails.
 */
export function matches(pattern, hostname) {
  const fold = (c) => (c >= 'A' && c <= 'Z' ? c.toLowerCase() : c);
  const [p, h] = [[...pattern], [...hostname]];
  let [pi, hi] = [0, 0];
  // The last `*`, and how much of the hostname it covers so far.
  let [star, covered] = [-1, 0];
  while (hi < h.length) {
    if (p[pi] === '*') {
      [star, covered] = [pi, hi];
      pi += 1;
    } else if (pi < p.length && fold(p[pi]) === fold(h[hi])) {
      pi += 1;
      hi += 1;
    } else if (star >= 0) {
      covered += 1;
      [pi, hi] = [star + 1, covered];
    } else {
      return false;
    }
  }
  return p.slice(pi).every((c) => c === '*');
}

/** `a - b` within the contract's 64-bit timestamps. */
function saturatingSub(a, b) {
  const d = a - b;
  return d < I64_MIN ? I64_MIN : d > I64_MAX ? I64_MAX : d;
}

/** Whole seconds, rounded toward zero (BigInt division), as in the Rust example. */
function seconds(nanoseconds) {
  return nanoseconds / SECOND;
}

/**
 * `text` in double quotes, escaped: a quote, a backslash, tab, carriage
 * return, newline and NUL by name, every other control character as
 * `\u{hex}` (a lock's hostname is the holder's word: no control character
 * reaches a reason raw), as the Rust example quotes.
 */
export function quoted(text) {
  const named = { '"': '\\"', '\\': '\\\\', '\t': '\\t', '\r': '\\r', '\n': '\\n', '\0': '\\0' };
  let out = '';
  for (const c of text) {
    const code = c.codePointAt(0);
    if (named[c] !== undefined) out += named[c];
    else if (code < 0x20 || (code >= 0x7f && code < 0xa0)) out += `\\u{${code.toString(16)}}`;
    else out += c;
  }
  return `"${out}"`;
}

/** The policy's description of itself. */
export function info() {
  const setting = (name, defaultValue, help) => ({ name, defaultValue, help });
  return {
    name: NAME,
    version: VERSION,
    contractVersion: CONTRACT,
    description: 'An example policy, stricter than the default: never removes locks from hosts '
      + 'matching always-alive, nor exclusive locks younger than exclusive-min-age; '
      + 'otherwise removes locks whose holder is known gone or that are older than '
      + 'stale-after. Written in JavaScript.',
    settings: [
      setting('stale-after', '30m',
        'a lock older than this, holder unknown, is stale; at least 30m (2h, 90m, 1h30m)'),
      setting('exclusive-min-age', '2h', 'exclusive locks younger than this are never removed'),
      setting('always-alive', '',
        'comma-separated hostname patterns (* wildcard) whose locks are never removed'),
    ],
  };
}

const keep = (rule, reason) => ({ action: 'keep', rule, reason });
const remove = (rule, reason) => ({ action: 'remove', rule, reason });

/**
 * Decides about one lock. `process` is undefined when the lock is from
 * another host; evidence is the contract's liveness ({tag, val}).
 */
export function decide(now, settings, lock, process, host) {
  const age = saturatingSub(now, lock.time);
  const trusted = settings.alwaysAlive.find((p) => matches(p, lock.hostname));
  if (trusted !== undefined) {
    return keep('trusted-host', `host ${quoted(lock.hostname)} matches always-alive pattern ${quoted(trusted)}`);
  }
  if (process?.tag === 'alive') return keep('holder-alive', `holder process is alive: ${process.val}`);
  if (host.tag === 'alive') return keep('holder-alive', `holder host is alive: ${host.val}`);
  if (lock.exclusive && age < settings.exclusiveMinAge) {
    return keep('young-exclusive', `exclusive lock is ${seconds(age)}s old, younger than `
      + `exclusive-min-age ${seconds(settings.exclusiveMinAge)}s`);
  }
  if (process?.tag === 'dead') return remove('process-dead', `holder process ${lock.pid} is gone: ${process.val}`);
  if (host.tag === 'dead') return remove('host-gone', `holder host ${quoted(lock.hostname)} is gone: ${host.val}`);
  if (age > settings.staleAfter) {
    return remove('expired', `lock is ${seconds(age)}s old, older than stale-after `
      + `${seconds(settings.staleAfter)}s, and no holder is known`);
  }
  return keep('fresh', `lock is ${seconds(age)}s old`);
}

/**
 * Unreadable files are kept for a person to look at, with the host's age
 * evidence for them (`storedAt`, `firstSeen`) in the reason when it has any.
 */
export function unreadable(now, file) {
  const ages = [[file.storedAt, 'stored'], [file.firstSeen, 'first seen']]
    .filter(([at]) => at !== undefined && at !== null)
    .map(([at, what]) => `, ${what} ${seconds(saturatingSub(now, at))}s ago`)
    .join('');
  return keep('unreadable', `cannot read the lock file (${file.problem})${ages}; kept`);
}
