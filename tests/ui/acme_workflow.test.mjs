// An ACME job's detail against a real CA (Debian's pebble, tests/testbed/pebble.mjs): the
// Workflow Progress card (the steps in order, the current one with aria-current="step", done
// before it, a failed step red, the state in words), the Manual DNS Challenges panel (FQDN and
// value with copy buttons, the status tag, the instruction, Validate DNS for operators and
// above, which starts a validation job and links it) and the Presented Records panel (a job
// whose RFC 2136 server is a closed port fails at dns_presenting with its record listed).
// Screenshots: acme-workflow-manual-{light,dark}.png, acme-workflow-failed-light.png.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { startCertfleet, launch, signIn, shot, collectErrors } from './helpers.mjs';
import { startPebble, freePort } from '../testbed/pebble.mjs';
import { startDnsTxtServer } from '../testbed/dns_txt_server.mjs';

const axeSource = await readFile(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const P = '/api/v1/projects/default';
const steps = ['initialized', 'awaiting_validation', 'dns_presenting', 'dns_propagating', 'validating',
  'finalizing', 'downloading', 'storing', 'completed'];

/** @type {Awaited<ReturnType<typeof startPebble>>} */
let pebble;
/** @type {Awaited<ReturnType<typeof startCertfleet>>} */
let cf;
/** @type {Awaited<ReturnType<typeof launch>>} */
let browser;
let operatorToken = '';
let viewerToken = '';
/** @type {{certificate_id: string, job_id: string}} */
let manual;
/** @type {{certificate_id: string, job_id: string}} */
let failing;

/**
 * POSTs and checks the status.
 * @param {string} path @param {unknown} body @param {number} status
 */
async function post(path, body, status) {
  const r = await cf.api('POST', path, body);
  assert.equal(r.status, status, `POST ${path}: ${r.text}`);
  return r.body;
}

before(async () => {
  pebble = await startPebble();
  // Nothing here may ask the host's resolver (outside 127.0.0.0/8): a manual provider without
  // check_server would find its zone through acme_dns_resolver, a closed loopback port here.
  // pebble and the DNS servers listen on 127.0.0.1, which acme_allow_list reaches only when listed.
  cf = await startCertfleet({ settings: { acme_dns_resolver: `127.0.0.1:${await freePort()}`, acme_allow_list: '127.0.0.1' } });
  operatorToken = await cf.token('operator', { name: 'olga-operator' });
  viewerToken = await cf.token('viewer', { name: 'victor-viewer' });
  const account = await post(`${P}/acme-accounts`, { name: 'pebble', directory_url: pebble.directoryUrl, terms_agreed: true, ca_bundle_pem: pebble.caPem }, 201);
  // check_server: where validate_manual_dns looks for the records first. A closed port: every
  // check fails before the challenge is answered, so the challenges stay pending. Without one
  // the CA's own lookup is the check, and the automatic first validation (30 s after the order)
  // would make pebble, which sees no DNS here, turn them invalid in the middle of this file.
  const byHand = await post(`${P}/dns-providers`, { name: 'by-hand', kind: 'manual', manual: { check_server: `127.0.0.1:${await freePort()}` } }, 201);
  const closed = await freePort();
  const deadDns = await post(`${P}/dns-providers`, { name: 'dead-dns', kind: 'rfc2136', rfc2136: {
    server: `127.0.0.1:${closed}`, zone: 'example.test', tsig_key_name: 'k.', tsig_algorithm: 'hmac-sha256',
    tsig_secret: 'bwN2YRfAphUOn8x/kNYV7r4tVchwfR+++ig93ue2IqI=' } }, 201);
  manual = await post(`${P}/certificates/issue`, { name: 'www', domains: ['www.example.test'], acme_account_id: account.id, dns_provider_id: byHand.id }, 202);
  failing = await post(`${P}/certificates/issue`, { name: 'api', domains: ['api.example.test'], acme_account_id: account.id, dns_provider_id: deadDns.id }, 202);
  assert.ok(manual.certificate_id && manual.job_id, JSON.stringify(manual));
  // The manual path prepares the order and the challenges, then completes at awaiting_validation.
  const m = await cf.waitJob(manual.job_id, (j) => ['completed', 'failed', 'dead'].includes(j.status), 90000);
  assert.equal(m.status, 'completed', JSON.stringify(m));
  // The closed DNS server: the job fails at dns_presenting (failed, to be retried, or dead).
  const f = await failedJob();
  assert.ok(typeof f.error === 'string' && f.error, `the failed job names its error: ${JSON.stringify(f)}`);
  browser = await launch();
});
after(async () => {
  await browser?.close();
  await cf?.stop();
  await pebble?.stop();
});

/** @param {import('playwright-core').Page} page */
async function axe(page) {
  await page.evaluate(axeSource);
  /** @type {string[]} */
  const found = await page.evaluate(async () => {
    // @ts-ignore axe is the script evaluated above
    const r = await window.axe.run(document, { resultTypes: ['violations'] });
    return r.violations.filter((/** @type {any} */ v) => v.impact === 'serious' || v.impact === 'critical')
      .map((/** @type {any} */ v) => `${v.impact} ${v.id} (${v.help}) at ${v.nodes.map((/** @type {any} */ n) => n.target.join(' ')).join(', ')}`);
  });
  return found;
}

/**
 * The job page with its panels drawn.
 * @param {import('playwright-core').Page} page @param {string} id
 */
async function openJob(page, id) {
  await page.goto(`${cf.url}/jobs/${id}?project=default`);
  await page.locator('#workflow-progress li[aria-current="step"]').waitFor();
}

/**
 * The failing job between two attempts (failed, its next one 30 s or more away) or dead: not
 * live, so its page is drawn once from what this returns.
 */
function failedJob() {
  return cf.waitJob(failing.job_id, (j) => j.status === 'failed' || j.status === 'dead', 120000);
}

/** "#a40e26" → "rgb(164, 14, 38)" @param {string} hex */
function rgb(hex) {
  const m = /^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(hex.trim());
  assert.ok(m, `a hex colour: ${hex}`);
  return `rgb(${parseInt(m[1], 16)}, ${parseInt(m[2], 16)}, ${parseInt(m[3], 16)})`;
}

test('the API answers the workflow of an ACME job (DESIGN §9)', async () => {
  const j = await cf.job(manual.job_id);
  assert.equal(j.type, 'issue_certificate');
  assert.equal(j.workflow?.kind, 'acme', JSON.stringify(j));
  assert.deepEqual(j.workflow.steps, steps);
  assert.equal(j.workflow.step, 'awaiting_validation');
  assert.equal(j.workflow.failed_step ?? null, null);
  assert.ok(Array.isArray(j.workflow.manual_challenges) && Array.isArray(j.workflow.presented_records), JSON.stringify(j.workflow));
  const f = await failedJob();
  assert.equal(f.workflow?.failed_step, 'dns_presenting', JSON.stringify(f.workflow));
  const noop = await cf.enqueue('noop', {});
  assert.equal((await cf.job(noop.id)).workflow ?? null, null, 'a job of another type has no workflow');
});

test('a manual job waiting for validation: Workflow Progress, Manual DNS Challenges with copy buttons, Validate DNS starts a validation job', async () => {
  const page = await browser.newPage();
  const errors = collectErrors(page);
  await browser.context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: cf.url });
  await signIn(page, cf.url, operatorToken);
  await openJob(page, manual.job_id);
  const api = (await cf.job(manual.job_id)).workflow;

  // Workflow Progress: an ordered list of the nine steps, underscores shown as spaces.
  const card = page.locator('#workflow-progress');
  await card.getByRole('heading', { name: 'Workflow Progress' }).waitFor();
  const items = card.locator('ol > li');
  assert.equal(await items.count(), steps.length);
  assert.deepEqual(await card.locator('ol > li .step-name').allInnerTexts(), steps.map((s) => s.replaceAll('_', ' ')));
  const current = card.locator('li[aria-current="step"]');
  assert.equal(await current.count(), 1);
  assert.match(await current.innerText(), /awaiting validation\s*current/);
  assert.match(await card.locator('li[data-step="initialized"]').innerText(), /initialized\s*done/);
  assert.match(await card.locator('li[data-step="dns_presenting"]').innerText(), /dns presenting\s*skipped/);
  assert.match(await card.locator('li[data-step="dns_propagating"]').innerText(), /dns propagating\s*not reached/);
  assert.equal(await card.locator('li[data-state="failed"]').count(), 0);
  // No "Target Progress" bar for an ACME job: its progress is the step.
  assert.equal(await page.getByRole('heading', { name: 'Target Progress' }).count(), 0);

  // Manual DNS Challenges.
  const panel = page.locator('#manual-challenges');
  await panel.getByRole('heading', { name: 'Manual DNS Challenges' }).waitFor();
  await panel.getByText('Create these TXT records at your DNS provider, then validate.').waitFor();
  const rows = panel.locator('tbody tr');
  assert.equal(await rows.count(), 1);
  assert.deepEqual(await panel.locator('thead th').allTextContents(), ['FQDN', 'Value', 'Status']);
  assert.equal(await rows.locator('[data-field="fqdn"]').innerText(), '_acme-challenge.www.example.test');
  const value = await rows.locator('[data-field="value"]').innerText();
  assert.match(value, /^[A-Za-z0-9_-]{43}$/);
  assert.equal(value, api.manual_challenges[0].value);
  assert.equal(api.manual_challenges[0].status, 'pending', JSON.stringify(api));
  assert.equal(await rows.locator('td:nth-child(3) .tag').innerText(), 'pending');
  // One copy button per cell, named for what it copies (the visible word starts the name).
  const copyName = rows.locator('td:nth-child(1) button');
  const copyValue = rows.locator('td:nth-child(2) button');
  await panel.getByRole('button', { name: 'Copy the name _acme-challenge.www.example.test', exact: true }).waitFor();
  await panel.getByRole('button', { name: 'Copy the value of _acme-challenge.www.example.test', exact: true }).waitFor();
  await copyValue.click();
  await copyValue.filter({ hasText: 'Copied' }).waitFor();
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), value);
  await copyName.click();
  await copyName.filter({ hasText: 'Copied' }).waitFor();
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), '_acme-challenge.www.example.test');

  // Presented Records: as the API says (a manual job presents nothing itself).
  const records = page.locator('#presented-records');
  await records.getByRole('heading', { name: 'Presented Records' }).waitFor();
  if (api.presented_records.length === 0) await records.locator('p.muted', { hasText: 'No records presented by this job.' }).waitFor();
  else assert.equal(await records.locator('tbody tr').count(), api.presented_records.length);

  assert.deepEqual(await axe(page), []);

  // Validate DNS: 202 {job_id}, shown as a link to the new job.
  const validate = panel.getByRole('button', { name: 'Validate DNS' });
  const answered = page.waitForResponse((r) => r.url().endsWith(`/jobs/${manual.job_id}/validate-dns`) && r.request().method() === 'POST');
  await validate.click();
  const res = await answered;
  assert.equal(res.status(), 202, await res.text());
  const newId = (await res.json()).job_id;
  const link = page.locator('#validate-result a[data-field="validation-job"]');
  await link.waitFor();
  assert.equal(await link.innerText(), newId);
  assert.match(await page.locator('#validate-result').innerText(), /^Validation job /);
  assert.match(String(await link.getAttribute('href')), new RegExp(`/jobs/${newId}\\?project=default$`));
  const v = await cf.job(newId);
  assert.equal(v.type, 'validate_manual_dns');
  // The screenshot once the copy buttons say "Copy" again.
  await page.waitForFunction(() => ![...document.querySelectorAll('.copy-button')].some((b) => b.textContent?.startsWith('Copied')));
  await shot(page, 'acme-workflow-manual-light');
  await link.click();
  await page.waitForURL(new RegExp(`/jobs/${newId}`));
  await page.locator('#workflow-progress').waitFor();
  assert.deepEqual(errors, []);
  await page.close();
});

