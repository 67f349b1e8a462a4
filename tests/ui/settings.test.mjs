// Settings: every system setting with its range; an out-of-range value is refused with the
// API's message next to the field and nothing is saved; a good value is saved.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startCertfleet, launch, signIn, collectErrors } from './helpers.mjs';

/** @type {Awaited<ReturnType<typeof startCertfleet>>} */
let cf;
/** @type {Awaited<ReturnType<typeof launch>>} */
let browser;

before(async () => {
  cf = await startCertfleet();
  browser = await launch();
});
after(async () => {
  await browser?.close();
  await cf?.stop();
});

/** The API's value of one setting, whatever the shape of GET /settings. */
async function apiValue(/** @type {string} */ name) {
  const b = (await cf.api('GET', '/api/v1/settings')).body;
  const list = Array.isArray(b?.items) ? b.items : Array.isArray(b?.settings) ? b.settings : null;
  if (list) return list.find((/** @type {any} */ r) => r.name === name)?.value;
  const v = b[name];
  return v !== null && typeof v === 'object' ? v.value : v;
}

test('an out-of-range value shows the API message at its field; nothing is saved', async () => {
  const page = await browser.newPage();
  const errors = collectErrors(page);
  await signIn(page, cf.url, cf.ownerToken);
  await page.getByRole('link', { name: 'Settings' }).click();
  await page.waitForURL(/\/settings(\?|$)/);
  const field = page.locator('#setting-jobs_page_size_default');
  await field.waitFor();
  // Every system setting is there, with its range.
  for (const name of ['jobs_page_size_default', 'job_retry_per_minute', 'ui_session_ttl_s', 'egress_allow_list', 'distribution_fanout_threshold'])
    assert.equal(await page.locator(`#setting-${name}`).count(), 1, name);
  const before = await apiValue('jobs_page_size_default');
  const expected = await cf.api('PUT', '/api/v1/settings', { jobs_page_size_default: 500 });
  assert.equal(expected.status, 400);

  await field.fill('500');
  await page.getByLabel('job_retry_per_minute').fill('7');  // also changed: all or nothing
  await page.getByRole('button', { name: 'Save settings' }).click();
  const msg = page.locator('[data-field-error="jobs_page_size_default"]');
  await msg.filter({ hasText: /\S/ }).waitFor();
  assert.equal(await msg.innerText(), expected.body.error.message);
  assert.equal(await field.getAttribute('aria-invalid'), 'true');
  assert.match(await page.locator('.feedback.error').innerText(), /Nothing was saved/);
  assert.equal(await apiValue('jobs_page_size_default'), before);
  assert.notEqual(String(await apiValue('job_retry_per_minute')), '7', 'the other value was not saved either');

  await field.fill('30');
  await page.getByRole('button', { name: 'Save settings' }).click();
  await page.locator('.feedback.ok', { hasText: 'Settings saved' }).waitFor();
  assert.equal(String(await apiValue('jobs_page_size_default')), '30');
  assert.equal(String(await apiValue('job_retry_per_minute')), '7');
  assert.deepEqual(errors, []);
  await page.close();
});

test('each setting shows its range and doc (from GET /api/v1/settings/schema)', async () => {
  const page = await browser.newPage();
  await signIn(page, cf.url, cf.ownerToken);
  await page.goto(`${cf.url}/settings`);
  await page.locator('#setting-jobs_page_size_default').waitFor();
  assert.match(await page.locator('[data-setting="jobs_page_size_default"] .range').innerText(), /integer from 1 to 200/,
    'the range comes from the API (a flat {name: value} answer has none)');
  assert.match(await page.locator('[data-setting="jobs_page_size_default"] .setting-doc').innerText(), /page size/i);
  assert.match(await page.locator('[data-setting="ui_session_ttl_s"] .range').innerText(), /integer from 300 to 2592000/);
  await page.close();
});

test('the settings are shown in the API\'s sections, in its order, each with its range and default (issue 31)', async () => {
  const page = await browser.newPage();
  const errors = collectErrors(page);
  await signIn(page, cf.url, cf.ownerToken);
  await page.goto(`${cf.url}/settings`);
  await page.locator('#system-settings-form fieldset.setting-group').first().waitFor();
  const schema = (await cf.api('GET', '/api/v1/settings/schema')).body;
  assert.ok(Array.isArray(schema.groups) && schema.groups.length >= 5, JSON.stringify(schema.groups));
  const legends = await page.locator('#system-settings-form fieldset.setting-group > legend').allInnerTexts();
  assert.deepEqual(legends, schema.groups.map((/** @type {any} */ g) => g.title));
  assert.equal(legends[0], 'Distribution');
  for (const g of schema.groups) {
    const shown = await page.locator(`fieldset[data-group="${g.id}"] [data-setting]`).evaluateAll((els) => els.map((e) => e.getAttribute('data-setting')));
    assert.deepEqual(shown, g.settings, g.id);
  }
  // Every system setting is on the page once, in the section its schema row names.
  for (const item of schema.items) {
    assert.equal(await page.locator(`fieldset[data-group="${item.group}"] [data-setting="${item.name}"]`).count(), 1, item.name);
  }
  assert.equal(await page.locator('#system-settings-form [data-setting]').count(), schema.items.length);
  const doc = await page.locator('[data-setting="distribution_fanout_batch_size"] .setting-doc').innerText();
  assert.match(doc, /integer from 0 to 200 · default 0/);
  assert.match(await page.locator('[data-setting="ui_base_url"] .setting-doc').innerText(), /default empty/);
  assert.deepEqual(errors, []);
  await page.close();
});

test('a project admin sees only the project\'s settings; an operator gets no Settings link and the page says why', async () => {
  const page = await browser.newPage();
  await page.context().clearCookies();
  await signIn(page, cf.url, await cf.token('owner', { name: 'project-owner' }));
  await page.getByRole('link', { name: 'Settings' }).click();
  await page.locator('#project-settings-form [data-setting="issuance_requires_approval"]').waitFor();
  await page.locator('#system-settings-note', { hasText: 'system-admin token' }).waitFor();
  assert.equal(await page.locator('#system-settings-form').count(), 0);
  assert.equal(await page.locator('#workers-table').count(), 0);
  await page.context().clearCookies();
  await signIn(page, cf.url, await cf.token('operator', { name: 'project-operator' }));
  assert.equal(await page.getByRole('link', { name: 'Settings' }).count(), 0);
  await page.goto(`${cf.url}/settings`);
  await page.locator('.feedback.error', { hasText: 'admin of the project' }).waitFor();
  await page.close();
});

test('the Workers panel lists this server\'s worker, alive, with its lanes (issue 34)', async () => {
  const page = await browser.newPage();
  const errors = collectErrors(page);
  await signIn(page, cf.url, cf.ownerToken);
  await page.goto(`${cf.url}/settings`);
  const row = page.locator('#workers-table tbody tr').first();
  await row.waitFor();
  const text = await row.innerText();
  assert.match(text, /alive/);
  assert.match(text, /main,dist/);
  assert.match(await page.locator('.workers [role="status"]').innerText(), /1 alive/);
  const api = (await cf.api('GET', '/api/v1/workers')).body;
  assert.equal(api.alive, 1);
  assert.equal(await row.getAttribute('data-worker'), api.items[0].id);
  assert.deepEqual(errors, []);
  await page.close();
});
