// The Jobs list and the job detail: tabs and counts, ?type=, Go to Job ID, row -> detail, the
// Live tag, Retry/Cancel as admin (the API's answers shown), no buttons for a viewer.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startCertfleet, launch, signIn, sleep, collectErrors } from './helpers.mjs';

/** @type {Awaited<ReturnType<typeof startCertfleet>>} */
let cf;
/** @type {Awaited<ReturnType<typeof launch>>} */
let browser;
/** @type {import('playwright-core').Page} */
let page;
let admin = '', viewer = '';
/** @type {Record<string, any>} */
const jobs = {};
const later = () => Date.now() + 3600_000;
const P = '/api/v1/projects/default';

before(async () => {
  cf = await startCertfleet();
  admin = await cf.token('admin', { name: 'alice-admin' });
  viewer = await cf.token('viewer', { name: 'victor-viewer' });
  // `permanent`: its first failure is final, so it is dead at once (no 30 s + 60 s of backoff).
  jobs.dead = await cf.enqueue('noop', { fail_times: 1, permanent: true }, { token: admin });
  jobs.done1 = await cf.enqueue('noop', {}, { token: admin });
  jobs.done2 = await cf.enqueue('noop', { ms: 50 });
  jobs.failed = await cf.enqueue('noop', { fail_times: 3 }, { token: admin });  // keeps its error (failed, then dead)
  jobs.failed2 = await cf.enqueue('noop', { fail_times: 1 }, { token: admin });
  jobs.pending = await cf.enqueue('noop', {}, { token: admin, run_at: later() });
  jobs.pending2 = await cf.enqueue('noop', {}, { token: admin, run_at: later() });
  jobs.active = await cf.enqueue('noop', { ms: 600_000 }, { token: admin });
  jobs.cancelled = await cf.enqueue('noop', {}, { run_at: later() });
  await cf.api('POST', `${P}/jobs/${jobs.cancelled.id}/cancel`);
  await cf.waitJob(jobs.done1.id, (j) => j.status === 'completed');
  await cf.waitJob(jobs.done2.id, (j) => j.status === 'completed');
  await cf.waitJob(jobs.failed.id, (j) => j.status === 'failed');
  await cf.waitJob(jobs.failed2.id, (j) => j.status === 'failed');
  await cf.waitJob(jobs.active.id, (j) => j.status === 'active');
  browser = await launch();
  page = await browser.newPage();
  await signIn(page, cf.url, admin);
});
after(async () => {
  await browser?.close();
  await cf?.stop();
});

/** Whether the audit log has an ok `job.retry` of this job (a retried noop may fail again at once). */
async function retried(/** @type {string} */ id) {
  const a = (await cf.api('GET', `${P}/audit?page_size=200`)).body.items;
  return a.some((/** @type {any} */ e) => e.action === 'job.retry' && e.object === `job/${id}` && e.outcome === 'ok');
}

/** @param {string} [query] */
async function apiList(query = '') { return (await cf.api('GET', `${P}/jobs${query}`)).body; }

/** The counts the page shows, by tab key. */
async function shownCounts() {
  /** @type {Record<string, number>} */
  const out = {};
  for (const el of await page.locator('[data-count]').all()) {
    out[/** @type {string} */ (await el.getAttribute('data-count'))] = Number(await el.innerText());
  }
  return out;
}

test('the Job Queue shows its title, badge, Go to Job ID…, Refresh and every column', async () => {
  const errors = collectErrors(page);
  await page.goto(`${cf.url}/jobs`);
  await page.getByRole('heading', { name: 'Job Queue' }).waitFor();
  assert.equal(await page.locator('#auto-refresh').innerText(), 'Auto-refreshing');
  assert.equal(await page.getByPlaceholder('Go to Job ID…').count(), 1);
  assert.equal(await page.getByRole('button', { name: 'Refresh' }).count(), 1);
  const heads = await page.locator('thead th').allInnerTexts();
  assert.deepEqual(heads.map((x) => x.trim().toLowerCase()),
    ['type', 'status', 'certificate', 'triggered by', 'attempts', 'progress', 'created', 'duration', 'error', 'actions']);
  await page.locator('tr.job-row').first().waitFor();
  // Triggered By: the token's name; Type: underscores as spaces; a failed job's error as a red tag.
  const failedRow = page.locator(`tr[data-job-id="${jobs.failed.id}"]`);
  assert.match(await failedRow.innerText(), /alice-admin/);
  assert.match(await failedRow.locator('.error-tag').innerText(), /failing on purpose/);
  assert.equal(await page.locator(`tr[data-job-id="${jobs.active.id}"] td`).nth(7).innerText(), '', 'no duration while running');
  assert.deepEqual(errors, []);
});