test('a viewer sees the challenges but no Validate DNS button', async () => {
  const page = await browser.newPage();
  await signIn(page, cf.url, viewerToken);
  await openJob(page, manual.job_id);
  await page.locator('#manual-challenges tbody tr').waitFor();
  assert.equal(await page.getByRole('button', { name: 'Validate DNS' }).count(), 0);
  assert.equal(await page.getByRole('button', { name: /^Copy the value of / }).count(), 1);
  await page.close();
});

test('a job whose DNS server is a closed port: dns presenting failed in red, its record under Presented Records', async () => {
  const page = await browser.newPage();
  const errors = collectErrors(page);
  await signIn(page, cf.url, operatorToken);
  const job = await failedJob();
  await openJob(page, failing.job_id);
  const card = page.locator('#workflow-progress');
  const failed = card.locator('li[data-state="failed"]');
  assert.equal(await failed.count(), 1);
  assert.equal(await failed.getAttribute('data-step'), 'dns_presenting');
  assert.match(await failed.innerText(), /dns presenting\s*failed/);
  const err = await page.evaluate(() => getComputedStyle(document.documentElement).getPropertyValue('--err'));
  assert.equal(await failed.evaluate((el) => getComputedStyle(el).borderTopColor), rgb(err), 'the failed step is red');
  assert.equal(await failed.locator('.step-name').evaluate((el) => getComputedStyle(el).color), rgb(err));
  assert.match(await card.locator('li[data-step="initialized"]').innerText(), /done/);
  assert.match(await card.locator('li[data-step="dns_propagating"]').innerText(), /not reached/);
  // An rfc2136 provider never waits for the operator: that step reads skipped, not done.
  assert.match(await card.locator('li[data-step="awaiting_validation"]').innerText(), /awaiting validation\s*skipped/);
  // The error in full, as elsewhere.
  assert.equal(await page.locator('.error-full pre').innerText(), job.error);
  // No manual challenges on an rfc2136 job.
  assert.equal(await page.locator('#manual-challenges').isVisible(), false);

  const records = page.locator('#presented-records');
  await records.getByRole('heading', { name: 'Presented Records' }).waitFor();
  assert.deepEqual(await records.locator('thead th').allTextContents(), ['FQDN', 'Provider', 'Presented', 'Removed']);
  const rows = records.locator('tbody tr');
  assert.ok(job.workflow.presented_records.length >= 1, JSON.stringify(job.workflow));
  assert.equal(await rows.count(), job.workflow.presented_records.length);
  const first = job.workflow.presented_records[0];
  assert.equal(first.fqdn, '_acme-challenge.api.example.test');
  const cells = await rows.first().locator('td').allInnerTexts();
  assert.equal(cells[0], '_acme-challenge.api.example.test');
  // The provider's name and kind (issue 33: the panel names which kind presented it).
  assert.equal(first.provider_kind, 'rfc2136');
  assert.equal(cells[1], `${first.provider} (${first.provider_kind})`);
  assert.equal(await rows.first().locator('td:nth-child(3) time').getAttribute('datetime'), new Date(first.at).toISOString());
  if (first.removed_at) assert.equal(await rows.first().locator('td:nth-child(4) time').getAttribute('datetime'), new Date(first.removed_at).toISOString());
  else assert.equal(cells[3], '—');

  assert.deepEqual(await axe(page), []);
  await shot(page, 'acme-workflow-failed-light');
  assert.deepEqual(errors, []);
  await page.close();
});

