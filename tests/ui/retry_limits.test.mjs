// The retry limit: past job_retry_per_minute the UI shows "retry limit: try again in N s",
// and a failed retry never looks like it worked.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startCertfleet, launch, signIn } from './helpers.mjs';

/** @type {Awaited<ReturnType<typeof startCertfleet>>} */
let cf;
/** @type {Awaited<ReturnType<typeof launch>>} */
let browser;

before(async () => {
  cf = await startCertfleet({ settings: { job_retry_per_minute: 1 } });
  browser = await launch();
});
after(async () => {
  await browser?.close();
  await cf?.stop();
});

test('429: "retry limit: try again in N s"', async () => {
  const admin = await cf.token('admin', { name: 'alice-admin' });
  const a = await cf.enqueue('noop', { fail_times: 1 });
  const b = await cf.enqueue('noop', { fail_times: 1 });
  await cf.waitJob(a.id, (j) => j.status === 'failed');
  await cf.waitJob(b.id, (j) => j.status === 'failed');
  const page = await browser.newPage();
  await signIn(page, cf.url, admin);
  await page.goto(`${cf.url}/jobs?status=failed`);
  await page.locator(`tr[data-job-id="${a.id}"] button[data-action="retry"]`).click();
  await page.locator('.feedback.ok', { hasText: 'queued for retry' }).waitFor();
  await page.locator(`tr[data-job-id="${b.id}"] button[data-action="retry"]`).click();
  const fb = page.locator('.feedback.error');
  await fb.waitFor();
  assert.match(await fb.innerText(), /^retry limit: try again in \d+ s$/);
  assert.equal(await fb.getAttribute('role'), 'alert');
  assert.equal((await cf.job(b.id)).status, 'failed', 'the refused retry changed nothing');
});
