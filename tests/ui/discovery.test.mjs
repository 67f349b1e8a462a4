// The Discovery pages against real TLS endpoints on 127.0.0.1 (tests/testbed/tls_endpoints.mjs:
// certificates from the openssl CLI, `openssl s_server -www` serving them): a CA-signed leaf for
// app.test sent with its chain, a self-signed RSA one that expires in 10 days, and a closed port.
// discovery_allow_list is set to 127.0.0.1/32 by a system admin (PUT /api/v1/settings). A source is
// added through the form (a CIDR outside the allow-list and a bad endpoint first: the API's message
// at the field it names), scanned by Run now (operator) through a real discovery_execute job; the
// certificates page must show each certificate and its findings as the API does, the filters
// narrow the list as the API's, Import (admin) takes the key (a wrong one: key_pem's message at its
// field), a viewer sees no action; axe-core light and dark. Screenshots: discovery-{light,dark},
// discovery-certificates-{light,dark}, discovery-empty-light, discovery-import-light.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { startCertfleet, launch, signIn, shot, collectErrors } from './helpers.mjs';
import { tlsWorkshop } from '../testbed/tls_endpoints.mjs';

const axeSource = await readFile(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const P = '/api/v1/projects/default';
const day = 86400000;
const fixedFindings = ['expired', 'expiring', 'self_signed', 'name_mismatch', 'incomplete_chain', 'weak_key', 'deprecated_protocol'];

/** @type {Awaited<ReturnType<typeof tlsWorkshop>>} */
let tls;
/** @type {Awaited<ReturnType<typeof startCertfleet>>} */
let cf;
let operatorToken = '';
let adminToken = '';
let viewerToken = '';
/** @type {Awaited<ReturnType<Awaited<ReturnType<typeof tlsWorkshop>>['leaf']>>} */
let app;
/** @type {typeof app} */
let legacy;
let appEndpoint = '';
let legacyEndpoint = '';
const closedEndpoint = '127.0.0.1:1';
let sourceId = '';

/** @param {string} [query] */
async function discovered(query = '') {
  const r = await cf.api('GET', `${P}/discovered-certificates?page_size=200${query}`);
  assert.equal(r.status, 200, r.text);
  return /** @type {any[]} */ (r.body.items);
}

async function sources() {
  const r = await cf.api('GET', `${P}/discovery-sources?page_size=200`);
  assert.equal(r.status, 200, r.text);
  return /** @type {any[]} */ (r.body.items);
}

/** @param {string} pem the leaf's PEM: its fingerprint as the API writes it */
async function fingerprintOf(pem) {
  const { X509Certificate } = await import('node:crypto');
  return new X509Certificate(pem).fingerprint256.replaceAll(':', '').toLowerCase();
}

before(async () => {
  tls = await tlsWorkshop();
  app = await tls.leaf('app.test');
  legacy = await tls.selfSigned('legacy.test', { days: 10, key: 'rsa' });
  appEndpoint = (await tls.serve(app)).endpoint;
  legacyEndpoint = (await tls.serve(legacy)).endpoint;
  cf = await startCertfleet();
  // A system admin allows the loopback address (the owner token of a fresh store is one).
  const sys = await cf.api('PUT', '/api/v1/settings', { discovery_allow_list: '127.0.0.1/32' });
  assert.equal(sys.status, 200, sys.text);
  assert.equal(sys.body.discovery_allow_list, '127.0.0.1/32');
  operatorToken = await cf.token('operator', { name: 'olga-operator' });
  adminToken = await cf.token('admin', { name: 'alice-admin' });
  viewerToken = await cf.token('viewer', { name: 'victor-viewer' });
});
after(async () => {
  await cf?.stop();
  await tls?.stop();
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

/** @param {import('playwright-core').Page} page @param {string} path */
async function open(page, path) {
  await page.goto(`${cf.url}${path}`);
  // The list's status line (not the feedback line, also a status) says Loading… until the list is in.
  await page.waitForFunction(() => { const s = document.querySelector('main p[role=status], main p.alert'); return !!s && s.textContent !== 'Loading…'; });
}

/** @param {import('playwright-core').Page} page @param {string} name */
const sourceRow = (page, name) => page.locator(`#discovery-sources tbody tr[data-name="${name}"]`);
/** @param {import('playwright-core').Page} page @param {string} fp */
const certRow = (page, fp) => page.locator(`#discovered-certificates tbody tr[data-fingerprint="${fp}"]`);

/**
 * Fills the Add source form and submits it.
 * @param {import('playwright-core').Page} page
 * @param {{name: string, endpoints?: string, cidrs?: string, ports?: string, sni?: string, schedule?: string, every?: string}} v
 */
async function addSource(page, v) {
  await page.getByLabel('Name', { exact: true }).fill(v.name);
  await page.getByLabel('Endpoints').fill(v.endpoints ?? '');
  await page.getByLabel('CIDRs').fill(v.cidrs ?? '');
  await page.getByLabel('Ports').fill(v.ports ?? '');
  await page.getByLabel('SNI names').fill(v.sni ?? '');
  await page.getByLabel('Schedule').selectOption(v.schedule ?? '0');
  if (v.every) await page.getByLabel('N =').fill(v.every);
  await page.getByRole('button', { name: 'Add source' }).click();
}

test('the empty state names discovery_allow_list; Add source (admin) shows the API\'s 400 at the field it names, then adds', { timeout: 90000 }, async () => {
  const browser = await launch();
  try {
    const page = await browser.newPage();
    const errors = collectErrors(page);
    await signIn(page, cf.url, adminToken);
    await open(page, '/discovery');
    assert.equal(await page.getByRole('link', { name: 'Discovery', exact: true }).getAttribute('aria-current'), 'page');
    assert.equal(await page.locator('h1').textContent(), 'Discovery');
    assert.equal(await page.locator('nav.tabs a[aria-current=page]').textContent(), 'Sources');
    const empty = await page.locator('main .empty-state').textContent() ?? '';
    assert.match(empty, /No discovery sources in this project/);
    assert.match(empty, /discovery_allow_list/);
    assert.match(empty, /system admin sets it on the Settings page/);
    assert.deepEqual(await axe(page), []);
    await shot(page, 'discovery-empty-light');

    // A range outside the allow-list: refused whole, at the CIDRs field, in the API's words.
    const outside = await cf.api('POST', `${P}/discovery-sources`, { name: 'office', cidrs: ['10.0.0.0/24'], ports: [443] });
    assert.equal(outside.status, 400, outside.text);
    assert.equal(outside.body.error.field, 'cidrs[0]');
    await addSource(page, { name: 'office', cidrs: '10.0.0.0/24', ports: '443' });
    const cidrError = page.locator('[data-field-error=cidrs]');
    await page.waitForFunction(() => !!document.querySelector('[data-field-error=cidrs]')?.textContent);
    assert.equal(await cidrError.textContent(), outside.body.error.message);
    assert.match(outside.body.error.message, /outside discovery_allow_list/);
    assert.equal(await page.getByLabel('CIDRs').getAttribute('aria-invalid'), 'true');
    assert.equal(await page.locator('[data-field-error=endpoints]').textContent(), '');

    // endpoints[1] (a host without a port) at the Endpoints field; the CIDRs error is gone.
    const badEp = await cf.api('POST', `${P}/discovery-sources`, { name: 'loopback', endpoints: [appEndpoint, 'app.test'] });
    assert.equal(badEp.status, 400, badEp.text);
    assert.equal(badEp.body.error.field, 'endpoints[1]');
    await addSource(page, { name: 'loopback', endpoints: `${appEndpoint}\napp.test` });
    await page.waitForFunction((m) => document.querySelector('[data-field-error=endpoints]')?.textContent === m, badEp.body.error.message);
    assert.equal(await cidrError.textContent(), '');
    assert.equal(await page.getByLabel('CIDRs').getAttribute('aria-invalid'), null);

    // ports[1] out of range at the Ports field.
    const badPort = await cf.api('POST', `${P}/discovery-sources`, { name: 'loopback', cidrs: ['127.0.0.1/32'], ports: [443, 70000] });
    assert.equal(badPort.body.error.field, 'ports[1]');
    await addSource(page, { name: 'loopback', cidrs: '127.0.0.1/32', ports: '443, 70000' });
    await page.waitForFunction((m) => document.querySelector('[data-field-error=ports]')?.textContent === m, badPort.body.error.message);
    assert.deepEqual(await sources(), [], 'nothing was stored');

    // The good one: two TLS endpoints and a closed port, SNI app.test, every 6 hours.
    await addSource(page, { name: 'loopback', endpoints: `${appEndpoint}\n${legacyEndpoint}, ${closedEndpoint}`, sni: 'app.test', schedule: '3600', every: '6' });
    const r = sourceRow(page, 'loopback');
    await r.waitFor();
    const [s] = await sources();
    sourceId = s.id;
    assert.deepEqual(s.endpoints, [appEndpoint, legacyEndpoint, closedEndpoint]);
    assert.deepEqual(s.sni, ['app.test']);
    assert.equal(s.schedule_s, 6 * 3600);
    assert.equal(s.last_run, null);
    const cells = r.locator('td');
    assert.equal(await cells.nth(0).textContent(), 'loopback');
    assert.equal(await cells.nth(1).locator('.target-count').textContent(), `${s.targets} targets`);
    assert.equal(await cells.nth(1).locator('.target-summary').textContent(), '3 endpoints · SNI app.test');
    assert.equal(await cells.nth(2).textContent(), 'every 6 hours');
    assert.equal(await cells.nth(3).textContent(), 'never');
    // The targets expand.
    await cells.nth(1).locator('summary').click();
    assert.deepEqual(await cells.nth(1).locator('dd').first().locator('li').allTextContents(), s.endpoints);
    assert.equal(await page.locator('[data-field-error]:not(:empty)').count(), 0);
    assert.match(await page.locator('.feedback').textContent() ?? '', /Added loopback \(3 targets\)/);
    assert.deepEqual(await axe(page), []);
    assert.deepEqual(errors, []);
  } finally {
    await browser.close();
  }
});

test('Run now (operator) links the scan job; the Last Run says ok/failed of scanned and the certificates; no Add or Delete', { timeout: 90000 }, async () => {
  const browser = await launch();
  try {
    const page = await browser.newPage();
    const errors = collectErrors(page);
    await signIn(page, cf.url, operatorToken);
    await open(page, '/discovery');
    assert.equal(await page.locator('#add-source').count(), 0);
    assert.equal(await page.locator('button[data-action=delete]').count(), 0);
    await sourceRow(page, 'loopback').getByRole('button', { name: 'Run now: loopback' }).click();
    const link = page.locator('.feedback a[data-job-id]');
    await link.waitFor();
    const jobId = /** @type {string} */ (await link.getAttribute('data-job-id'));
    assert.match(await page.locator('.feedback').textContent() ?? '', /loopback: scan queued: job /);
    const job = await cf.waitJob(jobId, (j) => ['completed', 'failed', 'dead'].includes(j.status), 60000);
    assert.equal(job.type, 'discovery_execute');
    assert.equal(job.payload.source_id, sourceId);
    assert.equal(job.status, 'completed');
    assert.equal(job.result_status, 'partial', 'the closed port did not answer');
    // The page reads the list again by itself once the job has finished.
    await sourceRow(page, 'loopback').locator('.run-counts').waitFor({ timeout: 30000 });
    const [s] = await sources();
    assert.equal(s.last_run.job_id, jobId);
    assert.equal(s.last_run.scanned, 3);
    assert.equal(s.last_run.ok, 2);
    assert.equal(s.last_run.failed, 1);
    const cell = sourceRow(page, 'loopback').locator('td').nth(3);
    assert.equal(await cell.locator('.run-counts').textContent(), `${s.last_run.ok} ok / ${s.last_run.failed} failed of ${s.last_run.scanned} scanned`);
    assert.equal(await cell.locator('time').getAttribute('datetime'), new Date(s.last_run.finished_at).toISOString());
    assert.equal(await cell.locator('a[data-certificates-for]').textContent(), `${s.last_run.certificates} certificates`);
    assert.equal(await cell.locator('a[data-job-id]').getAttribute('data-job-id'), jobId);
    assert.ok((await cell.locator('.last-run').getAttribute('class'))?.includes('run-partial'));
    // Still so after a reload.
    await open(page, '/discovery');
    assert.equal(await cell.locator('.run-counts').textContent(), `${s.last_run.ok} ok / ${s.last_run.failed} failed of ${s.last_run.scanned} scanned`);
    await cell.locator('a[data-job-id]').click();
    await page.waitForURL((u) => u.pathname === `/jobs/${jobId}`);
    assert.deepEqual(errors, []);
  } finally {
    await browser.close();
  }
});

for (const scheme of /** @type {const} */ (['light', 'dark'])) {
  test(`the certificates page shows each certificate and its findings as the API does (${scheme}); axe-core; screenshots`, { timeout: 120000 }, async () => {
    const browser = await launch({ colorScheme: scheme });
    try {
      const page = await browser.newPage();
      const errors = collectErrors(page);
      await signIn(page, cf.url, cf.ownerToken);
      await open(page, '/discovery');
      await sourceRow(page, 'loopback').locator('td').nth(1).locator('summary').click();
      assert.deepEqual(await axe(page), []);
      await shot(page, `discovery-${scheme}`);

      await sourceRow(page, 'loopback').locator('a[data-certificates-for]').click();
      await page.waitForURL((u) => u.pathname === '/discovery/certificates' && u.searchParams.get('source') === sourceId);
      await open(page, '/discovery/certificates');
      assert.equal(await page.locator('nav.tabs a[aria-current=page]').textContent(), 'Discovered certificates');
      assert.deepEqual(await page.locator('#discovered-certificates thead th').allTextContents(),
        ['Subject', 'Issuer', 'Expires', 'Key', 'Findings', 'Seen At', 'Last Seen', 'Managed']);
      const items = await discovered();
      const appFp = await fingerprintOf(app.cert_pem);
      const legacyFp = await fingerprintOf(legacy.cert_pem);
      assert.deepEqual(items.map((c) => c.fingerprint_sha256).sort(), [appFp, legacyFp].sort());
      assert.equal(await page.locator('#discovered-certificates tbody tr[data-fingerprint]').count(), items.length);
      const byFp = Object.fromEntries(items.map((c) => [c.fingerprint_sha256, c]));
      // What the fixtures must produce: the legacy one is self-signed, expiring and not for app.test.
      const names = (/** @type {any} */ c) => c.findings.map((/** @type {any} */ f) => f.name);
      assert.ok(['expiring', 'self_signed', 'name_mismatch'].every((n) => names(byFp[legacyFp]).includes(n)), JSON.stringify(byFp[legacyFp].findings));
      assert.ok(!names(byFp[appFp]).includes('self_signed') && !names(byFp[appFp]).includes('name_mismatch'), JSON.stringify(byFp[appFp].findings));
      for (const c of items) {
        const r = certRow(page, c.fingerprint_sha256);
        const cells = r.locator('td');
        assert.equal(await cells.nth(0).locator('strong').textContent(), c.subject);
        assert.equal(await cells.nth(1).textContent(), c.issuer);
        const days = Math.floor((Date.parse(c.not_after) - Date.now()) / day);
        assert.equal(await cells.nth(2).textContent(), `${c.not_after.slice(0, 10)} (in ${days} days)`);
        assert.equal(await cells.nth(3).textContent(), `${c.key_type.toUpperCase()} ${c.key_bits}`);
        const tags = cells.nth(4).locator('.tag.finding');
        assert.equal(await tags.count(), c.findings.length);
        for (const [i, f] of c.findings.entries()) {
          const t = tags.nth(i);
          assert.equal(await t.textContent(), f.name.replaceAll('_', ' '));
          assert.equal(await t.getAttribute('data-severity'), f.severity);
          assert.ok((await t.getAttribute('class'))?.includes(`finding-${f.severity}`));
          assert.equal(await t.getAttribute('title'), f.text);
        }
        if (!c.findings.length) assert.equal(await cells.nth(4).textContent(), 'none');
        // Seen At: the count, then each endpoint with its SNI and protocol.
        const seen = cells.nth(5);
        assert.equal(await seen.locator('summary').textContent(), `${c.endpoints.length} endpoint${c.endpoints.length === 1 ? '' : 's'}`);
        await seen.locator('summary').click();
        for (const e of c.endpoints) {
          const li = seen.locator(`li[data-endpoint="${e.endpoint}"]`);
          const text = await li.textContent() ?? '';
          assert.ok(text.includes(`SNI ${e.sni || 'none'}`) && text.includes(e.protocol), text);
        }
        assert.equal(await cells.nth(6).locator('time').getAttribute('datetime'), new Date(c.last_seen_at).toISOString());
        assert.equal(await cells.nth(7).textContent(), 'Import');
      }
      assert.deepEqual(byFp[appFp].endpoints.map((/** @type {any} */ e) => [e.endpoint, e.sni]), [[appEndpoint, 'app.test']]);
      assert.deepEqual(byFp[legacyFp].endpoints.map((/** @type {any} */ e) => [e.endpoint, e.sni]), [[legacyEndpoint, 'app.test']]);
      // critical red, warning orange: different colours.
      const colour = (/** @type {string} */ sel) => page.locator(sel).first().evaluate((e) => getComputedStyle(e).color);
      assert.notEqual(await colour('.tag.finding-critical'), await colour('.tag.finding-warning'));
      assert.deepEqual(await axe(page), []);
      await shot(page, `discovery-certificates-${scheme}`);
      assert.deepEqual(errors, []);
    } finally {
      await browser.close();
    }
  });
}

test('the filters (?source=, ?finding=) narrow the list as the API does', { timeout: 90000 }, async () => {
  // A second source that reaches only the app endpoint, without SNI.
  const second = await cf.api('POST', `${P}/discovery-sources`, { name: 'app-only', endpoints: [appEndpoint] });
  assert.equal(second.status, 201, second.text);
  const run = await cf.api('POST', `${P}/discovery-sources/${second.body.id}/run`);
  assert.equal(run.status, 202, run.text);
  await cf.waitJob(run.body.job_id, (j) => ['completed', 'failed', 'dead'].includes(j.status), 60000);
  const browser = await launch();
  try {
    const page = await browser.newPage();
    const errors = collectErrors(page);
    await signIn(page, cf.url, viewerToken);
    await open(page, '/discovery/certificates');
    const finding = page.getByLabel('Finding');
    const options = await finding.locator('option').allTextContents();
    assert.deepEqual(options.slice(0, 1 + fixedFindings.length), ['Any finding', ...fixedFindings.map((f) => f.replaceAll('_', ' '))]);
    /** @param {string} query */
    const shown = async (query) => {
      const api = (await discovered(query)).map((c) => c.fingerprint_sha256).sort();
      await page.waitForFunction((n) => document.querySelectorAll('#discovered-certificates tbody tr[data-fingerprint]').length === n
        && document.querySelector('main p[role=status]')?.textContent !== 'Loading…', api.length);
      const ui = (await page.locator('#discovered-certificates tbody tr[data-fingerprint]').evaluateAll((rs) => rs.map((r) => r.getAttribute('data-fingerprint')))).sort();
      assert.deepEqual(ui, api, query);
      return api;
    };
    assert.equal((await shown('')).length, 2);

    await finding.selectOption('self_signed');
    await page.waitForURL((u) => u.searchParams.get('finding') === 'self_signed');
    assert.deepEqual(await shown('&finding=self_signed'), [await fingerprintOf(legacy.cert_pem)]);

    await page.getByLabel('Source').selectOption({ label: 'app-only' });
    await page.waitForURL((u) => u.searchParams.get('source') === second.body.id && u.searchParams.get('finding') === 'self_signed');
    assert.deepEqual(await shown(`&finding=self_signed&source=${second.body.id}`), []);
    assert.match(await page.locator('main .empty-state').textContent() ?? '', /No discovered certificate matches these filters/);

    await finding.selectOption('');
    await page.waitForURL((u) => !u.searchParams.has('finding'));
    assert.deepEqual(await shown(`&source=${second.body.id}`), [await fingerprintOf(app.cert_pem)]);

    // Straight from a URL, and the pager keeps the filters.
    await open(page, `/discovery/certificates?source=${sourceId}&finding=expiring&page_size=1`);
    assert.equal(await page.getByLabel('Source').inputValue(), sourceId);
    assert.equal(await finding.inputValue(), 'expiring');
    assert.deepEqual(await shown(`&source=${sourceId}&finding=expiring`), [await fingerprintOf(legacy.cert_pem)]);
    await open(page, `/discovery/certificates?page_size=1`);
    assert.equal(await page.locator('#discovered-certificates tbody tr[data-fingerprint]').count(), 1);
    assert.equal(await page.locator('.pager .page-no').textContent(), 'Page 1 of 2');
    await page.locator('.pager a[rel=next]').click();
    await page.waitForURL((u) => u.searchParams.get('page') === '2' && u.searchParams.get('page_size') === '1');
    await page.waitForFunction(() => document.querySelector('.pager .page-no')?.textContent === 'Page 2 of 2');
    assert.equal(await page.locator('#discovered-certificates tbody tr[data-fingerprint]').count(), 1);

    // A viewer: no buttons on either page (the Details of targets and endpoints only).
    assert.equal(await page.locator('main button').count(), 0);
    await open(page, '/discovery');
    assert.equal(await page.locator('#add-source').count(), 0);
    assert.equal(await page.locator('main button').count(), 0);
    assert.equal(await page.locator('#discovery-sources details.targets').count(), 2);
    assert.deepEqual(errors, []);
  } finally {
    await browser.close();
  }
});

test('Import (admin): a wrong key shows key_pem\'s message at its field; the right key makes it managed', { timeout: 90000 }, async () => {
  const browser = await launch();
  try {
    const page = await browser.newPage();
    const errors = collectErrors(page);
    await signIn(page, cf.url, adminToken);
    await open(page, '/discovery/certificates');
    const fp = await fingerprintOf(app.cert_pem);
    const c = (await discovered()).find((x) => x.fingerprint_sha256 === fp);
    const r = certRow(page, fp);
    const button = r.getByRole('button', { name: `Import ${c.subject}` });
    assert.equal(await button.getAttribute('aria-expanded'), 'false');
    await button.click();
    assert.equal(await button.getAttribute('aria-expanded'), 'true');
    const form = page.locator(`form[data-import-for="${c.id}"]`);
    await form.waitFor();
    assert.equal(await form.getByLabel('Certificate name').inputValue(), 'app.test');

    // The legacy certificate's key is not this leaf's.
    const wrong = await cf.api('POST', `${P}/discovered-certificates/${c.id}/import`, { name: 'app', key_pem: legacy.key_pem });
    assert.equal(wrong.status, 400, wrong.text);
    assert.equal(wrong.body.error.field, 'key_pem');
    await form.getByLabel('Certificate name').fill('app');
    await form.getByLabel('Private key (PEM)').fill(legacy.key_pem);
    await form.getByRole('button', { name: `Import ${c.subject}` }).click();
    await page.waitForFunction(([id, m]) => document.querySelector(`form[data-import-for="${id}"] [data-field-error=key_pem]`)?.textContent === m, [c.id, wrong.body.error.message]);
    assert.equal(await form.getByLabel('Private key (PEM)').getAttribute('aria-invalid'), 'true');
    assert.equal((await discovered()).find((x) => x.id === c.id).managed_certificate_id, null);
    assert.deepEqual(await axe(page), []);
    await shot(page, 'discovery-import-light');

    await form.getByLabel('Private key (PEM)').fill(app.key_pem);
    await form.getByLabel('Chain (PEM, optional)').fill(app.chain_pem);
    await form.getByRole('button', { name: `Import ${c.subject}` }).click();
    const made = page.locator('.feedback a[data-certificate-id]');
    await made.waitFor();
    const certId = /** @type {string} */ (await made.getAttribute('data-certificate-id'));
    const after = (await discovered()).find((x) => x.id === c.id);
    assert.equal(after.managed_certificate_id, certId);
    const cert = await cf.api('GET', `${P}/certificates/${certId}`);
    assert.equal(cert.status, 200, cert.text);
    assert.equal(cert.body.name, 'app');
    assert.equal(cert.body.fingerprint_sha256, fp);
    const managed = certRow(page, fp).locator('td').nth(7).locator('a');
    await page.waitForFunction((id) => !!document.querySelector(`#discovered-certificates td a[data-certificate-id="${id}"]`), certId);
    assert.equal(await managed.textContent(), 'app');
    assert.equal(await managed.getAttribute('href'), `/certificates/${certId}?project=default`);
    assert.equal(await certRow(page, fp).getByRole('button', { name: /Import/ }).count(), 0);
    await managed.click();
    await page.waitForURL((u) => u.pathname === `/certificates/${certId}`);
    assert.deepEqual(errors, []);
  } finally {
    await browser.close();
  }
});

test('Delete (admin) asks first; the certificates it found stay', { timeout: 60000 }, async () => {
  const browser = await launch();
  try {
    const page = await browser.newPage();
    const errors = collectErrors(page);
    await signIn(page, cf.url, adminToken);
    await open(page, '/discovery');
    const before = (await discovered()).length;
    const r = sourceRow(page, 'app-only');
    await r.getByRole('button', { name: 'Delete app-only' }).click();
    assert.equal(await r.locator('.confirm-text').textContent(), 'Delete source app-only?');
    await r.getByRole('button', { name: 'Keep' }).click();
    assert.equal((await sources()).length, 2);
    await r.getByRole('button', { name: 'Delete app-only' }).click();
    await r.getByRole('button', { name: 'Yes, delete app-only' }).click();
    await page.locator('#discovery-sources tbody tr[data-name="app-only"]').waitFor({ state: 'detached' });
    assert.deepEqual((await sources()).map((s) => s.name), ['loopback']);
    assert.equal((await discovered()).length, before);
    assert.deepEqual(errors, []);
  } finally {
    await browser.close();
  }
});