test('dark: the manual job page', async () => {
  const dark = await launch({ colorScheme: 'dark' });
  try {
    const page = await dark.newPage();
    const errors = collectErrors(page);
    await signIn(page, cf.url, operatorToken);
    await openJob(page, manual.job_id);
    await page.locator('#manual-challenges tbody tr').waitFor();
    assert.deepEqual(await axe(page), []);
    await shot(page, 'acme-workflow-manual-dark');
    assert.deepEqual(errors, []);
  } finally {
    await dark.close();
  }
});

// An issued ACME certificate (a second pebble that accepts every challenge, PEBBLE_VA_ALWAYS_VALID,
// and a manual provider whose check_server is a small DNS server of the test's, where the test
// creates the record as the operator would): its overview shows the renewal window (the
// lifetime's last third: pebble has no ARI) and the last renewal job; the Certificates list shows
// its issuer, renewal window and job.
test('an issued ACME certificate: renewal window and last renewal job on its page and in the list', async () => {
  const lenient = await startPebble({ env: { PEBBLE_VA_ALWAYS_VALID: '1' } });
  const dns = await startDnsTxtServer();
  try {
    const account = await post(`${P}/acme-accounts`, { name: 'pebble-lenient', directory_url: lenient.directoryUrl, terms_agreed: true, ca_bundle_pem: lenient.caPem }, 201);
    const operatorDns = await post(`${P}/dns-providers`, { name: 'operator-dns', kind: 'manual', manual: { check_server: dns.server } }, 201);
    const shop = await post(`${P}/certificates/issue`, { name: 'shop', domains: ['shop.example.test'], acme_account_id: account.id, dns_provider_id: operatorDns.id }, 202);
    const prepared = await cf.waitJob(shop.job_id, (j) => ['completed', 'failed', 'dead'].includes(j.status), 90000);
    assert.equal(prepared.status, 'completed', JSON.stringify(prepared));
    for (const c of prepared.workflow.manual_challenges) dns.set(c.fqdn, c.value);
    const asked = await post(`${P}/jobs/${shop.job_id}/validate-dns`, null, 202);
    const validated = await cf.waitJob(asked.job_id, (j) => ['completed', 'dead'].includes(j.status), 90000);
    assert.equal(validated.status, 'completed', JSON.stringify(validated));
    const view = (await cf.api('GET', `${P}/certificates/${shop.certificate_id}`)).body;
    assert.equal(view.version, 1);
    assert.equal(view.renewal.source, 'lifetime');
    assert.equal(view.last_job_id, shop.job_id);

    const page = await browser.newPage();
    const errors = collectErrors(page);
    await signIn(page, cf.url, operatorToken);
    await page.goto(`${cf.url}/certificates/${shop.certificate_id}?project=default`);
    const window = page.locator('dt:text-is("Renewal Window") + dd');
    await window.waitFor();
    assert.match(await window.innerText(), /\d{4}-\d\d-\d\d \d\d:\d\d:\d\d( \S+)? → \d{4}-\d\d-\d\d \d\d:\d\d:\d\d( \S+)? \(the last third of the lifetime\)/);
    const job = page.locator('dt:text-is("Last Renewal Job") + dd a');
    assert.equal(await job.innerText(), shop.job_id);
    assert.match(String(await job.getAttribute('href')), new RegExp(`/jobs/${shop.job_id}`));
    assert.match(await page.locator('dt:text-is("Issuer") + dd').innerText(), /Pebble Intermediate CA/);
    assert.deepEqual(await axe(page), []);
    await shot(page, 'certificate-acme-light');

    await page.goto(`${cf.url}/certificates?project=default`);
    const row = page.locator('tr', { hasText: 'shop' });
    await row.waitFor();
    // An operator's list starts with the selection column (bulk renewal, below).
    assert.deepEqual(await page.locator('thead th').allTextContents(),
      ['Select', 'Name', 'Subject', 'Issuer', 'SANs', 'Not After', 'Renewal', 'Last Renewal Job', 'Fingerprint']);
    const cells = row.locator('td');
    assert.match(await cells.nth(3).innerText(), /Pebble Intermediate CA/);
    assert.match(await cells.nth(6).innerText(), /→/);
    assert.equal(await cells.nth(7).locator('a').getAttribute('href'), `/jobs/${shop.job_id}?project=default`);
    // An ACME certificate not issued yet (the waiting manual one) has no window, says "pending"
    // and "not issued yet" (issue 31), and cannot be selected for renewal.
    const waiting = page.locator('tr', { hasText: 'www.example.test' });
    assert.equal(await waiting.locator('td').nth(6).innerText(), '');
    assert.equal(await waiting.locator('[data-tag=pending]').count(), 1);
    assert.equal(await waiting.locator('td').nth(5).innerText(), 'not issued yet');
    assert.equal(await waiting.locator('input.row-select').count(), 0);
    // The one whose DNS server is closed: its last error, from the API, under its job link.
    const api = (await cf.api('GET', `${P}/certificates/${failing.certificate_id}`)).body;
    assert.ok(typeof api.last_error === 'string' && api.last_error, JSON.stringify(api));
    const broken = page.locator('tr', { hasText: 'api.example.test' });
    assert.equal(await broken.locator('.last-error').getAttribute('title'), api.last_error);
    assert.equal(await broken.locator(`[data-tag=${api.status === 'failed' ? 'failed' : 'pending'}]`).count(), 1);
    await shot(page, 'certificates-acme-light');

    // Its actions by role (issue 31). An operator: Renew only; it starts the real renewal job
    // and links it.
    const certPage = `${cf.url}/certificates/${shop.certificate_id}?project=default`;
    await page.goto(certPage);
    const actions = page.locator('#certificate-actions');
    await actions.getByRole('button', { name: 'Renew' }).waitFor();
    assert.deepEqual(await actions.getByRole('button').allTextContents(), ['Renew']);
    await actions.getByRole('button', { name: 'Renew' }).click();
    const renewed = page.locator('.feedback.ok');
    await renewed.locator('a').waitFor();
    assert.match(await renewed.innerText(), /^Renewal started: job [0-9a-f]{24}$/);
    const renewId = (await renewed.locator('a').innerText()).slice('job '.length);
    assert.equal((await cf.api('GET', `${P}/jobs/${renewId}`)).body.type, 'renew_certificate');
    assert.equal(await renewed.locator('a').getAttribute('href'), `/jobs/${renewId}?project=default`);

    // Bulk renewal from the list (issue 31): select it, Renew selected, confirm. It answers in
    // words — a new renewal, or the one just queued under the same key — and links the jobs.
    await page.goto(`${cf.url}/certificates?project=default`);
    const selectShop = page.getByRole('checkbox', { name: 'Select shop' });
    await selectShop.waitFor();
    const renewSelected = page.locator('#renew-selected');
    assert.equal(await renewSelected.isDisabled(), true);
    await selectShop.check();
    assert.equal(await renewSelected.innerText(), 'Renew selected (1)');
    assert.equal(new URL(page.url()).pathname, '/certificates', 'ticking the box does not open the row');
    await renewSelected.click();
    const renewDialog = page.locator('dialog.confirm-dialog');
    assert.equal(await renewDialog.locator('h2').innerText(), 'Renew 1 certificate?');
    await shot(page, 'certificates-bulk-renew-dialog-light');
    await renewDialog.getByRole('button', { name: 'Renew' }).click();
    const bulk = page.locator('.page-tools .feedback.ok');
    await bulk.locator('a').waitFor();
    assert.match(await bulk.innerText(), /^(1 renewal started|0 renewals started, 1 already queued)\. Show the renewal jobs$/);
    assert.equal(await bulk.locator('a').getAttribute('href'), '/jobs?project=default&type=renew_certificate');
    // Every one expiring within a year: the dialog takes the days; a bad number is the API's
    // message, naming nothing renewed.
    await page.locator('#renew-expiring').click();
    await page.locator('#renew-days').fill('400');
    await page.locator('dialog.confirm-dialog').getByRole('button', { name: 'Renew' }).click();
    const refused = page.locator('.page-tools .feedback.error');
    await refused.waitFor();
    assert.match(await refused.innerText(), /expiring_within_days must be a whole number of days from 1 to 365/);
    await page.locator('#renew-expiring').click();
    await page.locator('#renew-days').fill('365');
    await page.locator('dialog.confirm-dialog').getByRole('button', { name: 'Renew' }).click();
    await page.locator('.page-tools .feedback.ok').waitFor();
    assert.deepEqual(await axe(page), []);
    await shot(page, 'certificates-bulk-renew-light');
    assert.deepEqual(errors.filter((e) => !/400/.test(e)), []);
    await page.close();

    // An admin: Renew, Revoke and Delete. Revoke asks first, naming the certificate; Keep it
    // changes nothing; Revoke with a reason starts the job that pebble answers.
    const adminToken = await cf.token('admin', { name: 'ada-admin' });
    const admin = await browser.newPage();
    const adminErrors = collectErrors(admin);
    await signIn(admin, cf.url, adminToken);
    await admin.goto(certPage);
    const adminActions = admin.locator('#certificate-actions');
    await adminActions.getByRole('button', { name: 'Revoke' }).waitFor();
    assert.deepEqual(await adminActions.getByRole('button').allTextContents(), ['Renew', 'Revoke', 'Delete']);
    const revokeJobs = async () => (await cf.api('GET', `${P}/jobs?type=revoke_certificate`)).body.items.length;
    await adminActions.getByRole('button', { name: 'Revoke' }).click();
    const dialog = admin.getByRole('dialog');
    await dialog.waitFor();
    assert.equal(await dialog.locator('h2').innerText(), 'Revoke shop?');
    assert.match(await dialog.locator('p').first().innerText(), /shop\.example\.test.*cannot be undone/s);
    await dialog.getByRole('button', { name: 'Keep it' }).click();
    await dialog.waitFor({ state: 'detached' });
    assert.equal(await revokeJobs(), 0);
    await adminActions.getByRole('button', { name: 'Revoke' }).click();
    await dialog.getByLabel('Reason').selectOption('superseded');
    assert.deepEqual(await axe(admin), []);
    await shot(admin, 'certificate-revoke-dialog-light');
    await dialog.getByRole('button', { name: 'Revoke' }).click();
    const revoking = admin.locator('.feedback.ok');
    await revoking.locator('a').waitFor();
    assert.match(await revoking.innerText(), /^Revocation started: job [0-9a-f]{24}$/);
    const revokeId = (await revoking.locator('a').innerText()).slice('job '.length);
    const revokeJob = await cf.waitJob(revokeId, (j) => ['completed', 'failed', 'dead'].includes(j.status), 60000);
    assert.equal(revokeJob.type, 'revoke_certificate');
    assert.equal(revokeJob.status, 'completed', JSON.stringify(revokeJob));
    await admin.reload();
    const revokedRow = admin.locator('dt:text-is("Revoked") + dd');
    await revokedRow.waitFor();
    assert.match(await revokedRow.innerText(), /^superseded, /);
    // Revoked: nothing left to renew or revoke.
    await adminActions.getByRole('button', { name: 'Delete' }).waitFor();
    assert.deepEqual(await adminActions.getByRole('button').allTextContents(), ['Delete']);
    assert.deepEqual(adminErrors, []);
    await admin.close();
  } finally {
    await dns.stop();
    await lenient.stop();
  }
});
