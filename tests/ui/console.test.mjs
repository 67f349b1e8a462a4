// Issue 31, the console at 3 am: rows stay put under a resting pointer and the cancel that
// follows names its job; focus survives refreshes and actions; a long log line is read in full
// on a phone and copied or downloaded; "cannot reach the server" clears when it answers again;
// paging has first/last, a page box, and clamps a page past the end.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { startCertfleet, launch, signIn, collectErrors } from './helpers.mjs';

/** @type {Awaited<ReturnType<typeof startCertfleet>>} */
let cf;
/** @type {Awaited<ReturnType<typeof launch>>} */
let browser;
let admin = '';
const P = '/api/v1/projects/default';
const later = () => Date.now() + 3600_000;

before(async () => {
  cf = await startCertfleet();
  admin = await cf.token('admin', { name: 'night-admin' });
  browser = await launch();
});
after(async () => {
  await browser?.close();
  await cf?.stop();
});

/** The Job Queue's automatic refresh, now (it also runs when the tab becomes visible). */
async function autoRefresh(/** @type {import('playwright-core').Page} */ page) {
  await page.evaluate(() => document.dispatchEvent(new Event('visibilitychange')));
}

test('a pointer resting on Cancel keeps its row across a refresh; the cancel names its job and only that job ends', { timeout: 60000 }, async () => {
  const page = await browser.newPage();
  const errors = collectErrors(page);
  await signIn(page, cf.url, admin);
  /** @type {any[]} */
  const first = [];
  for (let i = 0; i < 5; ++i) first.push(await cf.enqueue('noop', {}, { token: admin, run_at: later() }));
  await page.goto(`${cf.url}/jobs?status=pending`);
  const victim = first[2];
  const button = page.locator(`tr[data-job-id="${victim.id}"] button[data-action="cancel"]`);
  await button.waitFor();
  const box = await button.boundingBox();
  assert.ok(box);
  await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
  // Three new jobs: the newest first, so a redraw would move every row down under the pointer.
  for (let i = 0; i < 3; ++i) await cf.enqueue('noop', {}, { token: admin, run_at: later() });
  await autoRefresh(page);
  await page.locator('#held-note', { hasText: '3 new jobs — show' }).waitFor();
  const under = await page.evaluate(({ x, y }) => document.elementFromPoint(x, y)?.closest('tr')?.getAttribute('data-job-id'),
    { x: box.x + box.width / 2, y: box.y + box.height / 2 });
  assert.equal(under, victim.id, 'the row under the pointer is still the one it rested on');
  // The counts are live even while the rows wait.
  await page.waitForFunction(() => document.querySelector('[data-count="pending"]')?.textContent === '8');

  // The click asks first, naming the job; keeping it changes nothing.
  await page.mouse.down();
  await page.mouse.up();
  const dialog = page.getByRole('dialog', { name: `Cancel job ${victim.id}?` });
  await dialog.waitFor();
  assert.equal(await dialog.getByRole('button', { name: 'Keep job' }).evaluate((b) => b === document.activeElement), true,
    'the harmless choice has the focus');
  await dialog.getByRole('button', { name: 'Keep job' }).click();
  assert.equal((await cf.job(victim.id)).status, 'pending');
  await button.click();
  await page.getByRole('dialog').getByRole('button', { name: 'Cancel job' }).click();
  await page.locator('.feedback.ok', { hasText: 'Job cancelled' }).waitFor();
  assert.equal((await cf.job(victim.id)).status, 'cancelled');
  for (const j of first.filter((x) => x.id !== victim.id)) assert.equal((await cf.job(j.id)).status, 'pending', j.id);

  // Once the pointer leaves the table, the held rows are shown.
  await page.mouse.move(2, 2);
  await page.waitForFunction(() => document.querySelector('#held-note')?.textContent === '');
  // The cancelled job leaves the Pending list with the list's next load (a race when read at once).
  await page.waitForFunction(() => document.querySelectorAll('tr.job-row').length === 7, null, { timeout: 10000 })
    .catch(async () => assert.equal(await page.locator('tr.job-row').count(), 7));
  assert.deepEqual(errors, []);
  await page.close();
});

