// The DNS Providers page (issue 33): the list shows each provider as the API does (kind, where,
// whether a secret is stored — never the secret); the Add form shows the chosen kind's fields
// with their help, puts the API's message under the field it names, and adds a good provider;
// the exec kind is offered to system tokens only; Delete asks in a dialog naming the provider;
// a viewer sees no form and no actions. axe-core at desktop and phone width, light and dark.
// Screenshots: dns-providers-{light,dark}.png, dns-providers-phone.png.
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
  cf = await startCertfleet();
  adminToken = await cf.token('admin', { name: 'alice-admin' });
  viewerToken = await cf.token('viewer', { name: 'victor-viewer' });
  const bodies = [
    { name: 'primary-dns', kind: 'rfc2136', rfc2136: { server: '192.0.2.53:53', zone: 'example.com', tsig_key_name: 'certfleet-key', tsig_secret: 'bwN2YRfAphUOn8x/kNYV7r4tVchwfR+++ig93ue2IqI=' } },
    { name: 'by-hand', kind: 'manual' },
    { name: 'hook', kind: 'exec', exec: { program: '/usr/local/lib/certfleet/dns-hook', env: { API_TOKEN: 'tok-very-secret-1' } } },
    { name: 'pdns', kind: 'powerdns', powerdns: { api_url: 'https://pdns.example.com:8081', api_key: 'key-very-secret-2', zone: 'example.com' } },
  ];
  for (const b of bodies) {
    const r = await cf.api('POST', `${P}/dns-providers`, b);
    assert.equal(r.status, 201, r.text);
  }
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
async function open(page) {
  await page.goto(`${cf.url}/dns-providers`);
  await page.waitForFunction(() => !!document.querySelector('main p.empty-state, main p.alert'));
}

for (const scheme of /** @type {const} */ (['light', 'dark'])) {
  test(`the list shows each provider and never a secret (${scheme}); axe-core; screenshot`, { timeout: 120000 }, async () => {
    const browser = await launch({ colorScheme: scheme });
    try {
      const page = await browser.newPage();
      const errors = collectErrors(page);
      await signIn(page, cf.url, cf.ownerToken);
      await open(page);
      assert.equal(await page.getByRole('link', { name: 'DNS Providers' }).getAttribute('aria-current'), 'page');
      assert.deepEqual(await page.locator('#dns-providers thead th').allTextContents(), ['Name', 'Kind', 'Where', 'Secret', 'Created', 'Actions']);
      const cells = async (/** @type {string} */ name) => page.locator(`#dns-providers tbody tr[data-name="${name}"] td`).allTextContents();
      const rfc = await cells('primary-dns');
      assert.deepEqual(rfc.slice(0, 4), ['primary-dns', 'rfc2136', '192.0.2.53:53 (zone example.com)', 'sealed']);
      assert.deepEqual((await cells('by-hand')).slice(0, 4), ['by-hand', 'manual', 'checked at the zone\'s servers', '—']);
      assert.deepEqual((await cells('hook')).slice(0, 4), ['hook', 'exec', '/usr/local/lib/certfleet/dns-hook', 'env: API_TOKEN']);
      assert.deepEqual((await cells('pdns')).slice(0, 4), ['pdns', 'powerdns', 'https://pdns.example.com:8081 (zone example.com)', 'sealed']);
      const html = await page.content();
      for (const secret of ['tok-very-secret-1', 'key-very-secret-2', 'bwN2YRfAphUOn8x']) assert.ok(!html.includes(secret), secret);
      assert.deepEqual(await axe(page), []);
      await shot(page, `dns-providers-${scheme}`);
      assert.deepEqual(errors, []);
    } finally {
      await browser.close();
    }
  });
}

