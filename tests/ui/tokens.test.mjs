// The Tokens page (issue 35 §3) against a real certfleet: the list equals the API's; Create token
// shows the new token's text once and that text works against the API; a refused field shows the
// API's message at that field; Revoke asks first, then the token is refused; an admin is offered
// roles up to admin only; a viewer has no Tokens link and the page says who may manage tokens;
// axe-core; screenshots tokens-{light,dark}.png and tokens-created-{light,dark}.png.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { startCertfleet, launch, signIn, shot, collectErrors } from './helpers.mjs';

const axeSource = await readFile(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const P = '/api/v1/projects/default';

/** @type {Awaited<ReturnType<typeof startCertfleet>>} */
let cf;
let adminToken = '';
let viewerToken = '';

before(async () => {
  cf = await startCertfleet({});
  adminToken = await cf.token('admin', { name: 'alice-admin' });
  viewerToken = await cf.token('viewer', { name: 'victor-viewer' });
  // One expiring soon and one revoked, so each status shows.
  const made = await cf.api('POST', `${P}/tokens`, { name: 'old-ci', role: 'operator', ttl_s: 3600 });
  assert.equal(made.status, 201, made.text);
  const gone = await cf.api('DELETE', `${P}/tokens/${made.body.id}`);
  assert.equal(gone.status, 200, gone.text);
});
after(async () => { await cf?.stop(); });

/** @param {import('playwright-core').Page} page */
async function axe(page) {
  await page.evaluate(axeSource);
  /** @type {{id: string, impact: string, help: string, nodes: {target: string[]}[]}[]} */
  const violations = await page.evaluate(async () => {
    // @ts-ignore axe is the script evaluated above
    const r = await window.axe.run(document, { resultTypes: ['violations'] });
    return r.violations.map((/** @type {any} */ v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((/** @type {any} */ n) => ({ target: n.target })) }));
  });
  return violations.map((v) => `${v.impact} ${v.id} (${v.help}) at ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
}

/** @param {import('playwright-core').Page} page */
async function openTokens(page) {
  await page.goto(`${cf.url}/tokens`);
  await page.waitForFunction(() => !!document.querySelector('main p.empty-state, main p.alert'));
}

for (const scheme of /** @type {const} */ (['light', 'dark'])) {
  test(`the list equals the API's; Create token shows the text once and it works; Revoke (${scheme})`, { timeout: 90000 }, async () => {
    const browser = await launch({ colorScheme: scheme });
    try {
      const page = await browser.newPage();
      const errors = collectErrors(page);
      await signIn(page, cf.url, cf.ownerToken);
      await openTokens(page);
      assert.equal(await page.getByRole('link', { name: 'Tokens' }).getAttribute('aria-current'), 'page');
      assert.deepEqual(await page.locator('#tokens thead th').allTextContents(),
        ['Name', 'Role', 'Status', 'Expires', 'Last Used', 'Created', 'Created By', 'Actions']);
      const api = await cf.api('GET', `${P}/tokens`);
      assert.equal(api.status, 200, api.text);
      const rows = page.locator('#tokens tbody tr');
      assert.equal(await rows.count(), api.body.items.length);
      for (const [i, t] of api.body.items.entries()) {
        const cells = rows.nth(i).locator('td');
        assert.equal(await rows.nth(i).getAttribute('data-id'), t.id);
        assert.equal(await cells.nth(1).textContent(), t.role);
        assert.equal(await cells.nth(2).textContent(), t.status);
        if (t.expires_at) assert.equal(await cells.nth(3).locator('time').getAttribute('datetime'), new Date(t.expires_at).toISOString());
        else assert.equal(await cells.nth(3).textContent(), 'never');
        // Created By: the creating token's name when it is listed here, else the API's text.
        const by = api.body.items.find((/** @type {any} */ o) => `token:${o.id}` === t.created_by);
        assert.equal(await cells.nth(6).textContent(), by ? by.name : t.created_by);
        assert.equal(await cells.nth(6).locator('[data-created-by]').getAttribute('data-created-by'), t.created_by);
        // Revoke only for an active token.
        assert.equal(await cells.nth(7).locator('button[data-action=revoke]').count(), t.status === 'active' && !t.system ? 1 : 0);
      }
      assert.ok(api.body.items.some((/** @type {any} */ t) => t.status === 'revoked'));
      assert.ok(api.body.items.some((/** @type {any} */ t) => t.created_by.startsWith('token:')), 'one made over the API');

      // A refused field: the API's message at that field, nothing created.
      await page.getByRole('button', { name: 'Create token' }).click();
      const nameError = page.locator('#token-name-error');
      await nameError.filter({ hasText: /name/ }).waitFor();
      assert.equal(await page.locator('#token-name').getAttribute('aria-invalid'), 'true');
      assert.equal((await cf.api('GET', `${P}/tokens`)).body.items.length, api.body.items.length);

      // Create: operator, 7 days. The text is shown once, and it is a working operator token.
      const name = `deploy-${scheme}`;
      await page.getByLabel('Name (required)').fill(name);
      await page.getByLabel('Role').selectOption('operator');
      await page.getByLabel('Expires').selectOption({ label: '7 days' });
      await page.getByRole('button', { name: 'Create token' }).click();
      const text = page.locator('#token-created-text');
      await text.waitFor();
      const secret = (await text.textContent()) ?? '';
      assert.match(secret, /^cf_[A-Za-z0-9_-]{43}$/);
      assert.equal(await nameError.textContent(), '');
      const use = await cf.api('GET', `${P}/jobs`, undefined, secret);
      assert.equal(use.status, 200, use.text);
      assert.equal((await cf.api('POST', `${P}/jobs`, { type: 'noop' }, secret)).status, 403, 'an operator token');
      const listed = (await cf.api('GET', `${P}/tokens`)).body.items.find((/** @type {any} */ t) => t.name === name);
      assert.equal(listed.role, 'operator');
      const days = (Date.parse(listed.expires_at) - Date.now()) / 86400000;
      assert.ok(days > 6.9 && days <= 7, `expires in 7 days: ${listed.expires_at}`);
      const row = page.locator(`#tokens tbody tr[data-name="${name}"]`);
      await row.waitFor();
      assert.deepEqual(await axe(page), []);
      await shot(page, `tokens-created-${scheme}`);
      // Once: a reload shows it nowhere.
      await page.getByRole('button', { name: 'I have stored it' }).click();
      assert.equal(await page.locator('#token-created').isHidden(), true);
      await openTokens(page);
      assert.equal((await page.content()).includes(secret), false);

      // Revoke asks first; Keep changes nothing; Revoke token ends it.
      await page.locator(`#tokens tbody tr[data-name="${name}"]`).getByRole('button', { name: `Revoke ${name}` }).click();
      await page.getByRole('dialog').getByRole('button', { name: 'Keep it' }).click();
      assert.equal((await cf.api('GET', `${P}/jobs`, undefined, secret)).status, 200);
      await page.locator(`#tokens tbody tr[data-name="${name}"]`).getByRole('button', { name: `Revoke ${name}` }).click();
      await page.getByRole('dialog').getByRole('button', { name: 'Revoke token' }).click();
      await page.locator(`#tokens tbody tr[data-name="${name}"] .tag[data-status=revoked]`).waitFor();
      assert.equal((await cf.api('GET', `${P}/jobs`, undefined, secret)).status, 401);
      await openTokens(page);
      assert.deepEqual(await axe(page), []);
      await shot(page, `tokens-${scheme}`);
      assert.deepEqual(errors, []);
    } finally {
      await browser.close();
    }
  });
}