test('keyboard focus stays on its button across a refresh and goes back to the row after Cancel', { timeout: 60000 }, async () => {
  const page = await browser.newPage();
  await signIn(page, cf.url, admin);
  const a = await cf.enqueue('noop', {}, { token: admin, run_at: later() });
  await page.goto(`${cf.url}/jobs?status=pending`);
  const cancel = page.locator(`tr[data-job-id="${a.id}"] button[data-action="cancel"]`);
  await cancel.focus();
  await cf.enqueue('noop', {}, { token: admin, run_at: later() });
  await autoRefresh(page);
  await page.locator('#held-note', { hasText: 'new job' }).waitFor();
  assert.equal(await cancel.evaluate((b) => b === document.activeElement), true, 'focus kept across the refresh');
  // "show" from the keyboard: the rows move, the focus stays with the same job's button.
  await page.locator('#show-held').focus();
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => document.querySelector('#held-note')?.textContent === '');
  await cancel.focus();
  await page.keyboard.press('Enter');
  await page.getByRole('dialog').getByRole('button', { name: 'Cancel job' }).click();
  await page.locator('.feedback.ok', { hasText: 'Job cancelled' }).waitFor();
  // The cancelled job left the Pending tab's rows once the list was read again; the focus is in
  // the table, not lost to <body>.
  await page.waitForFunction(() => document.activeElement !== document.body && document.activeElement?.closest('.table-wrap') !== null);
  await page.close();
});

test('a 300-character log line is read in full at 390 px, copied and downloaded', { timeout: 60000 }, async () => {
  const page = await browser.newPage({ viewport: { width: 390, height: 844 } });
  await page.context().grantPermissions(['clipboard-read', 'clipboard-write'], { origin: cf.url });
  await signIn(page, cf.url, admin);
  const text = `[acme] order for www.example.test failed: ${'urn:ietf:params:acme:error:rejectedIdentifier '.repeat(6)}END-OF-LINE`;
  assert.ok(text.length >= 300, String(text.length));
  const j = await cf.enqueue('noop', { lines: 3, text }, { token: admin });
  await cf.waitJob(j.id, (x) => x.status === 'completed');
  await page.goto(`${cf.url}/jobs/${j.id}`);
  await page.waitForFunction(() => document.querySelector('#log-count')?.textContent === '3 lines');
  // The row cuts it; Open (keyboard-reachable) shows every character, wrapped inside the page.
  const open = page.getByRole('button', { name: 'Open line 2 in full' });
  await open.focus();
  await page.keyboard.press('Enter');
  const full = page.locator('#log-full');
  await full.waitFor();
  assert.ok((await full.innerText()).includes(text), await full.innerText());
  const fits = await full.evaluate((el) => el.scrollWidth <= el.clientWidth && el.getBoundingClientRect().right <= innerWidth);
  assert.equal(fits, true, 'the whole line is visible without scrolling sideways');
  assert.equal(await page.evaluate(() => document.documentElement.scrollWidth <= innerWidth), true);
  // Copy line, Copy log, Download.
  await page.getByRole('button', { name: 'Copy line' }).click();
  assert.ok((await page.evaluate(() => navigator.clipboard.readText())).endsWith(`${text}`));
  await page.getByRole('button', { name: 'Copy log' }).click();
  const all = await page.evaluate(() => navigator.clipboard.readText());
  assert.equal(all.split('\n').filter((l) => l.endsWith('END-OF-LINE')).length, 3, all);
  const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download' }).click()]);
  assert.equal(download.suggestedFilename(), `job-${j.id}.log`);
  const saved = await readFile(/** @type {string} */ (await download.path()), 'utf8');
  assert.equal(saved, all);
  await page.close();
});

test('"cannot reach the server" shows while the API is unreachable and clears on the next good answer', { timeout: 60000 }, async () => {
  const page = await browser.newPage();
  await signIn(page, cf.url, admin);
  await page.goto(`${cf.url}/jobs`);
  await page.locator('tr.job-row').first().waitFor();
  await page.route('**/api/v1/**', (r) => r.abort('connectionrefused'));
  await page.getByRole('button', { name: 'Refresh' }).click();
  await page.locator('.feedback.error', { hasText: 'cannot reach the server' }).waitFor();
  assert.match(await page.locator('#auto-refresh').innerText(), /unreachable/);
  await page.unroute('**/api/v1/**');
  await autoRefresh(page);
  await page.locator('.feedback.error').waitFor({ state: 'detached' });
  assert.equal(await page.locator('#auto-refresh').innerText(), 'Auto-refreshing');
  await page.close();
});

