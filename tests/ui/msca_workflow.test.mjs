// An AD CS job's detail against the testbed's CEP/CES server (tests/testbed/msca_server.py, a
// test CA written from MS-XCEP and MS-WSTEP): the MSCA Workflow card (the step list as the ACME
// card draws it — done, current with aria-current="step", skipped, failed in red, the state in
// words — then Certificate Template, CA Request ID, Poll Count, Renewal Mode, Subject, Terminal
// Reason and Start Time) for a request issued at once (WebServer), one held for a certificate
// manager (WebServerApproval: the issue job ends at pending approval, the poll jobs wait, the
// side channel approves, a poll job retrieves and stores it) and one the CA refuses (SubCA: the
// job is dead at submitting with the CA's error).
// Screenshots: msca-workflow-{issued,pending,polled,dead}-{light,dark}.png,
// msca-workflow-pending-after-light.png and msca-workflow-{pending,dead}-phone-{light,dark}.png.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startCertfleet, launch, signIn, shot, collectErrors, axe, sleep } from './helpers.mjs';
import { startMscaServer } from '../testbed/msca_server.mjs';

const P = '/api/v1/projects/default';
const steps = ['initialized', 'fetching_policy', 'generating_key', 'submitting', 'pending_approval', 'retrieving', 'storing', 'completed'];
const ended = (/** @type {any} */ j) => ['completed', 'failed', 'dead', 'cancelled'].includes(j.status);

/** @type {Awaited<ReturnType<typeof startMscaServer>>} */
let adcs;
/** @type {Awaited<ReturnType<typeof startCertfleet>>} */
let cf;
/** @type {Awaited<ReturnType<typeof launch>>} */
let browser;
let viewerToken = '';
/** @type {Record<'issued' | 'pending' | 'dead', {certificate_id: string, job_id: string}>} */
const jobs = /** @type {any} */ ({});
let polledJobId = '';

/**
 * An API call as the owner, its status checked.
 * @param {string} method @param {string} path @param {unknown} [body] @param {number} [status]
 */
async function call(method, path, body = undefined, status = 200) {
  const r = await cf.api(method, path, body);
  assert.equal(r.status, status, `${method} ${path}: ${r.text}`);
  return r.body;
}

before(async () => {
  adcs = await startMscaServer();
  const caPem = adcs.caPem;
  // The test CA listens on 127.0.0.1, which msca_allow_list reaches only when it lists it; polls
  // 1 s after a pending answer and at most 2 s apart, so the approval is picked up at once.
  cf = await startCertfleet({ settings: { msca_allow_list: '127.0.0.1', msca_poll_first_delay_s: 1, msca_poll_max_delay_s: 2 } });
  viewerToken = await cf.token('viewer', { name: 'victor-viewer' });
  const ca = await call('POST', `${P}/msca-cas`, {
    name: 'corp-ca', cep_url: adcs.cepUrl,
    auth: { kind: 'username_password', username: 'alice', password: 'alice-password' }, ca_bundle_pem: caPem }, 201);
  for (const [key, name, template] of /** @type {const} */ ([['issued', 'web01', 'WebServer'], ['pending', 'web02', 'WebServerApproval'], ['dead', 'sub01', 'SubCA']])) {
    jobs[key] = await call('POST', `${P}/certificates/enroll`, { name, msca_ca_id: ca.id, template, subject: `CN=${name}.corp.test`, sans: [`${name}.corp.test`] }, 202);
  }
  const issued = await cf.waitJob(jobs.issued.job_id, ended, 60000);
  assert.equal(issued.status, 'completed', `${JSON.stringify(issued)}\n${adcs.output().slice(-3000)}`);
  const pending = await cf.waitJob(jobs.pending.job_id, ended, 60000);
  assert.equal(pending.status, 'completed', JSON.stringify(pending));
  assert.equal(pending.workflow?.step, 'pending_approval', JSON.stringify(pending.workflow));
  const dead = await cf.waitJob(jobs.dead.job_id, ended, 60000);
  assert.equal(dead.status, 'dead', JSON.stringify(dead));
  browser = await launch();
});
after(async () => {
  await browser?.close();
  await cf?.stop();
  await adcs?.stop();
});

/**
 * The job page with the MSCA Workflow card drawn.
 * @param {import('playwright-core').Page} page @param {string} id
 */
async function openJob(page, id) {
  await page.goto(`${cf.url}/jobs/${id}?project=default`);
  await page.locator('#msca-workflow li[aria-current="step"]').waitFor();
  return page.locator('#msca-workflow');
}

/**
 * The card's fields by label, as the page shows them.
 * @param {import('playwright-core').Locator} card
 */
async function fields(card) {
  const terms = await card.locator('dl dt').allInnerTexts();
  const values = await card.locator('dl dd').allInnerTexts();
  return Object.fromEntries(terms.map((t, i) => [t, values[i]]));
}

/** "#a40e26" → "rgb(164, 14, 38)" @param {string} hex */
function rgb(hex) {
  const m = /^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(hex.trim());
  assert.ok(m, `a hex colour: ${hex}`);
  return `rgb(${parseInt(m[1], 16)}, ${parseInt(m[2], 16)}, ${parseInt(m[3], 16)})`;
}

