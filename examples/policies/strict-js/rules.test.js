// The rules, natively: node --test (no component, no host).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  decide, matches, parseSettings, quoted, unreadable,
} from './rules.js';

const SECOND = 1_000_000_000n;
const HOUR = 3600n * SECOND;
const lock = (exclusive, time, hostname) => ({
  id: 'l', time, exclusive, hostname, username: 'u', pid: 1n, uid: 0, gid: 0,
});
const dead = { tag: 'dead', val: 'gone' };
const unknown = { tag: 'unknown', val: '?' };
const rule = (settings, l, process, host) => decide(10n * HOUR, settings, l, process, host).rule;

test('young exclusive locks survive even a dead holder', () => {
  const s = parseSettings([]);
  assert.equal(rule(s, lock(true, 9n * HOUR, 'a'), dead, dead), 'young-exclusive');
  assert.equal(rule(s, lock(true, 8n * HOUR - SECOND, 'a'), dead, unknown), 'process-dead');
  assert.equal(rule(s, lock(false, 9n * HOUR, 'a'), undefined, unknown), 'expired');
  assert.equal(rule(s, lock(false, 9n * HOUR, 'a'), undefined, { tag: 'alive', val: 'up' }), 'holder-alive');
});

test('trusted hosts match patterns case-insensitively', () => {
  assert.ok(matches('db-*', 'DB-primary'));
  assert.ok(matches('*.lan', 'nas.lan'));
  assert.ok(!matches('db-*', 'web-1'));
  assert.ok(matches('ßackup-*', 'ßackup-1'));
  assert.ok(matches('*a*b', 'xxaxxbxb'));
  assert.ok(!matches('*a*b', 'xxaxxbxc'));
  assert.ok(matches('**', '') && matches('a*', 'a') && !matches('a', ''));
  assert.ok(!matches('*a*a*a*a*a*a*a*a*b', 'a'.repeat(40)));
  assert.equal(quoted('a"b\\\n\u001b\u0085é'), '"a\\"b\\\\\\n\\u{1b}\\u{85}é"');
  // Trimmed as Rust trims: U+0085 is white space, U+001C and U+FEFF are not.
  assert.deepEqual(parseSettings([['always-alive', 'web-1\u0085, \u001c,\ufeff']]).alwaysAlive,
    ['web-1', '\u001c', '\ufeff']);
  const s = parseSettings([['always-alive', 'db-*, nas']]);
  assert.equal(rule(s, lock(false, 0n, 'nas'), undefined, dead), 'trusted-host');
});

test('unreadable files are kept with their ages', () => {
  const file = (storedAt, firstSeen) => ({ id: 'junk', size: 3n, problem: 'not JSON', storedAt, firstSeen });
  const now = 10n * HOUR;
  assert.deepEqual(unreadable(now, file(undefined, undefined)),
    { action: 'keep', rule: 'unreadable', reason: 'cannot read the lock file (not JSON); kept' });
  assert.equal(unreadable(now, file(now - HOUR, now - 90n * SECOND)).reason,
    'cannot read the lock file (not JSON), stored 3600s ago, first seen 90s ago; kept');
});

test('settings are checked', () => {
  for (const [key, value] of [['stale-after', '0'], ['stale-after', '30'], ['stale-after', '90s'],
    ['stale-after', '29m59s'], ['colour', 'red']]) {
    assert.throws(() => parseSettings([[key, value]]), (e) => e.tag === 'invalid-setting', `${key}=${value}`);
  }
  for (const ok of ['30m', '1800s', '2h']) parseSettings([['stale-after', ok]]);
  assert.equal(parseSettings([['exclusive-min-age', '1h30m']]).exclusiveMinAge, 90n * 60n * SECOND);
});
