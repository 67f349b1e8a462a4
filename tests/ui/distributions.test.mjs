// Distributions and their jobs: a partial distribution job's tag, fan-out children (the child
// tag, the retry-wave alert, "Automatic retry" and the Parent Job link), the 409 of a retry on a
// child and the re-drive of its failed targets (and of one target) in its run, the distribution view's counters (batches and retry-wave jobs apart) and long tail
// against the API, the server-side results filters, the certificate pages.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startCertfleet, launch, signIn, catalog, runDistribution, mkdtemp, rm, tmpdir, join, collectErrors } from './helpers.mjs';

/** @type {Awaited<ReturnType<typeof startCertfleet>>} */
let cf;
/** @type {Awaited<ReturnType<typeof launch>>} */
let browser;
/** @type {import('playwright-core').Page} */
let page;
let base = '';
/** @type {Awaited<ReturnType<typeof catalog>>} */
let cat;
/** @type {any} */
let normal;
/** @type {any} */
let fanout;
const P = '/api/v1/projects/default';

before(async () => {
  base = await mkdtemp(join(tmpdir(), 'certfleet-ui-files-'));
  cf = await startCertfleet({ settings: { file_target_base_dirs: base } });
  cat = await catalog(cf, base);
  normal = await runDistribution(cf, 'www to two hosts', cat.certificate.id, [cat.okTarget.id, cat.badTarget.id]);
  const s = await cf.api('PUT', '/api/v1/settings', { distribution_fanout_threshold: 2, distribution_fanout_batch_size: 1 });
  assert.equal(s.status, 200, s.text);
  fanout = await runDistribution(cf, 'www fan-out', cat.certificate.id, [cat.okTarget.id, cat.badTarget.id], 120000);
  browser = await launch();
  page = await browser.newPage();
  await signIn(page, cf.url, await cf.token('operator', { name: 'olga-operator' }));
});
after(async () => {
  await browser?.close();
  await cf?.stop();
  await rm(base, { recursive: true, force: true });
});

/** @param {string} id */
async function job(id) { return cf.job(id); }

test('a completed distribution job with result_status partial shows "partial"', async () => {
  const id = normal.execute.job_ids[0];
  const j = await job(id);
  assert.equal(j.status, 'completed');
  assert.equal(j.result_status, 'partial', JSON.stringify(j));
  await page.goto(`${cf.url}/jobs`);
  const tag = page.locator(`tr[data-job-id="${id}"] td:nth-child(2) .tag`);
  await tag.waitFor();
  assert.equal(await tag.innerText(), 'partial');
  assert.match(await page.locator(`tr[data-job-id="${id}"] td:first-child`).innerText(), /^distribution execute/);
  assert.equal(await page.locator(`tr[data-job-id="${id}"] .tag.child`).count(), 0, 'a normal run job is no child');
});

test('fan-out children: the child tag, the retry-wave alert on the batch, "Automatic retry" and its Parent Job link', async () => {
  const errors = collectErrors(page);
  const list = (await cf.api('GET', `${P}/jobs?type=distribution_execute`)).body.items;
  const children = list.filter((/** @type {any} */ j) => j.parent_job_id || j.payload?.mode === 'batch' || j.payload?.mode === 'retry');
  const retry = children.find((/** @type {any} */ j) => j.payload?.mode === 'retry');
  assert.ok(retry, `a retry child exists: ${JSON.stringify(list.map((/** @type {any} */ j) => j.payload))}`);
  await page.goto(`${cf.url}/jobs?type=distribution_execute`);
  await page.locator(`tr[data-job-id="${retry.id}"] .tag.child`).waitFor();
  for (const c of children) assert.equal(await page.locator(`tr[data-job-id="${c.id}"] .tag.child`).innerText(), 'child');

  // The batch whose target went to a retry wave.
  const batchId = retry.parent_job_id;
  let batch = await job(batchId);
  while (batch.payload?.mode === 'retry') batch = await job(batch.parent_job_id);
  assert.equal(batch.payload.mode, 'batch');
  await page.goto(`${cf.url}/jobs/${batch.id}`);
  await page.locator('#retry-wave-alert', { hasText: 'Failed targets are retried as a separate retry job — the remaining attempts on this job are not used.' }).waitFor();
  // Issue 31: the Target Progress bar takes the card's width (it was 0 px, only "1/1" showed).
  await page.getByRole('heading', { name: 'Target Progress' }).waitFor();
  const bar = await page.locator('.target-progress progress').boundingBox();
  assert.ok(bar && bar.width > 100, `the Target Progress bar is ${bar?.width} px wide`);

  await page.goto(`${cf.url}/jobs/${retry.id}`);
  await page.locator('.alert.info', { hasText: 'Automatic retry' }).waitFor();
  await page.locator('.summary .tag.child', { hasText: 'Automatic retry' }).waitFor();
  await page.locator('.summary a[data-field="parent"]').click();
  await page.waitForURL(new RegExp(`/jobs/${retry.parent_job_id}`));
  assert.deepEqual(errors, []);
});

