// A JavaScript policy that misbehaves on purpose, in the way its setting
// `misbehave` names, so the tests can show that lockwarden stops a
// JavaScript policy with the same limits as a Rust one:
//
// - `spin`: loops for ever (the epoch deadline stops it);
// - `hog`: allocates without end (the memory cap stops it);
// - `open-file`: fetches file:///etc/passwd (built without fetch or http,
//   the engine has no way to);
// - `clock`: reads Date.now() (built without clocks);
// - `print`: writes with console.log (built without stdio);
// - `random`: draws from Math.random() (built without random);
// - anything else: keeps every lock, saying so.
//
// Built like the JavaScript example (examples/policies/strict-js/build.sh),
// and once more with the toolchain's default features, which lockwarden
// refuses at load.

function misbehave(how) {
  if (how === 'spin') {
    for (;;) { /* for ever */ }
  }
  if (how === 'hog') {
    const hoard = [];
    for (;;) hoard.push(new Uint8Array(1 << 20).fill(1));
  }
  if (how === 'open-file') {
    return `fetch: ${typeof fetch === 'function' ? String(fetch('file:///etc/passwd')) : typeof fetch}`;
  }
  if (how === 'clock') return `time: ${Date.now()}`;
  if (how === 'print') {
    console.log('a word on stdout');
    return 'printed';
  }
  if (how === 'random') return `random: ${Math.random()}`;
  return 'behaved';
}

export const policy = {
  info() {
    return {
      name: 'misbehave-js',
      version: '0.0.0',
      contractVersion: '0.2.0',
      description: 'Misbehaves on purpose, as its setting says.',
      settings: [{ name: 'misbehave', defaultValue: '', help: 'spin, hog, open-file, clock, print or random' }],
    };
  },
  evaluate(request) {
    const setting = request.settings.find(([key]) => key === 'misbehave');
    const detail = misbehave(setting ? setting[1] : '');
    const keep = { action: 'keep', rule: 'misbehave', reason: detail };
    return { locks: request.locks.map(() => keep), unreadable: request.unreadable.map(() => keep) };
  },
};