test('an admin is offered roles up to admin; owner tokens have no Revoke for it; a viewer has no Tokens page', { timeout: 60000 }, async () => {
  const browser = await launch();
  try {
    const page = await browser.newPage();
    const errors = collectErrors(page);
    await signIn(page, cf.url, adminToken);
    await openTokens(page);
    assert.deepEqual(await page.locator('#token-role option').evaluateAll((os) => os.map((o) => /** @type {HTMLOptionElement} */ (o).value)),
      ['viewer', 'operator', 'admin']);
    const owners = (await cf.api('GET', `${P}/tokens`)).body.items.filter((/** @type {any} */ t) => t.role === 'owner' && t.status === 'active');
    assert.ok(owners.length > 0);
    for (const t of owners) assert.equal(await page.locator(`#tokens tbody tr[data-id="${t.id}"] button[data-action=revoke]`).count(), 0);

    await signIn(page, cf.url, viewerToken);
    assert.equal(await page.getByRole('link', { name: 'Tokens' }).count(), 0);
    await openTokens(page);
    assert.match(await page.locator('main p.alert').textContent() ?? '', /managed by an admin.*viewer role/);
    assert.equal(await page.locator('#create-token').count(), 0);
    assert.deepEqual(errors, []);
  } finally {
    await browser.close();
  }
});