/** @param {string} id the distribution, polled until its run has ended */
async function distributionEnded(id) {
  const until = Date.now() + 60000;
  for (;;) {
    const d = (await cf.api('GET', `${P}/distributions/${id}`)).body;
    if (d.status !== 'running') return d;
    assert.ok(Date.now() < until, `distribution ${id} still running: ${JSON.stringify(d).slice(0, 400)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

test('a retry of a fan-out child answers 409 naming retry-targets; the UI re-drives the child\'s failed targets, and one target, in the run', async () => {
  const list = (await cf.api('GET', `${P}/jobs?type=distribution_execute`)).body.items;
  const child = list.find((/** @type {any} */ j) => (j.payload?.mode === 'batch' || j.payload?.mode === 'retry'));
  const r = await cf.api('POST', `${P}/jobs/${child.id}/retry`);
  assert.equal(r.status, 409, r.text);
  assert.equal(r.body.error.field, 'retry-targets');
  assert.match(r.body.error.message, /retry-targets/);
  // The UI offers no Retry that can only fail (issue 31): a dead child of the run that ended
  // offers the re-drive of its failed targets in that run.
  const admin = await browser.newPage();
  const errors = collectErrors(admin);
  const own = await cf.token('admin', { name: 'alice-admin' });
  await signIn(admin, cf.url, own);
  const failedChild = list.find((/** @type {any} */ j) => (j.status === 'failed' || j.status === 'dead') && (j.payload?.mode === 'batch' || j.payload?.mode === 'retry'));
  assert.ok(failedChild, 'a child ended dead (its target failed in every wave)');
  const distId = failedChild.distribution_id;
  const before = await distributionEnded(distId);
  // An operator may re-drive (a distribution action) though not retry jobs (admin).
  await page.goto(`${cf.url}/jobs/${failedChild.id}`);
  await page.getByRole('button', { name: `Retry the failed targets of job ${failedChild.id} in run ${before.run_no}` }).waitFor();
  assert.equal(await page.getByRole('link', { name: `Retry failed targets of job ${failedChild.id} on its distribution` }).count(), 0);
  await admin.goto(`${cf.url}/jobs/${failedChild.id}`);
  const offer = admin.getByRole('button', { name: `Retry the failed targets of job ${failedChild.id} in run ${before.run_no}` });
  await offer.waitFor();
  assert.equal(await admin.getByRole('button', { name: `Retry job ${failedChild.id}` }).count(), 0);
  await offer.click();
  const made = admin.locator('.feedback.ok a');
  await made.waitFor();
  assert.match(await admin.locator('.feedback.ok').innerText(), new RegExp(`run again in run ${before.run_no} as job`));
  const newId = String(await made.getAttribute('href')).match(/\/jobs\/([0-9a-f]{24})/)?.[1] ?? '';
  const after = await distributionEnded(distId);
  assert.equal(after.run_no, before.run_no, 'the same run, reopened');
  const redone = await job(newId);
  assert.equal(redone.payload.mode, 'retry');
  assert.equal(redone.parent_job_id, failedChild.id);
  assert.equal(after.fan_out.finalized_jobs.length, before.fan_out.finalized_jobs.length + 1, 'the re-drive is counted once');
  await admin.goto(`${cf.url}/jobs/${newId}`);
  await admin.locator('.summary .tag.child', { hasText: 'Retry by operator' }).waitFor();

  // The results table: Retry on the failed target only, as one more job of the run.
  await admin.goto(`${cf.url}/distributions/${distId}`);
  await admin.locator('#results-table').waitFor();
  const failedRows = (await cf.api('GET', `${P}/distributions/${distId}/results?status=failed`)).body.items;
  assert.ok(failedRows.length >= 1);
  assert.equal(await admin.locator('#results-table button[data-action="retry-target"]').count(), failedRows.length);
  // At 360 px the rows are cards: Retry is in view without scrolling sideways.
  await admin.setViewportSize({ width: 360, height: 740 });
  const box = await admin.locator('#results-table button[data-action="retry-target"]').first().boundingBox();
  assert.ok(box && box.x >= 0 && box.x + box.width <= 360, `Retry at 360 px: ${JSON.stringify(box)}`);
  assert.ok(await admin.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), 'no sideways page scroll at 360 px');
  await admin.setViewportSize({ width: 1440, height: 900 });
  await admin.locator('#results-table button[data-action="retry-target"]').first().click();
  await admin.locator('.feedback.ok', { hasText: `runs again in run ${before.run_no} as job` }).waitFor();
  const last = await distributionEnded(distId);
  assert.equal(last.fan_out.finalized_jobs.length, after.fan_out.finalized_jobs.length + 1);
  assert.deepEqual(errors, []);
  await admin.close();
  await signIn(page, cf.url, await cf.token('operator', { name: 'olga-operator-2' }));
});

test('the distribution view shows the API counters, batches and retry-wave jobs apart; results filter on the server; Execute/Retry failed/Cancel/Rollback for an operator', async () => {
  const id = fanout.distribution.id;
  const d = (await cf.api('GET', `${P}/distributions/${id}`)).body;
  await page.goto(`${cf.url}/distributions/${id}`);
  await page.locator('#batch-counters').waitFor();
  const b = d.fan_out.batches;
  const r = d.fan_out.retry_jobs;
  // Two batches, and the retry-wave children of the failing one counted apart from them: the
  // API's combined counters are their sums.
  assert.equal(b.total, 2, JSON.stringify(d.fan_out));
  assert.ok(r.finished >= 1, JSON.stringify(d.fan_out));
  for (const k of ['succeeded', 'failed', 'partial', 'cancelled']) assert.equal(b[k] + r[k], d.fan_out[k], k);
  for (const [k, v] of Object.entries({ batches: b.total, b_succeeded: b.succeeded, b_failed: b.failed, b_partial: b.partial,
    b_cancelled: b.cancelled, b_unfinished: b.total - b.finished, retry_jobs: r.finished + r.running,
    r_succeeded: r.succeeded, r_failed: r.failed, r_partial: r.partial, r_cancelled: r.cancelled,
    retrying: d.fan_out.retrying, retry_wave: d.fan_out.retry_wave,
    t_succeeded: d.summary.succeeded, t_failed: d.summary.failed, targets: d.summary.targets })) {
    assert.equal(await page.locator(`[data-counter="${k}"] .counter-value`).innerText(), String(v), k);
  }
  assert.equal(await page.locator('[data-counter="batches"] .counter-label').innerText(), 'Batches');
  assert.equal(await page.locator('[data-counter="retry_jobs"] .counter-label').innerText(), 'Retry jobs');
  assert.equal(await page.locator('[data-counter="total"]').count(), 0, 'no "Total" beside counters that count other jobs');
  for (const label of ['Execute', 'Retry failed', 'Rollback']) assert.equal(await page.getByRole('button', { name: label, exact: true }).count(), 1, label);
  // A finished run offers no Cancel: it could only answer 409 (issue 31).
  assert.notEqual(d.status, 'running');
  assert.equal(await page.getByRole('button', { name: 'Cancel', exact: true }).count(), 0);
  // Finalized children are linked.
  for (const f of d.fan_out.finalized_jobs) assert.equal(await page.locator(`.child-list a[href^="/jobs/${f.job_id}"]`).count(), 1);
  // The long tail: each phase's percentiles as the API computed them, the slowest targets.
  await page.locator('#tail-phases tbody tr').nth(5).waitFor();
  for (const p of d.long_tail.phases) {
    const row = page.locator(`#tail-phases tr[data-phase="${p.phase}"]`);
    assert.equal(await row.locator('td').first().innerText(), String(p.count), p.phase);
    if (p.count) assert.match(await row.locator('td[data-stat="p99_ms"]').innerText(), /^\d+(\.\d)? m?s$/, p.phase);
  }
  assert.equal(await page.locator('#tail-slowest tbody tr').count(), d.long_tail.slowest.length);
  assert.ok(d.long_tail.slowest.length >= 1);
  const slowest = d.long_tail.slowest[0];
  assert.match(await page.locator(`#tail-slowest tr[data-target-id="${slowest.target_id}"] .phase-text`).innerText(),
    new RegExp(Object.keys(slowest.timings_ms)[0]));
  // One bar per slow target (its rects have the phases' widths; here every phase took ~0 ms).
  assert.equal(await page.locator('#tail-slowest svg.phase-bar[role="img"]').count(), d.long_tail.slowest.length);
  // Results: both targets; the filters go to the route (server side) and name what the run has.
  await page.locator('#results-table tbody tr').nth(1).waitFor();
  const asked = page.waitForRequest((q) => q.url().includes('/results?') && q.url().includes('status=failed'));
  await page.getByLabel('Filter by status').selectOption('failed');
  await asked;
  await page.waitForURL(/status=failed/);
  await page.waitForFunction(() => document.querySelectorAll('#results-table tbody tr').length === 1);
  assert.match(await page.locator('#results-table tbody tr').innerText(), /network/);
  assert.equal(await page.locator('#results-count').innerText(), '1 of 2 targets');
  const classAsked = page.waitForRequest((q) => q.url().includes('error_class=network'));
  await page.getByLabel('Filter by error class').selectOption('network');
  await classAsked;
  await page.waitForURL(/error_class=network/);
  await page.waitForFunction(() => document.querySelectorAll('#results-table tbody tr').length === 1);
  // The route refuses a value it does not know, naming the field.
  const bad = await cf.api('GET', `${P}/distributions/${id}/results?error_class=slow`);
  assert.equal(bad.status, 400, bad.text);
  assert.equal(bad.body.error.field, 'error_class');
  const badStatus = await cf.api('GET', `${P}/distributions/${id}/results?status=done`);
  assert.equal(badStatus.status, 400, badStatus.text);
  assert.equal(badStatus.body.error.field, 'status');
  // The grid has one column per wave.
  assert.equal(await page.locator('.wave-grid thead th').count(), d.fan_out.retry_wave + 2);
  // Retry failed from the UI: the API's answer is shown.
  await page.getByRole('button', { name: 'Retry failed', exact: true }).click();
  await page.locator('.feedback', { hasText: /run \d+ started|no failed targets|still running/ }).waitFor();
});

