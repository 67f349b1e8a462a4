// The Domains page against a real registry stand-in: a loopback RDAP server
// (tests/testbed/rdap_server.mjs) that certfleet finds through an rdap_bootstrap_file sending
// .test to it, check_allow_list 127.0.0.1/32 and no WHOIS fallback. Domains in each state — ok
// (expires in 300 days), expiring (in 20 days: the 60 and 30 day thresholds crossed), error (the
// registry answers 503) and unknown (never looked up) — are looked up by real
// domain_expiration_check jobs; the page's tags, expiry, registrar, source, times and errors must
// equal the API's. Then: Details (statuses, the server that answered), Check now (operator: a link
// to the job it queued, the state after it ran), Add domain (admin: the API's message at the
// field, a good name listed), Delete with its confirmation, no actions for a viewer, the empty
// state, axe-core. Screenshots: domains-{light,dark}.png.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { startCertfleet, launch, signIn, shot, collectErrors, mkdtemp, rm, tmpdir, join } from './helpers.mjs';
import { startRdapServer } from '../testbed/rdap_server.mjs';

const axeSource = await readFile(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const P = '/api/v1/projects/default';
const day = 86400000;

/** @type {Awaited<ReturnType<typeof startRdapServer>>} */
let rdap;
/** @type {Awaited<ReturnType<typeof startCertfleet>>} */
let cf;
let dir = '';
let operatorToken = '';
let adminToken = '';
let viewerToken = '';
/** @type {Record<string, any>} domains by name, as the API answered after their checks */
const domains = {};

/** @param {string} name */
async function domainByName(name) {
  const r = await cf.api('GET', `${P}/domains?page_size=200`);
  assert.equal(r.status, 200, r.text);
  return r.body.items.find((/** @type {any} */ d) => d.name === name) ?? null;
}

/** Checks a domain now and waits until its job has finished (completed, failed or dead). */
/** @param {string} id */
async function checkAndWait(id) {
  const r = await cf.api('POST', `${P}/domains/${id}/check`);
  assert.equal(r.status, 202, r.text);
  await cf.waitJob(r.body.job_id, (j) => ['completed', 'failed', 'dead'].includes(j.status), 30000);
  return r.body.job_id;
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'certfleet-ui-rdap-'));
  rdap = await startRdapServer({
    'example-ok.test': { expires: new Date(Date.now() + 300 * day), registrar: 'Example Registrar, Inc.', statuses: ['client transfer prohibited', 'server delete prohibited'] },
    'expiring-soon.test': { expires: new Date(Date.now() + 20 * day + 3600000), registrar: 'Slow Renewals LLC' },
    'registry-down.test': { httpStatus: 503 },
    'never-checked.test': { expires: new Date(Date.now() + 400 * day), registrar: 'Example Registrar, Inc.' },
  });
  const bootstrap = await rdap.bootstrapFile(join(dir, 'dns.json'), ['test']);
  cf = await startCertfleet({
    processSettings: { rdap_bootstrap_file: bootstrap },
    settings: { check_allow_list: '127.0.0.1/32', domain_whois_server: '' },
  });
  operatorToken = await cf.token('operator', { name: 'olga-operator' });
  adminToken = await cf.token('admin', { name: 'alice-admin' });
  viewerToken = await cf.token('viewer', { name: 'victor-viewer' });
  for (const name of ['example-ok.test', 'expiring-soon.test', 'registry-down.test', 'never-checked.test']) {
    const r = await cf.api('POST', `${P}/domains`, { name });
    assert.equal(r.status, 201, r.text);
    if (name !== 'never-checked.test') await checkAndWait(r.body.id);
  }
  for (const name of ['example-ok.test', 'expiring-soon.test', 'registry-down.test', 'never-checked.test'])
    domains[name] = await domainByName(name);
  assert.equal(domains['example-ok.test'].state, 'ok', JSON.stringify(domains['example-ok.test']));
  assert.equal(domains['expiring-soon.test'].state, 'expiring', JSON.stringify(domains['expiring-soon.test']));
  assert.equal(domains['registry-down.test'].state, 'error', JSON.stringify(domains['registry-down.test']));
  assert.equal(domains['never-checked.test'].state, 'unknown', JSON.stringify(domains['never-checked.test']));
  // An empty project for the empty state.
  const p = await cf.api('POST', '/api/v1/projects', { name: 'empty-team' });
  assert.equal(p.status, 201, p.text);
});
after(async () => {
  await cf?.stop();
  await rdap?.stop();
  await rm(dir, { recursive: true, force: true });
});