test('paging: First/Last and a page box; a page past the end shows the last page', { timeout: 90000 }, async () => {
  const page = await browser.newPage();
  await signIn(page, cf.url, admin);
  const size = (await cf.api('GET', `${P}/jobs?status=completed`)).body.page_size;
  const want = size * 2 + 3;  // three pages of completed jobs
  let last;
  for (let have = (await cf.api('GET', `${P}/jobs?status=completed`)).body.total; have < want; ++have) last = await cf.enqueue('noop', {});
  if (last) await cf.waitJob(last.id, (j) => j.status === 'completed', 60000);
  await page.waitForTimeout(500);
  const total = (await cf.api('GET', `${P}/jobs?status=completed`)).body.total;
  const pages = Math.ceil(total / size);
  assert.ok(pages >= 3, String(pages));
  await page.goto(`${cf.url}/jobs?status=completed&page=999999`);
  await page.waitForURL((u) => u.searchParams.get('page') === String(pages));
  await page.locator('.page-no', { hasText: `Page ${pages} of ${pages}` }).waitFor();
  await page.getByRole('link', { name: 'First', exact: true }).click();
  await page.locator('.page-no', { hasText: `Page 1 of ${pages}` }).waitFor();
  await page.getByLabel(`Page number, 1 to ${pages}`).fill('2');
  await page.getByRole('button', { name: 'Go to page' }).click();
  await page.locator('.page-no', { hasText: `Page 2 of ${pages}` }).waitFor();
  assert.equal(new URL(page.url()).searchParams.get('status'), 'completed', 'the tab is kept');
  await page.getByRole('link', { name: 'Last', exact: true }).click();
  await page.locator('.page-no', { hasText: `Page ${pages} of ${pages}` }).waitFor();
  await page.close();
});

test('a session that ended says so at sign-in, the click then was not done, and sign-in returns to the page', { timeout: 60000 }, async () => {
  const page = await browser.newPage();
  await signIn(page, cf.url, admin);
  const failed = await cf.enqueue('noop', { fail_times: 1, permanent: true }, { token: admin });
  await cf.waitJob(failed.id, (j) => j.status === 'dead');
  await page.goto(`${cf.url}/jobs?status=dead`);
  const retry = page.locator(`tr[data-job-id="${failed.id}"] button[data-action="retry"]`);
  await retry.waitFor();
  await page.context().clearCookies();  // the session is gone, as after its expiry
  await retry.click();
  await page.waitForURL((u) => u.pathname === '/login');
  const note = page.locator('#session-ended');
  assert.match(await note.innerText(), /Your session ended.*not done.*return to \/jobs\?status=dead/s);
  assert.equal((await cf.job(failed.id)).status, 'dead', 'the retry clicked without a session was not done');
  await page.getByLabel('API token').fill(admin);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL((u) => u.pathname === '/jobs' && u.searchParams.get('status') === 'dead');
  // Times say their zone, and the UTC value on hover.
  const t = page.locator(`tr[data-job-id="${failed.id}"] time`);
  const zone = await page.evaluate(() => new Intl.DateTimeFormat(undefined, { timeZoneName: 'short' }).formatToParts(new Date()).find((x) => x.type === 'timeZoneName')?.value ?? '');
  assert.ok(zone && (await t.innerText()).endsWith(` ${zone}`), await t.innerText());
  assert.match(/** @type {string} */ (await t.getAttribute('title')), /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/);
  await page.close();
});

test('the project switch keeps the kind of page (its list) and the navigation marks the section', { timeout: 60000 }, async () => {
  const made = await cf.api('POST', '/api/v1/projects', { name: 'night-shift' });
  assert.ok(made.status === 201 || made.status === 200, made.text);
  const page = await browser.newPage();
  await signIn(page, cf.url, cf.ownerToken);
  const j = await cf.enqueue('noop', {});
  await page.goto(`${cf.url}/jobs/${j.id}`);
  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Jobs' }).and(page.locator('[aria-current=page]')).waitFor();
  await page.goto(`${cf.url}/discovery/certificates`);
  assert.equal(await page.locator('#main-nav a[aria-current=page]').innerText(), 'Discovery');
  await page.getByLabel('Project').selectOption('night-shift');
  await page.waitForURL((u) => u.pathname === '/discovery' && u.searchParams.get('project') === 'night-shift');
  // The main navigation's link: a page may also link to a setting in its own text.
  assert.equal(await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Settings', exact: true }).count(), 1, 'a system token sees Settings');
  await page.close();
});