/** axe's serious and critical findings. @param {import('playwright-core').Page} page */
async function seriousAxe(page) {
  return (await axe(page)).filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.impact} ${v.id} (${v.help}) at ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
}

const labels = ['Certificate Template', 'CA Request ID', 'Poll Count', 'Renewal Mode', 'Subject', 'Terminal Reason', 'Start Time'];

test('a request issued at once: every step done but the two waits, skipped; issued; the fields as the API says', async () => {
  const page = await browser.newPage();
  const errors = collectErrors(page);
  await signIn(page, cf.url, viewerToken);
  const job = await cf.job(jobs.issued.job_id);
  const w = job.workflow;
  assert.equal(w.kind, 'msca');
  assert.deepEqual(w.steps, steps);
  const card = await openJob(page, jobs.issued.job_id);
  await card.getByRole('heading', { name: 'MSCA Workflow' }).waitFor();
  assert.deepEqual(await card.locator('ol > li .step-name').allInnerTexts(), steps.map((s) => s.replaceAll('_', ' ')));
  assert.equal(await card.locator('[data-field="step"]').innerText(), 'completed');
  for (const s of ['initialized', 'fetching_policy', 'generating_key', 'submitting', 'storing', 'completed']) {
    assert.equal(await card.locator(`li[data-step="${s}"]`).getAttribute('data-state'), 'done', s);
  }
  assert.match(await card.locator('li[data-step="pending_approval"]').innerText(), /pending approval\s*skipped/);
  assert.match(await card.locator('li[data-step="retrieving"]').innerText(), /retrieving\s*skipped/);
  assert.equal(await card.locator('li[data-state="failed"]').count(), 0);

  const f = await fields(card);
  assert.deepEqual(Object.keys(f), labels);
  assert.equal(f['Certificate Template'], 'WebServer');
  assert.ok(w.request_id, JSON.stringify(w));
  assert.equal(f['CA Request ID'], w.request_id);
  assert.equal(f['Poll Count'], '0');
  assert.equal(f['Renewal Mode'], 'new key');
  assert.equal(f.Subject, 'CN=web01.corp.test');
  assert.equal(f['Terminal Reason'], 'issued');
  assert.equal(await card.locator('[data-field="started_at"] time').getAttribute('datetime'), new Date(w.started_at).toISOString());
  // The step is the progress: no Target Progress bar, no ACME panels.
  assert.equal(await page.getByRole('heading', { name: 'Target Progress' }).count(), 0);
  assert.equal(await page.locator('#acme-panels').isVisible(), false);
  assert.deepEqual(await seriousAxe(page), []);
  await shot(page, 'msca-workflow-issued-light');
  assert.deepEqual(errors, []);
  await page.close();
});

test('a request held for a certificate manager: the issue job waits at pending approval; approved, a poll job retrieves and stores it', { timeout: 120000 }, async () => {
  const page = await browser.newPage();
  const errors = collectErrors(page);
  await signIn(page, cf.url, viewerToken);
  const w = (await cf.job(jobs.pending.job_id)).workflow;
  const card = await openJob(page, jobs.pending.job_id);
  const current = card.locator('li[aria-current="step"]');
  assert.equal(await current.getAttribute('data-step'), 'pending_approval');
  assert.match(await current.innerText(), /pending approval\s*current/);
  assert.equal(await card.locator('[data-field="step"]').innerText(), 'pending approval');
  // The issue job is over (completed); the request waits at the CA.
  assert.match(await card.locator('.current-step').innerText(), /^Current Step: pending approval \(this job ended here\)$/);
  assert.equal(await card.locator('li[data-step="submitting"]').getAttribute('data-state'), 'done');
  assert.match(await card.locator('li[data-step="retrieving"]').innerText(), /retrieving\s*not reached/);
  const f = await fields(card);
  assert.equal(f['Certificate Template'], 'WebServerApproval');
  assert.ok(w.request_id, JSON.stringify(w));
  assert.equal(f['CA Request ID'], w.request_id);
  const reason = card.locator('[data-field="terminal_reason"]');
  assert.equal(await reason.locator('.tag').innerText(), 'pending approval at the CA');
  assert.match(f['Terminal Reason'], new RegExp(`Still pending: a certificate manager must approve request ${w.request_id} at the CA`));
  assert.equal(await reason.locator('a').getAttribute('href'), '/jobs?project=default&type=msca_poll_pending');
  assert.deepEqual(await seriousAxe(page), []);
  await shot(page, 'msca-workflow-pending-light');

  // A certificate manager approves it at the CA (the peer's side channel); the next poll job
  // retrieves the certificate and stores it.
  await adcs.admin(`/requests/${w.request_id}/approve`, 'POST');
  /** @type {any} */
  let polled = null;
  for (const end = Date.now() + 60000; !polled;) {
    const list = await call('GET', `${P}/jobs?type=msca_poll_pending&page_size=100`);
    for (const j of list.items) {
      if (j.status !== 'completed') continue;
      const full = await cf.job(j.id);
      if (full.workflow?.terminal_reason === 'issued') polled = full;
    }
    if (!polled) {
      assert.ok(Date.now() < end, `no poll job issued the certificate: ${JSON.stringify(list.items)}`);
      await sleep(250);
    }
  }
  polledJobId = polled.id;
  const pc = await openJob(page, polled.id);
  assert.equal(await pc.locator('[data-field="step"]').innerText(), 'completed');
  // A poll starts at the wait: the steps before it were the issue job's.
  for (const s of ['fetching_policy', 'generating_key', 'submitting']) assert.equal(await pc.locator(`li[data-step="${s}"]`).getAttribute('data-state'), 'skipped', s);
  for (const s of ['pending_approval', 'retrieving', 'storing']) assert.equal(await pc.locator(`li[data-step="${s}"]`).getAttribute('data-state'), 'done', s);
  const pf = await fields(pc);
  assert.equal(pf['CA Request ID'], w.request_id);
  assert.equal(pf['Poll Count'], String(polled.workflow.poll_count));
  assert.ok(polled.workflow.poll_count >= 1, JSON.stringify(polled.workflow));
  assert.equal(pf['Terminal Reason'], 'issued');
  assert.equal(pf.Subject, 'CN=web02.corp.test');
  await shot(page, 'msca-workflow-polled-light');
  // The issue job's card now says what became of the request it left pending.
  const after = await openJob(page, jobs.pending.job_id);
  const since = after.locator('[data-field="since"]');
  await since.filter({ hasText: 'Since then' }).waitFor();
  assert.equal(await since.innerText(), `Since then the CA issued request ${w.request_id}: certificate web02 is at version 1.`);
  assert.equal(await since.locator('a').getAttribute('href'), `/certificates/${jobs.pending.certificate_id}?project=default`);
  await shot(page, 'msca-workflow-pending-after-light');
  assert.deepEqual(errors, []);
  await page.close();
});