/** @param {import('playwright-core').Page} page */
async function axe(page) {
  await page.evaluate(axeSource);
  /** @type {{id: string, impact: string, help: string, nodes: {target: string[]}[]}[]} */
  const violations = await page.evaluate(async () => {
    // @ts-ignore axe is the script evaluated above
    const r = await window.axe.run(document, { resultTypes: ['violations'] });
    return r.violations.map((/** @type {any} */ v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((/** @type {any} */ n) => ({ target: n.target })) }));
  });
  return violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.impact} ${v.id} (${v.help}) at ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
}

/** @param {import('playwright-core').Page} page */
async function openDomains(page, query = '') {
  await page.goto(`${cf.url}/domains${query}`);
  // The list's status line gets class empty-state once the domains are in (a fresh document after
  // goto: nothing of the page before it is left to match).
  await page.waitForFunction(() => !!document.querySelector('main p.empty-state, main p.alert'));
}

/** @param {import('playwright-core').Page} page @param {string} name */
const row = (page, name) => page.locator(`#domains tbody tr[data-name="${name}"]`);

for (const scheme of /** @type {const} */ (['light', 'dark'])) {
  test(`the list shows each domain as the API does (${scheme}); Details; axe-core; screenshot`, { timeout: 120000 }, async () => {
    const browser = await launch({ colorScheme: scheme });
    try {
      const page = await browser.newPage();
      const errors = collectErrors(page);
      await signIn(page, cf.url, cf.ownerToken);
      await openDomains(page);
      assert.equal(await page.getByRole('link', { name: 'Domains' }).getAttribute('aria-current'), 'page');
      assert.equal(await page.locator('h1').textContent(), 'Domains');
      assert.deepEqual(await page.locator('#domains thead th').allTextContents(),
        ['Name', 'State', 'Expires', 'Registrar', 'Source', 'Last Checked', 'Last Error', 'Actions']);
      // What the API says as the page shows it: the failing domain's check job retries after its
      // backoff, moving checked_at between the set-up's read and this test (a clean-clone run
      // saw it 10 s later).
      for (const name of Object.keys(domains)) domains[name] = await domainByName(name);
      for (const [name, d] of Object.entries(domains)) {
        const r = row(page, name);
        const cells = r.locator('td');
        assert.equal(await cells.nth(0).textContent(), name);
        const tag = cells.nth(1).locator('.tag');
        assert.equal(await tag.textContent(), d.state);
        assert.ok((await tag.getAttribute('class'))?.includes(`domain-${d.state}`));
        if (d.expires_at) {
          const days = Math.floor((Date.parse(d.expires_at) - Date.now()) / day);
          assert.equal(await cells.nth(2).textContent(), `${d.expires_at.slice(0, 10)} (in ${days} days)`);
        } else {
          assert.equal(await cells.nth(2).textContent(), '—');
        }
        assert.equal(await cells.nth(3).textContent(), d.registrar ?? '');
        assert.equal(await cells.nth(4).textContent(), d.source === 'rdap' ? 'RDAP' : d.source === 'whois' ? 'WHOIS' : '');
        if (d.checked_at) assert.equal(await cells.nth(5).locator('time').getAttribute('datetime'), new Date(d.checked_at).toISOString());
        else assert.equal(await cells.nth(5).textContent(), 'never');
        if (d.last_error) {
          const err = cells.nth(6).locator('.error-text');
          assert.equal(await err.textContent(), d.last_error);
          assert.equal(await err.getAttribute('title'), d.last_error);
        } else {
          assert.equal(await cells.nth(6).textContent(), '');
        }
      }
      assert.match(domains['registry-down.test'].last_error, /503/);
      // Red error text, orange expiring tag, green ok tag: the computed colours differ.
      const colour = (/** @type {string} */ sel) => page.locator(sel).first().evaluate((e) => getComputedStyle(e).color);
      const [okC, expC, errC, unkC] = await Promise.all(['.tag.domain-ok', '.tag.domain-expiring', '.tag.domain-error', '.tag.domain-unknown'].map(colour));
      assert.equal(new Set([okC, expC, errC, unkC]).size, 4, `four state colours: ${okC} ${expC} ${errC} ${unkC}`);
      assert.equal(await colour('td.last-error .error-text'), errC);

      // Details: statuses and the server that answered.
      const ok = row(page, 'example-ok.test');
      const toggle = ok.getByRole('button', { name: 'Details of example-ok.test' });
      assert.equal(await toggle.getAttribute('aria-expanded'), 'false');
      await toggle.click();
      assert.equal(await toggle.getAttribute('aria-expanded'), 'true');
      const detail = page.locator(`tr[data-detail-for="${domains['example-ok.test'].id}"]`);
      await detail.waitFor();
      assert.deepEqual(await detail.locator('.status-list li').allTextContents(), domains['example-ok.test'].statuses);
      assert.deepEqual(domains['example-ok.test'].statuses, ['client transfer prohibited', 'server delete prohibited']);
      assert.match(await detail.textContent() ?? '', new RegExp(`RDAP ${rdap.baseUrl.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}`));
      assert.equal(domains['example-ok.test'].server, rdap.baseUrl);
      // The failing one's full error in its Details.
      await row(page, 'registry-down.test').getByRole('button', { name: 'Details of registry-down.test' }).click();
      assert.equal(await page.locator(`tr[data-detail-for="${domains['registry-down.test'].id}"] pre.error-text`).textContent(),
        domains['registry-down.test'].last_error);

      assert.deepEqual(await axe(page), []);
      await shot(page, `domains-${scheme}`);
      assert.deepEqual(errors, []);
    } finally {
      await browser.close();
    }
  });
}