test('the auto-refresh pauses while the tab is hidden and refetches when it shows again', async () => {
  await page.goto(`${cf.url}/jobs`);
  await page.locator('tr.job-row').first().waitFor();
  /** @type {string[]} */
  const lists = [];
  const onReq = (/** @type {import('playwright-core').Request} */ r) => { if (/\/api\/v1\/projects\/default\/jobs(\?|$)/.test(r.url())) lists.push(r.url()); };
  page.on('request', onReq);
  const setHidden = (/** @type {boolean} */ hidden) => page.evaluate((h) => {
    Object.defineProperty(document, 'hidden', { configurable: true, get: () => h });
    document.dispatchEvent(new Event('visibilitychange'));
  }, hidden);
  await setHidden(true);
  assert.equal(await page.locator('#auto-refresh').innerText(), 'Auto-refresh paused');
  lists.length = 0;
  await sleep(10500);
  assert.equal(lists.length, 0, 'no refetch while hidden');
  await setHidden(false);
  assert.equal(await page.locator('#auto-refresh').innerText(), 'Auto-refreshing');
  await sleep(300);
  assert.ok(lists.length >= 1, 'refetched when shown again');
  page.off('request', onReq);
});

test('every tab shows the API count; a tab lists only its status and resets to page 1', async () => {
  await page.goto(`${cf.url}/jobs?page=1`);
  // The dead job moves between failed/pending/active in the background: compare one snapshot.
  let api, shown;
  for (let i = 0; i < 20; ++i) {
    await page.getByRole('button', { name: 'Refresh' }).click();
    await sleep(300);
    api = (await apiList()).counts;
    shown = await shownCounts();
    if (JSON.stringify(Object.fromEntries(Object.keys(shown).map((k) => [k, api[k]]))) === JSON.stringify(shown)) break;
  }
  for (const k of ['all', 'pending', 'active', 'completed', 'failed', 'dead', 'cancelled']) assert.equal(shown?.[k], api?.[k], `tab ${k}`);
  assert.ok(api.completed >= 2 && api.cancelled >= 1 && api.active >= 1);
  for (const [key, label] of [['completed', 'Completed'], ['cancelled', 'Cancelled'], ['pending', 'Pending'], ['active', 'Active'], ['all', 'All']]) {
    await page.locator(`a[data-tab="${key}"]`).click();
    await page.waitForURL((u) => (key === 'all' ? !u.searchParams.has('status') : u.searchParams.get('status') === key) && !u.searchParams.has('page'));
    assert.equal(await page.locator(`a[data-tab="${key}"]`).getAttribute('aria-current'), 'page');
    assert.match(await page.locator(`a[data-tab="${key}"]`).innerText(), new RegExp(`^${label}`));
    await page.locator('#jobs-state').waitFor({ state: 'attached' });
    await page.waitForFunction(() => document.querySelectorAll('tr.job-row').length > 0 || document.querySelector('#jobs-state')?.textContent);
    const statuses = await page.locator('tr.job-row').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-status')));
    if (key !== 'all') assert.ok(statuses.every((s) => s === key), `${key}: ${statuses}`);
  }
});

test('?type= comes from the URL only: its rows and counts', async () => {
  await page.goto(`${cf.url}/jobs?type=distribution_execute`);
  await page.locator('.filter-note').waitFor();
  await page.waitForFunction(() => document.querySelector('#jobs-state')?.textContent === 'No jobs here.');
  const api = (await apiList('?type=distribution_execute')).counts;
  assert.equal(api.all, 0);
  assert.deepEqual(await shownCounts(), { all: 0, pending: 0, active: 0, completed: 0, failed: 0, dead: 0, cancelled: 0 });
  await page.goto(`${cf.url}/jobs?type=noop&status=completed`);
  await page.locator('tr.job-row').first().waitFor();
  const types = await page.locator('tr.job-row td:first-child a').allInnerTexts();
  assert.ok(types.length >= 2 && types.every((t) => t === 'noop'));
  // Tabs keep the type.
  assert.match(await page.locator('a[data-tab="failed"]').getAttribute('href') ?? '', /type=noop/);
});