test('a viewer sees no distribution actions; the certificate pages show the certificate and its distributions', async () => {
  const v = await browser.newPage();
  await signIn(v, cf.url, await cf.token('viewer', { name: 'victor-viewer' }));
  await v.goto(`${cf.url}/distributions/${normal.distribution.id}`);
  await v.locator('#target-counters').waitFor();
  assert.equal(await v.getByRole('button', { name: 'Execute' }).count(), 0);
  await v.goto(`${cf.url}/certificates`);
  const row = v.locator(`tr[data-id="${cat.certificate.id}"]`);
  await row.waitFor();
  assert.match(await row.innerText(), /www-example/);
  assert.match(await row.innerText(), /www\.example\.test, example\.test/);
  assert.match(await row.innerText(), /\(\d+ d left\)/);
  await row.locator('a').click();
  await v.waitForURL(new RegExp(`/certificates/${cat.certificate.id}`));
  await v.getByRole('heading', { name: 'Overview' }).waitFor();
  const summary = await v.locator('dl.summary').innerText();
  assert.match(summary, /Status\s+active/);
  assert.match(summary, /Source\s+Uploaded/);
  assert.match(summary, /Version\s+1/);
  assert.doesNotMatch(summary, /Revoked/);
  await v.getByRole('link', { name: 'Distribution', exact: true }).click();
  await v.waitForURL(/tab=distribution/);
  await v.getByRole('link', { name: 'www to two hosts' }).waitFor();
  await v.getByRole('link', { name: 'www fan-out' }).waitFor();
  // A viewer: no certificate action, no Execute (issue 31).
  assert.equal(await v.locator('#certificate-actions button').count(), 0);
  assert.equal(await v.getByRole('button', { name: 'Execute' }).count(), 0);
  await v.close();
});

