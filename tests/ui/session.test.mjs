// Sign-in and sign-out, the CSRF refusal, the security headers on every UI response, a session
// that ends on the server, and the not-found page.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startCertfleet, launch, signIn, collectErrors } from './helpers.mjs';

/** @type {Awaited<ReturnType<typeof startCertfleet>>} */
let cf;
/** @type {Awaited<ReturnType<typeof launch>>} */
let browser;
let adminToken = '';

before(async () => {
  cf = await startCertfleet();
  adminToken = await cf.token('admin', { name: 'alice-admin' });
  browser = await launch();
});
after(async () => {
  await browser?.close();
  await cf?.stop();
});

const csp = "default-src 'self'; frame-ancestors 'none'";

/** @param {Headers} h @param {string} what */
function assertSecurityHeaders(h, what) {
  assert.equal(h.get('content-security-policy'), csp, `CSP on ${what}`);
  assert.equal(h.get('x-content-type-options'), 'nosniff', `nosniff on ${what}`);
  assert.equal(h.get('referrer-policy'), 'no-referrer', `Referrer-Policy on ${what}`);
}

test('a wrong token is refused with the API message; the right one signs in; sign-out ends it', async () => {
  const page = await browser.newPage();
  const errors = collectErrors(page);
  await page.goto(`${cf.url}/jobs`);
  await page.waitForURL(/\/login\?next=%2Fjobs/);
  await page.getByLabel('API token').fill('cf_not-a-real-token-aaaaaaaaaaaaaaaaaaaaaaaaaaaaa');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.locator('#login-error').filter({ hasText: /\S/ }).waitFor();
  assert.match(await page.locator('#login-error').innerText(), /token/i);
  assert.ok(new URL(page.url()).pathname === '/login');

  await page.getByLabel('API token').fill(adminToken);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL(/\/jobs$/);
  await page.getByRole('heading', { name: 'Job Queue' }).waitFor();
  assert.match(await page.locator('.who').innerText(), /alice-admin \(admin\)/);
  const cookies = await browser.context.cookies(cf.url);
  const c = cookies.find((x) => x.name === 'certfleet_session');
  assert.ok(c, 'the session cookie is set');
  assert.equal(c.httpOnly, true);
  assert.equal(c.sameSite, 'Strict');
  // An admin, not a system admin: Settings holds the project's own settings only.
  assert.equal(await page.getByRole('link', { name: 'Settings' }).count(), 1);

  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.waitForURL(/\/login/);
  const after = (await browser.context.cookies(cf.url)).find((x) => x.name === 'certfleet_session');
  assert.ok(!after || after.value === '', 'the cookie is cleared');
  await page.goto(`${cf.url}/jobs`);
  await page.waitForURL(/\/login/);
  assert.deepEqual(errors.filter((e) => !/401|Failed to load resource/.test(e)), []);
  await page.close();
});

test('a cookie write without X-CSRF-Token is refused and changes nothing', async () => {
  const job = await cf.enqueue('noop', {}, { run_at: Date.now() + 3600_000 });
  const s = await cf.api('POST', '/api/v1/session', { token: adminToken }, '');
  assert.equal(s.status, 201, s.text);
  const setCookie = s.headers.get('set-cookie') ?? '';
  const m = /certfleet_session=([^;]+)/.exec(setCookie);
  assert.ok(m, `a session cookie in ${setCookie}`);
  assert.match(setCookie, /HttpOnly/i);
  assert.match(setCookie, /SameSite=Strict/i);
  const cookie = `certfleet_session=${m[1]}`;
  const cancel = `/api/v1/projects/default/jobs/${job.id}/cancel`;
  const refused = await cf.api('POST', cancel, undefined, '', { Cookie: cookie });
  assert.equal(refused.status, 403, refused.text);
  assert.equal(refused.body.error.code, 'forbidden');
  assert.equal(refused.body.error.field, 'csrf_token');
  const wrong = await cf.api('POST', cancel, undefined, '', { Cookie: cookie, 'X-CSRF-Token': 'x'.repeat(43) });
  assert.equal(wrong.status, 403, wrong.text);
  assert.equal((await cf.job(job.id)).status, 'pending', 'nothing changed');
  // A GET with the cookie alone works; the same write with the header does.
  const get = await cf.api('GET', `/api/v1/projects/default/jobs/${job.id}`, undefined, '', { Cookie: cookie });
  assert.equal(get.status, 200);
  const ok = await cf.api('POST', cancel, undefined, '', { Cookie: cookie, 'X-CSRF-Token': s.body.csrf_token });
  assert.equal(ok.status, 200, ok.text);
  assert.equal((await cf.job(job.id)).status, 'cancelled');
});