test('the Add form follows the kind, shows the API\'s message at its field, and adds a provider', { timeout: 120000 }, async () => {
  const browser = await launch();
  try {
    const page = await browser.newPage();
    const errors = collectErrors(page);
    await signIn(page, cf.url, adminToken);
    await open(page);
    // A project admin is not offered exec (system admins only).
    const kinds = await page.locator('#dp-kind option').evaluateAll((os) => os.map((o) => /** @type {HTMLOptionElement} */ (o).value));
    assert.deepEqual(kinds, ['rfc2136', 'manual', 'httpreq', 'powerdns']);
    await page.selectOption('#dp-kind', 'powerdns');
    assert.match(await page.locator('#dp-kind-intro').textContent() ?? '', /PowerDNS Authoritative/);
    for (const id of ['#dp-powerdns-api_url', '#dp-powerdns-api_key', '#dp-powerdns-server_id', '#dp-powerdns-zone', '#dp-powerdns-allow_plain_http', '#dp-powerdns-timeout_s'])
      assert.equal(await page.locator(id).count(), 1, id);
    assert.equal(await page.locator('#dp-rfc2136-server').count(), 0);
    assert.equal(await page.locator('#dp-powerdns-check_propagation').isChecked(), true);
    // http:// without allow_plain_http: the API names powerdns.api_url; the message is under it.
    await page.fill('#dp-name', 'lab-pdns');
    await page.fill('#dp-powerdns-api_url', 'http://10.0.0.5:8081');
    await page.fill('#dp-powerdns-api_key', 'lab-key-123');
    await page.click('#add-dns-provider button[type=submit]');
    const apiUrlError = page.locator('#dp-powerdns-api_url-error');
    await apiUrlError.waitFor({ state: 'visible' });
    assert.match(await apiUrlError.textContent() ?? '', /allow_plain_http/);
    assert.equal(await page.locator('#dp-powerdns-api_url').getAttribute('aria-invalid'), 'true');
    assert.equal(await page.evaluate(() => document.activeElement?.id), 'dp-powerdns-api_url');
    await page.check('#dp-powerdns-allow_plain_http');
    await page.click('#add-dns-provider button[type=submit]');
    await page.locator('#dns-providers tbody tr[data-name="lab-pdns"]').waitFor();
    const r = await cf.api('GET', `${P}/dns-providers`);
    const added = r.body.items.find((/** @type {any} */ p) => p.name === 'lab-pdns');
    assert.equal(added.kind, 'powerdns');
    assert.equal(added.powerdns.api_url, 'http://10.0.0.5:8081');
    assert.equal(added.powerdns.allow_plain_http, true);
    assert.ok(!JSON.stringify(added).includes('lab-key-123'));
    // httpreq: a password without a username is refused at httpreq.password.
    await page.selectOption('#dp-kind', 'httpreq');
    await page.fill('#dp-name', 'api');
    await page.fill('#dp-httpreq-endpoint', 'https://dns-api.example.com/acme');
    await page.fill('#dp-httpreq-password', 'pw');
    await page.click('#add-dns-provider button[type=submit]');
    await page.locator('#dp-httpreq-password-error').waitFor({ state: 'visible' });
    assert.match(await page.locator('#dp-httpreq-password-error').textContent() ?? '', /username/);
    // Delete asks first, naming the provider; Keep leaves it.
    await page.locator('#dns-providers tbody tr[data-name="lab-pdns"] button[data-action=delete]').click();
    const dialog = page.locator('dialog.confirm-dialog');
    await dialog.waitFor();
    assert.match(await dialog.locator('h2').textContent() ?? '', /lab-pdns/);
    await dialog.locator('[data-confirm=no]').click();
    assert.equal(await page.locator('#dns-providers tbody tr[data-name="lab-pdns"]').count(), 1);
    await page.locator('#dns-providers tbody tr[data-name="lab-pdns"] button[data-action=delete]').click();
    await page.locator('dialog.confirm-dialog [data-confirm=yes]').click();
    await page.locator('#dns-providers tbody tr[data-name="lab-pdns"]').waitFor({ state: 'detached' });
    assert.deepEqual(errors, []);
  } finally {
    await browser.close();
  }
});

test('a system token is offered exec with its own fields; a viewer sees no form or actions; phone width', { timeout: 120000 }, async () => {
  const browser = await launch();
  try {
    const page = await browser.newPage();
    await signIn(page, cf.url, cf.ownerToken);
    await open(page);
    await page.selectOption('#dp-kind', 'exec');
    for (const id of ['#dp-exec-program', '#dp-exec-env', '#dp-exec-timeout_s', '#dp-exec-check_propagation'])
      assert.equal(await page.locator(id).count(), 1, id);
    // A line without NAME= is caught before anything is sent.
    await page.fill('#dp-name', 'hook2');
    await page.fill('#dp-exec-program', '/usr/local/bin/hook');
    await page.fill('#dp-exec-env', 'just-a-value');
    await page.click('#add-dns-provider button[type=submit]');
    await page.locator('#dp-exec-env-error').waitFor({ state: 'visible' });

    const small = await launch({ viewport: { width: 360, height: 780 } });
    try {
      const phone = await small.newPage();
      await signIn(phone, cf.url, cf.ownerToken);
      await open(phone);
      assert.equal(await phone.evaluate(() => window.innerWidth), 360);
      const sideways = await phone.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
      assert.ok(sideways <= 0, `the page scrolls sideways by ${sideways} px at 360 px`);
      assert.deepEqual(await axe(phone), []);
      await shot(phone, 'dns-providers-phone');
    } finally {
      await small.close();
    }

    const viewer = await browser.newPage();
    await signIn(viewer, cf.url, viewerToken);
    await open(viewer);
    assert.equal(await viewer.locator('#add-dns-provider').count(), 0);
    assert.equal(await viewer.locator('#dns-providers button').count(), 0);
    assert.equal(await viewer.locator('#dns-providers tbody tr').count(), 4);
  } finally {
    await browser.close();
  }
});