test('Check now (operator) links the job it queued; the domain is looked up; no Add or Delete for an operator', { timeout: 90000 }, async () => {
  const browser = await launch();
  try {
    const page = await browser.newPage();
    const errors = collectErrors(page);
    await signIn(page, cf.url, operatorToken);
    await openDomains(page);
    assert.equal(await page.locator('#add-domain').count(), 0);
    assert.equal(await page.locator('button[data-action=delete]').count(), 0);
    const r = row(page, 'never-checked.test');
    await r.getByRole('button', { name: 'Check now: never-checked.test' }).click();
    const link = page.locator('.feedback a[data-job-id]');
    await link.waitFor();
    const jobId = await link.getAttribute('data-job-id');
    assert.ok(jobId);
    const job = await cf.job(jobId);
    assert.equal(job.type, 'domain_expiration_check');
    assert.equal(job.payload?.domain_id, domains['never-checked.test'].id, JSON.stringify(job));
    assert.match(await page.locator('.feedback').textContent() ?? '', /never-checked\.test: check queued: job /);
    await cf.waitJob(jobId, (j) => j.status === 'completed', 30000);
    await link.click();
    await page.waitForURL((u) => u.pathname === `/jobs/${jobId}`);
    await openDomains(page);
    const after = await domainByName('never-checked.test');
    assert.equal(after.state, 'ok');
    assert.equal(await row(page, 'never-checked.test').locator('.tag').textContent(), 'ok');
    assert.equal(await row(page, 'never-checked.test').locator('td').nth(4).textContent(), 'RDAP');
    assert.deepEqual(errors, []);
  } finally {
    await browser.close();
  }
});

