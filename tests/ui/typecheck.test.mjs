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