test('a template the account may not enroll: dead at submitting in red, the CA\'s error as the terminal reason', async () => {
  const page = await browser.newPage();
  const errors = collectErrors(page);
  await signIn(page, cf.url, viewerToken);
  const job = await cf.job(jobs.dead.job_id);
  const w = job.workflow;
  assert.equal(w.failed_step, 'submitting', JSON.stringify(w));
  const card = await openJob(page, jobs.dead.job_id);
  const failed = card.locator('li[data-state="failed"]');
  assert.equal(await failed.count(), 1);
  assert.equal(await failed.getAttribute('data-step'), 'submitting');
  assert.match(await failed.innerText(), /submitting\s*failed/);
  const err = await page.evaluate(() => getComputedStyle(document.documentElement).getPropertyValue('--err'));
  assert.equal(await failed.evaluate((el) => getComputedStyle(el).borderTopColor), rgb(err), 'the failed step is red');
  assert.match(await card.locator('.current-step').innerText(), /^Current Step: submitting \(failed\)$/);
  for (const s of ['pending_approval', 'retrieving', 'storing', 'completed']) assert.equal(await card.locator(`li[data-step="${s}"]`).getAttribute('data-state'), 'todo', s);
  const f = await fields(card);
  assert.equal(f['Certificate Template'], 'SubCA');
  assert.equal(f['CA Request ID'], w.request_id ?? '—');
  assert.equal(f['Terminal Reason'], w.terminal_reason);
  assert.match(f['Terminal Reason'], /msca_template_not_allowed.*0x80094012/);
  assert.equal(await card.locator('[data-field="terminal_reason"] pre').evaluate((el) => getComputedStyle(el).color), rgb(err));
  assert.deepEqual(await seriousAxe(page), []);
  await shot(page, 'msca-workflow-dead-light');
  assert.deepEqual(errors, []);
  await page.close();
});

test('dark, and at phone width: no axe violation, no sideways page scroll', { timeout: 180000 }, async () => {
  for (const [scheme, phone] of /** @type {const} */ ([['dark', false], ['light', true], ['dark', true]])) {
    const b = await launch({ colorScheme: scheme, ...(phone ? { viewport: { width: 360, height: 740 } } : {}) });
    try {
      const page = await b.newPage();
      const errors = collectErrors(page);
      await signIn(page, cf.url, viewerToken);
      /** @type {[string, string][]} */
      const shown = phone ? [['pending', jobs.pending.job_id], ['dead', jobs.dead.job_id]]
        : [['issued', jobs.issued.job_id], ['pending', jobs.pending.job_id], ['polled', polledJobId], ['dead', jobs.dead.job_id]];
      for (const [name, id] of shown) {
        if (!id) continue;
        await openJob(page, id);
        assert.deepEqual(await seriousAxe(page), [], `${name} ${scheme}${phone ? ' phone' : ''}`);
        if (phone) {
          const wide = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
          assert.ok(wide <= 0, `${name}: the page scrolls sideways by ${wide} px at 360 px`);
        }
        await shot(page, `msca-workflow-${name}${phone ? '-phone' : ''}-${scheme}`);
      }
      assert.deepEqual(errors, []);
    } finally {
      await b.close();
    }
  }
});