test('every UI response carries the security headers; assets are cached forever, the page is not', async () => {
  const html = await fetch(`${cf.url}/jobs`);
  assert.equal(html.status, 200);
  assert.match(html.headers.get('content-type') ?? '', /text\/html/);
  assertSecurityHeaders(html.headers, 'the page');
  assert.doesNotMatch(html.headers.get('cache-control') ?? '', /immutable|max-age=[1-9]/);
  const text = await html.text();
  assert.doesNotMatch(text, /__ASSET_BASE__/);
  const assets = [...text.matchAll(/(?:href|src)="(\/assets\/[^"]+)"/g)].map((x) => x[1]);
  assert.ok(assets.some((a) => a.endsWith('.js')) && assets.some((a) => a.endsWith('.css')) && assets.some((a) => a.endsWith('.svg')), `assets in ${text}`);
  const base = assets[0].replace(/\/[^/]+$/, '');
  for (const a of [...assets, `${base}/api.js`, `${base}/jobs.js`]) {
    const r = await fetch(cf.url + a);
    assert.equal(r.status, 200, a);
    assertSecurityHeaders(r.headers, a);
    assert.match(r.headers.get('cache-control') ?? '', /max-age=\d{6,}/, `long cache on ${a}`);
    const ct = r.headers.get('content-type') ?? '';
    if (a.endsWith('.js')) assert.match(ct, /javascript/, a);
    if (a.endsWith('.css')) assert.match(ct, /text\/css/, a);
    if (a.endsWith('.svg')) assert.match(ct, /image\/svg\+xml/, a);
  }
  const missing = await fetch(`${cf.url}/no/such/page`);
  assert.equal(missing.status, 404);
  assertSecurityHeaders(missing.headers, 'the 404 page');
  assert.match(await missing.text(), /<script type="module"/);
  const api = await fetch(`${cf.url}/api/v1/nope`);
  assert.match(api.headers.get('content-type') ?? '', /json/, '/api/ stays JSON');
  const root = await fetch(`${cf.url}/`, { redirect: 'manual' });
  assert.ok([301, 302, 303, 307, 308].includes(root.status));
  assert.equal(root.headers.get('location'), '/dashboard');
});

test('an unknown path shows "Page not found"; a session ended on the server sends the UI to /login', async () => {
  const page = await browser.newPage();
  await signIn(page, cf.url, adminToken);
  const r = await page.goto(`${cf.url}/definitely/not/here`);
  assert.equal(r?.status(), 404);
  await page.getByRole('heading', { name: 'Page not found' }).waitFor();
  await page.goto(`${cf.url}/jobs`);
  await page.getByRole('heading', { name: 'Job Queue' }).waitFor();
  // End the session behind the page's back (as expiry does), then refresh with "r".
  const csrf = await page.evaluate(async () => (await (await fetch('/api/v1/session')).json()).csrf_token);
  const del = await page.evaluate(async (t) => (await fetch('/api/v1/session', { method: 'DELETE', headers: { 'X-CSRF-Token': t } })).status, csrf);
  assert.equal(del, 204);
  await page.locator('body').press('r');
  await page.waitForURL(/\/login\?next=/);
  await page.close();
});

test('revoking the token of a session watching a live log sends the page to sign-in within seconds, no refresh', async () => {
  const token = await cf.token('viewer', { name: 'watcher-to-revoke' });
  const job = await cf.enqueue('noop', { lines: 600, line_ms: 100 });
  const page = await browser.newPage();
  await signIn(page, cf.url, token);
  await page.goto(`${cf.url}/jobs/${job.id}`);
  await page.locator('#logs-title').waitFor();
  await page.locator('.badge.live').filter({ hasText: 'Auto-refreshing' }).waitFor();
  const list = await cf.api('GET', '/api/v1/projects/default/tokens');
  assert.equal(list.status, 200, list.text);
  const id = list.body.items.find((/** @type {any} */ t) => t.name === 'watcher-to-revoke').id;
  const t0 = Date.now();
  const del = await cf.api('DELETE', `/api/v1/projects/default/tokens/${id}`);
  assert.equal(del.status, 200, del.text);
  // The server closes the stream (1008) at once; the page goes to sign-in and says why.
  await page.waitForURL(/\/login\?.*reason=expired/, { timeout: 5000 });
  assert.ok(Date.now() - t0 < 5000);
  await page.getByText('Your session ended').waitFor();
  await page.close();
});

test('the project selector lists the projects the session sees and switches the list', async () => {
  const created = await cf.api('POST', '/api/v1/projects', { name: 'team-a' });
  assert.equal(created.status, 201, created.text);
  const j = await cf.enqueue('noop', {}, { project: 'team-a', run_at: Date.now() + 3600_000 });
  const page = await browser.newPage();
  await signIn(page, cf.url, cf.ownerToken);
  // From the Dashboard (the landing page) the switch stays on the Dashboard; from a list, on it.
  const select = page.getByLabel('Project');
  assert.deepEqual((await select.locator('option').allInnerTexts()).sort(), ['default', 'team-a']);
  await select.selectOption('team-a');
  await page.waitForURL(/\/dashboard\?project=team-a/);
  await page.goto(`${cf.url}/jobs?project=default`);
  await page.locator('tr.job-row').first().waitFor();
  await page.getByLabel('Project').selectOption('team-a');
  await page.waitForURL(/\/jobs\?project=team-a/);
  await page.locator(`tr[data-job-id="${j.id}"]`).waitFor();
  assert.equal(await page.locator('tr.job-row').count(), 1);
  // Links keep the project; a project token sees only its own.
  assert.match(await page.getByRole('link', { name: 'Distributions' }).getAttribute('href') ?? '', /project=team-a/);
  await signIn(page, cf.url, adminToken);
  assert.deepEqual(await page.getByLabel('Project').locator('option').allInnerTexts(), ['default']);
  await page.close();
});