test('Add domain (admin): the API\'s message at the field; a good name is listed; Delete asks first', { timeout: 90000 }, async () => {
  const browser = await launch();
  try {
    const page = await browser.newPage();
    const errors = collectErrors(page);
    await signIn(page, cf.url, adminToken);
    await openDomains(page);
    const input = page.getByLabel('Domain name');
    const fieldError = page.locator('[data-field-error=name]');

    // A host-less word: the API's 400 naming `name`, shown as it is.
    const bad = await cf.api('POST', `${P}/domains`, { name: 'localhost' });
    assert.equal(bad.status, 400, bad.text);
    assert.equal(bad.body.error.field, 'name');
    await input.fill('localhost');
    await page.getByRole('button', { name: 'Add domain' }).click();
    await page.waitForFunction(() => !!document.querySelector('[data-field-error=name]')?.textContent);
    assert.equal(await fieldError.textContent(), bad.body.error.message);
    assert.equal(await input.getAttribute('aria-invalid'), 'true');

    // Already watched: 409, at the field too.
    const dup = await cf.api('POST', `${P}/domains`, { name: 'example-ok.test' });
    assert.equal(dup.status, 409, dup.text);
    await input.fill('example-ok.test');
    await page.getByRole('button', { name: 'Add domain' }).click();
    await page.waitForFunction((m) => document.querySelector('[data-field-error=name]')?.textContent === m, dup.body.error.message);

    await input.fill('New-Domain.test.');
    await page.getByRole('button', { name: 'Add domain' }).click();
    await row(page, 'new-domain.test').waitFor();
    assert.equal(await fieldError.textContent(), '');
    assert.equal(await input.getAttribute('aria-invalid'), null);
    assert.equal(await row(page, 'new-domain.test').locator('.tag').textContent(), 'unknown');
    assert.equal(await row(page, 'new-domain.test').locator('td').nth(5).textContent(), 'never');
    const added = await domainByName('new-domain.test');
    assert.ok(added, 'the API lists the added domain');
    assert.deepEqual(await axe(page), []);

    // Delete: Keep leaves it; Delete removes it.
    const r = row(page, 'new-domain.test');
    await r.getByRole('button', { name: 'Delete new-domain.test' }).click();
    assert.equal(await r.locator('.confirm-text').textContent(), 'Stop watching new-domain.test?');
    await r.getByRole('button', { name: 'Keep' }).click();
    assert.ok(await domainByName('new-domain.test'));
    await r.getByRole('button', { name: 'Delete new-domain.test' }).click();
    await r.getByRole('button', { name: 'Yes, delete new-domain.test' }).click();
    await page.locator('#domains tbody tr[data-name="new-domain.test"]').waitFor({ state: 'detached' });
    assert.match(await page.locator('.feedback').textContent() ?? '', /new-domain\.test is no longer watched/);
    assert.equal(await domainByName('new-domain.test'), null);
    assert.deepEqual(errors, []);
  } finally {
    await browser.close();
  }
});

test('a viewer sees the domains and Details only; an empty project says what the page is for', { timeout: 60000 }, async () => {
  const browser = await launch();
  try {
    const page = await browser.newPage();
    const errors = collectErrors(page);
    await signIn(page, cf.url, viewerToken);
    await openDomains(page);
    assert.equal(await page.locator('#domains tbody tr[data-name]').count(), 4);
    assert.equal(await page.locator('#add-domain').count(), 0);
    assert.equal(await page.locator('button[data-action]').count(), 0);
    assert.equal(await page.locator('button.details-toggle').count(), 4);

    await signIn(page, cf.url, cf.ownerToken);
    await openDomains(page, '?project=empty-team');
    const empty = await page.locator('main .empty-state').textContent() ?? '';
    assert.match(empty, /No domains are watched in this project/);
    assert.match(empty, /looked up every hour/);
    assert.match(empty, /domain\.expiring notification/);
    assert.equal(await page.locator('#domains tbody tr').count(), 0);
    assert.deepEqual(await axe(page), []);
    await shot(page, 'domains-empty-light');
    assert.deepEqual(errors, []);
  } finally {
    await browser.close();
  }
});