test('the certificate page\'s actions for an admin: Execute on a distribution starts its next run; Delete asks, and the API\'s refusal is shown', async () => {
  const o = await browser.newPage();
  const errors = collectErrors(o);
  await signIn(o, cf.url, cf.ownerToken);
  const before = (await cf.api('GET', `${P}/distributions/${normal.distribution.id}`)).body;
  await o.goto(`${cf.url}/certificates/${cat.certificate.id}?project=default&tab=distribution`);
  const row = o.locator(`tr[data-distribution-id="${normal.distribution.id}"]`);
  await row.getByRole('button', { name: 'Execute' }).click();
  const fb = o.locator('.feedback.ok');
  await fb.waitFor();
  assert.equal(await fb.innerText(), `Execute: run ${before.run_no + 1} of www to two hosts started`);
  assert.equal((await cf.api('GET', `${P}/distributions/${normal.distribution.id}`)).body.run_no, before.run_no + 1);
  // Uploaded: Delete only. The certificate is delivered by distributions, so the API refuses.
  assert.deepEqual(await o.locator('#certificate-actions button').allTextContents(), ['Delete']);
  await o.locator('#certificate-actions').getByRole('button', { name: 'Delete' }).click();
  const dialog = o.getByRole('dialog');
  assert.equal(await dialog.locator('h2').innerText(), 'Delete www-example?');
  await dialog.getByRole('button', { name: 'Delete' }).click();
  const refused = o.locator('.feedback.error');
  await refused.waitFor();
  assert.match(await refused.innerText(), /is used by distribution/);
  assert.equal((await cf.api('GET', `${P}/certificates/${cat.certificate.id}`)).status, 200);
  assert.deepEqual(errors.filter((e) => !/409|Failed to load resource/.test(e)), []);
  await o.close();
});
