// The front end is type-checked JS: `tsc --noEmit -p tsconfig.json` (strict, checkJs) must pass.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

test('tsc --noEmit --checkJs passes over ui/', async () => {
  const r = await promisify(execFile)(process.execPath, ['node_modules/typescript/bin/tsc', '--noEmit', '-p', 'tsconfig.json'])
    .then(() => ({ ok: true, out: '' }), (e) => ({ ok: false, out: `${e.stdout}${e.stderr}` }));
  assert.ok(r.ok, r.out);
});

test("the server's page list (src/api/ui_routes.cpp) is ui/pages.js's", async () => {
  const { readFile } = await import('node:fs/promises');
  const ui = await readFile('ui/pages.js', 'utf8');
  const server = await readFile('src/api/ui_routes.cpp', 'utf8');
  /** @type {Map<string, boolean>} first segment -> whether a second may follow */
  const fromUi = new Map();
  for (const [, path] of ui.matchAll(/path: '(\/[^']*)'/g)) {
    const [first, ...rest] = path.slice(1).split('/');
    fromUi.set(first, (fromUi.get(first) ?? false) || rest.length > 0);
  }
  const list = server.slice(server.indexOf('pages{{'), server.indexOf('}}}', server.indexOf('pages{{')) + 3);
  const fromServer = new Map([...list.matchAll(/\{"([a-z-]+)", (true|false)\}/g)].map((m) => [m[1], m[2] === 'true']));
  assert.ok(fromUi.size >= 8, `read ${fromUi.size} pages from ui/pages.js`);
  assert.deepEqual(Object.fromEntries([...fromServer].sort()), Object.fromEntries([...fromUi].sort()));
});