test('Go to Job ID… opens a job that exists and says so when it does not; "/" focuses it', async () => {
  await page.goto(`${cf.url}/jobs`);
  await page.getByRole('heading', { name: 'Job Queue' }).waitFor();
  await page.locator('body').press('/');
  assert.equal(await page.evaluate(() => document.activeElement?.id), 'goto-job');
  await page.keyboard.type('ffffffffffffffffffffffff');
  await page.keyboard.press('Enter');
  await page.locator('#goto-msg', { hasText: 'Job ffffffffffffffffffffffff not found' }).waitFor();
  await page.getByPlaceholder('Go to Job ID…').fill(jobs.done1.id);
  await page.keyboard.press('Enter');
  await page.waitForURL(new RegExp(`/jobs/${jobs.done1.id}`));
  await page.locator('.summary dd', { hasText: 'noop' }).first().waitFor();
});

test('Go to Job ID… takes a pasted id with spaces around it, in upper case, or a job URL (issue 31)', async () => {
  for (const pasted of [`  ${jobs.done1.id.toUpperCase()}  `, `${cf.url}/jobs/${jobs.done1.id}?project=default`,
    `\t${cf.url}/api/v1/projects/default/jobs/${jobs.done1.id}\n`]) {
    await page.goto(`${cf.url}/jobs`);
    await page.getByRole('heading', { name: 'Job Queue' }).waitFor();
    await page.getByPlaceholder('Go to Job ID…').fill(pasted);
    await page.keyboard.press('Enter');
    await page.waitForURL(new RegExp(`/jobs/${jobs.done1.id}`));
  }
  // Anything else still says what a job ID is.
  await page.goto(`${cf.url}/jobs`);
  await page.getByPlaceholder('Go to Job ID…').fill(`${cf.url}/jobs/not-an-id`);
  await page.keyboard.press('Enter');
  await page.locator('#goto-msg', { hasText: 'A job ID is 24 hexadecimal characters' }).waitFor();
});

test('a row click opens the detail with its summary card; Back returns', async () => {
  // A fresh failed job: the queue retries a failed noop itself 30 s later, so one made at the
  // start of the file may have left the Failed tab (and its waiting panel) by now.
  const failed = await cf.enqueue('noop', { fail_times: 1 }, { token: admin });
  await cf.waitJob(failed.id, (j) => j.status === 'failed');
  await page.goto(`${cf.url}/jobs?status=failed`);
  const row = page.locator(`tr[data-job-id="${failed.id}"]`);
  await row.locator('td').nth(4).click();
  await page.waitForURL(new RegExp(`/jobs/${failed.id}`));
  const dl = page.locator('.summary').first();
  await dl.locator('dt', { hasText: 'Type' }).waitFor();
  const terms = await dl.locator('dt').allInnerTexts();
  for (const t of ['Type', 'Status', 'Attempts', 'Duration', 'Triggered By', 'Certificate', 'Created', 'Started', 'Completed', 'Parent Job', 'Idempotency Key', 'Error'])
    assert.ok(terms.includes(t), `summary has ${t}: ${terms}`);
  assert.match(await page.locator('.error-full').innerText(), /failing on purpose/);
  assert.equal(await page.getByRole('button', { name: 'Copy the error' }).count(), 1);
  // A failed job waits: the "Why is it waiting?" panel.
  await page.getByRole('heading', { name: 'Why is it waiting?' }).waitFor();
  await page.getByRole('link', { name: '← Back' }).click();
  // Back to the tab it came from (issue 31: it went to All, page 1).
  await page.waitForURL(/\/jobs\?.*status=failed/);
  await page.locator('a[data-tab="failed"][aria-current="page"]').waitFor();
});

test('by keyboard: Tab reaches a row link, Enter opens the detail', async () => {
  await page.goto(`${cf.url}/jobs?status=completed`);
  await page.locator('tr.job-row').first().waitFor();
  await page.getByRole('button', { name: 'Refresh' }).focus();
  let tabs = 0;
  while (!(await page.evaluate(() => document.activeElement?.classList.contains('job-link'))) && tabs++ < 30) await page.keyboard.press('Tab');
  assert.ok(tabs < 30, 'a job link is reachable by Tab');
  await page.keyboard.press('Enter');
  await page.waitForURL(/\/jobs\/[0-9a-f]{24}/);
  await page.locator('.summary dt').first().waitFor();
});

test('the Live tag shows while a job runs and goes when it ends', async () => {
  const j = await cf.enqueue('noop', { ms: 2500 }, { token: admin });
  await page.goto(`${cf.url}/jobs/${j.id}`);
  await page.locator('#live-tag').waitFor({ state: 'visible' });
  await page.locator('#live-tag').waitFor({ state: 'hidden', timeout: 15000 });
  await page.locator('.summary .status-completed').first().waitFor();
});

test('as admin: cancel of a pending and of an active job show the API messages', async () => {
  await page.goto(`${cf.url}/jobs?status=pending`);
  await page.locator(`tr[data-job-id="${jobs.pending.id}"] button[data-action="cancel"]`).click();
  // Issue 31: a cancel asks first, in a dialog that names the job.
  const dialog = page.getByRole('dialog', { name: `Cancel job ${jobs.pending.id}?` });
  assert.match(await dialog.innerText(), new RegExp(`noop job ${jobs.pending.id} \\(pending\\) will be cancelled`));
  await dialog.getByRole('button', { name: 'Cancel job' }).click();
  await page.locator('.feedback.ok', { hasText: 'Job cancelled' }).waitFor();
  assert.equal((await cf.job(jobs.pending.id)).status, 'cancelled');
  await page.goto(`${cf.url}/jobs/${jobs.active.id}`);
  await page.getByRole('button', { name: `Cancel job ${jobs.active.id}` }).click();
  await page.getByRole('dialog').getByRole('button', { name: 'Cancel job' }).click();
  await page.locator('.feedback.ok', { hasText: 'Job cancel requested' }).waitFor();
  const j = await cf.waitJob(jobs.active.id, (x) => x.cancel_requested || x.status === 'cancelled');
  assert.ok(j.cancel_requested || j.status === 'cancelled');
  await cf.waitJob(jobs.active.id, (x) => x.status === 'cancelled', 15000);
});

test('as admin: retry of a failed job', async () => {
  // A fresh one: a failed noop is retried by the queue itself 30 s later (and then completes), so
  // one made at the start of the file may have left the Failed tab by now.
  const failed = await cf.enqueue('noop', { fail_times: 1 }, { token: admin });
  await cf.waitJob(failed.id, (j) => j.status === 'failed');
  await page.goto(`${cf.url}/jobs?status=failed`);
  await page.locator(`tr[data-job-id="${failed.id}"] button[data-action="retry"]`).click();
  await page.locator('.feedback.ok', { hasText: `Job ${failed.id} queued for retry` }).waitFor();
  assert.ok(await retried(failed.id));
});

test('a viewer sees no Retry or Cancel buttons', async () => {
  const p2 = await browser.newPage();
  await p2.context().clearCookies();
  await signIn(p2, cf.url, viewer);
  await p2.goto(`${cf.url}/jobs`);
  await p2.locator('tr.job-row').first().waitFor();
  assert.match(await p2.locator('.who').innerText(), /victor-viewer \(viewer\)/);
  assert.equal(await p2.locator('button[data-action]').count(), 0);
  await p2.goto(`${cf.url}/jobs/${jobs.failed2.id}`);
  await p2.locator('.summary dt').first().waitFor();
  assert.equal(await p2.getByRole('button', { name: /^(Retry|Cancel) job/ }).count(), 0);
  await p2.close();
  // Back to the admin's session for the tests after this one.
  await signIn(page, cf.url, admin);
});

test('as admin: retry of a dead job', async () => {
  const before = await cf.waitJob(jobs.dead.id, (j) => j.status === 'dead');
  await page.goto(`${cf.url}/jobs?status=dead`);
  await page.locator(`tr[data-job-id="${jobs.dead.id}"] button[data-action="retry"]`).click();
  await page.locator('.feedback.ok', { hasText: `Job ${jobs.dead.id} queued for retry` }).waitFor();
  assert.ok(await retried(jobs.dead.id));
  // It runs again (a new lease: a higher fence); being a permanent failure, it may be dead again
  // by the time we look.
  await cf.waitJob(jobs.dead.id, (j) => j.fence > before.fence);
});
