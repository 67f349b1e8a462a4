// The AD CS page (/msca-cas) against the testbed's CEP/CES server (tests/testbed/msca_server.py
// through msca_server.mjs: user alice, password alice-password, its own TLS CA in ca.pem):
// msca_allow_list 127.0.0.1 put through the settings API; an admin adds the CA through the form
// (a wrong password shows the API's 400 naming auth.password under the password field, and so
// does a missing one; then the right one), the list and the CA's templates equal the API's, Refresh Policy fetches the policy again,
// Enroll on WebServer starts an msca_issue_certificate job whose link leads to the job, completed;
// Delete asks first (Keep changes nothing, a CA in use is refused with the API's message, a spare
// one goes); the Kerberos fields; an operator gets Refresh Policy only, a viewer no button; axe
// at any impact, light, dark and at 360 px without sideways scroll.
// Screenshots: msca-cas-{list,add,enroll}-{light,dark}.png, msca-cas-phone-{light,dark}.png.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startCertfleet, launch, signIn, shot, collectErrors, axe } from './helpers.mjs';
import { startMscaServer } from '../testbed/msca_server.mjs';

const P = '/api/v1/projects/default';
const templates = ['WebServer', 'WebServerApproval', 'ECWebServer', 'SubCA', 'DeniedByPolicy'];
const ended = (/** @type {any} */ j) => ['completed', 'failed', 'dead', 'cancelled'].includes(j.status);

/** @type {Awaited<ReturnType<typeof startMscaServer>>} */
let adcs;
/** @type {Awaited<ReturnType<typeof startCertfleet>>} */
let cf;
/** @type {Awaited<ReturnType<typeof launch>>} */
let browser;
let adminToken = '';
let operatorToken = '';
let viewerToken = '';
let caId = '';

/**
 * An API call as the owner, its status checked.
 * @param {string} method @param {string} path @param {unknown} [body] @param {number} [status]
 */
async function call(method, path, body = undefined, status = 200) {
  const r = await cf.api(method, path, body);
  assert.equal(r.status, status, `${method} ${path}: ${r.text}`);
  return r.body;
}

/** axe's findings at any impact, in words. @param {import('playwright-core').Page} page */
async function axeProblems(page) {
  return (await axe(page)).map((v) => `${v.impact} ${v.id} (${v.help}) at ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
}

/** The page, its list drawn. @param {import('playwright-core').Page} page */
async function open(page) {
  await page.goto(`${cf.url}/msca-cas?project=default`);
  await page.waitForFunction(() => !document.querySelector('main [role=status]')?.textContent?.startsWith('Loading'));
}

before(async () => {
  adcs = await startMscaServer();
  // The test CA listens on 127.0.0.1, which msca_allow_list reaches only when it lists it (PUT
  // /api/v1/settings by the owner token, before anything else).
  cf = await startCertfleet({ settings: { msca_allow_list: '127.0.0.1' } });
  adminToken = await cf.token('admin', { name: 'alice-admin' });
  operatorToken = await cf.token('operator', { name: 'oscar-operator' });
  viewerToken = await cf.token('viewer', { name: 'victor-viewer' });
  browser = await launch();
});
after(async () => {
  await browser?.close();
  await cf?.stop();
  await adcs?.stop();
});

test('an admin adds a CA through the form: a wrong password and a missing one shown at their fields as the API words them, then the list and templates as the API says', { timeout: 120000 }, async () => {
  const page = await browser.newPage({ viewport: { width: 1360, height: 900 } });
  const errors = collectErrors(page);
  await signIn(page, cf.url, adminToken);
  await open(page);
  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'AD CS' }).waitFor();
  assert.equal(await page.getByRole('heading', { level: 1 }).innerText(), 'AD CS');
  assert.match(await page.locator('main p.empty-state').innerText(), /No AD CS CAs in this project/);

  const form = page.locator('#add-msca-ca');
  await form.getByLabel('Name (required)', { exact: true }).fill('corp-ca');
  await form.getByLabel('CEP URL (required)', { exact: true }).fill(adcs.cepUrl);
  await form.getByLabel('CA bundle (PEM)', { exact: true }).fill(adcs.caPem);
  await form.getByLabel('Default template', { exact: true }).fill('WebServer');
  assert.equal(await form.getByLabel('Kind', { exact: true }).inputValue(), 'username_password');
  await form.getByLabel('Username (required)', { exact: true }).fill('alice');
  const password = form.getByLabel('Password (required)', { exact: true });
  assert.equal(await password.getAttribute('type'), 'password');

  // A wrong password: the CEP refuses it; the API answers 400 naming auth.password.
  const wrong = await cf.api('POST', `${P}/msca-cas`, { name: 'probe', cep_url: adcs.cepUrl, ca_bundle_pem: adcs.caPem,
    auth: { kind: 'username_password', username: 'alice', password: 'wrong-password' } });
  assert.equal(wrong.status, 400, wrong.text);
  assert.equal(wrong.body.error.field, 'auth.password');
  await password.fill('wrong-password');
  await form.getByRole('button', { name: 'Add CA' }).click();
  const passwordError = form.locator('[data-field-error="auth.password"]');
  await passwordError.filter({ hasText: 'msca_auth' }).waitFor();
  assert.equal(await passwordError.innerText(), wrong.body.error.message);
  assert.match(wrong.body.error.message, /^AD CS \[msca_auth\]: the policy service https:\/\/127\.0\.0\.1:\d+\/ADPolicyProvider_CEP_UsernamePassword\/service\.svc\/CEP refused/);
  assert.equal(await password.getAttribute('aria-invalid'), 'true');
  assert.equal(await password.evaluate((el) => el === document.activeElement), true, 'the password has the focus');
  assert.deepEqual((await call('GET', `${P}/msca-cas`)).items, [], 'nothing stored');
  assert.deepEqual(await axeProblems(page), []);
  await shot(page, 'msca-cas-add-light');

  // No password: the API's own check, at the same field.
  await password.fill('');
  await form.getByRole('button', { name: 'Add CA' }).click();
  await passwordError.filter({ hasText: 'required' }).waitFor();
  assert.equal(await passwordError.innerText(), 'auth.password is required');
  assert.equal(await password.getAttribute('aria-invalid'), 'true');

  await password.fill('alice-password');
  await form.getByRole('button', { name: 'Add CA' }).click();
  await page.locator('main .feedback.ok').filter({ hasText: 'corp-ca added' }).waitFor();
  assert.equal(await page.locator('main .feedback.ok').innerText(), 'AD CS CA corp-ca added: its policy lists 5 templates.');
  assert.equal(await password.inputValue(), '', 'the form is emptied');
  assert.equal(await page.evaluate(() => document.body.innerText.includes('alice-password')), false, 'no secret on the page');

  const [ca] = (await call('GET', `${P}/msca-cas`)).items;
  caId = ca.id;
  const row = page.locator(`#msca-cas tr[data-id="${caId}"]`);
  await row.waitFor();
  const cells = Object.fromEntries(await row.locator('td').evaluateAll((tds) => tds.map((td) => [td.getAttribute('data-label'), /** @type {HTMLElement} */ (td).innerText.trim()])));
  assert.equal(cells.Name, 'corp-ca');
  assert.match(cells.Authentication, /^password\s+alice$/);
  assert.equal(cells['CEP URL'], ca.cep_url);
  assert.equal(cells['Default Template'], 'WebServer');
  assert.equal(cells.Templates, '5');
  assert.equal(await row.locator('td[data-label="Policy Fetched"] time').getAttribute('datetime'), new Date(ca.policy.fetched_at).toISOString());

  // The CA's templates, as GET …/templates answers them.
  const api = await call('GET', `${P}/msca-cas/${caId}/templates`);
  assert.deepEqual(api.templates.map((/** @type {any} */ t) => t.name), templates);
  const card = page.locator(`section.msca-ca-card[data-ca-id="${caId}"]`);
  await card.getByRole('heading', { name: 'Templates of corp-ca' }).waitFor();
  assert.deepEqual(await card.locator('tbody tr[data-template] td[data-label="Template"]').allInnerTexts(), templates);
  for (const t of api.templates) {
    const tr = card.locator(`tr[data-template="${t.name}"]`);
    assert.equal(await tr.locator('td[data-label="Display Name"]').innerText(), t.display_name);
    assert.equal(await tr.locator('td[data-label="OID"]').innerText(), t.oid);
    assert.equal(await tr.locator('td[data-label="Key"]').innerText(), t.key_algorithm.replace(/_P(\d+)$/, ' P-$1'));
    assert.equal(await tr.locator('td[data-label="Minimum Key Size"]').innerText(), `${t.min_key_size} bits`);
    assert.deepEqual(await tr.locator('td[data-label="CES URLs"] li code').allInnerTexts(), t.ces_urls.map((/** @type {any} */ u) => u.url));
    assert.equal(await tr.getByRole('button', { name: `Enroll ${t.name}`, exact: true }).count(), 1);
  }
  assert.match(await card.locator('.policy-line').innerText(), new RegExp(`Policy ${api.policy_id.replace(/[{}]/g, '\\$&')}, fetched`));
  assert.deepEqual(await axeProblems(page), []);
  await shot(page, 'msca-cas-list-light');
  assert.deepEqual(errors, []);
  await page.close();
});

test('Refresh Policy fetches the policy from the CA again: the time moves on, as the API says', { timeout: 60000 }, async () => {
  const page = await browser.newPage({ viewport: { width: 1360, height: 900 } });
  const errors = collectErrors(page);
  await signIn(page, cf.url, adminToken);
  await open(page);
  const before = (await call('GET', `${P}/msca-cas/${caId}/templates`)).fetched_at;
  const card = page.locator(`section.msca-ca-card[data-ca-id="${caId}"]`);
  await card.getByRole('button', { name: 'Refresh Policy of corp-ca' }).click();
  await card.locator('.feedback.ok').waitFor();
  assert.equal(await card.locator('.feedback.ok').innerText(), 'Policy fetched from the CA again: 5 templates.');
  const after = (await call('GET', `${P}/msca-cas/${caId}/templates`)).fetched_at;
  assert.ok(Date.parse(after) > Date.parse(before), `${after} after ${before}`);
  const iso = new Date(after).toISOString();
  assert.equal(await card.locator('.policy-line time').getAttribute('datetime'), iso);
  assert.equal(await page.locator(`#msca-cas tr[data-id="${caId}"] td[data-label="Policy Fetched"] time`).getAttribute('datetime'), iso);
  assert.deepEqual(await card.locator('tbody tr[data-template] td[data-label="Template"]').allInnerTexts(), templates);
  assert.deepEqual(errors, []);
  await page.close();
});

test('Enroll a WebServer certificate from the page: a missing name at its field, then the job and the certificate linked; the job completes', { timeout: 120000 }, async () => {
  const page = await browser.newPage({ viewport: { width: 1360, height: 900 } });
  const errors = collectErrors(page);
  await signIn(page, cf.url, adminToken);
  await open(page);
  const card = page.locator(`section.msca-ca-card[data-ca-id="${caId}"]`);
  const opener = card.getByRole('button', { name: 'Enroll WebServer', exact: true });
  await opener.click();
  assert.equal(await opener.getAttribute('aria-expanded'), 'true');
  const form = card.getByRole('form', { name: 'Enroll with WebServer at corp-ca' });
  await form.waitFor();
  // WebServer is RSA, at least 2048 bits: the key types it accepts.
  assert.deepEqual(await form.getByLabel('Key type', { exact: true }).locator('option').allInnerTexts(), ["The template's (rsa-2048)", 'rsa-2048', 'rsa-3072']);
  await form.getByLabel('Subject', { exact: true }).fill('CN=web01.corp.test');
  await form.getByLabel('SANs', { exact: true }).fill('web01.corp.test\nweb.corp.test');
  await form.getByRole('button', { name: 'Enroll with WebServer' }).click();
  const nameError = form.locator('[data-field-error="name"]');
  const noName = await cf.api('POST', `${P}/certificates/enroll`, { name: '', msca_ca_id: caId, template: 'WebServer', subject: 'CN=web01.corp.test' });
  assert.equal(noName.status, 400, noName.text);
  assert.equal(noName.body.error.field, 'name');
  await nameError.filter({ hasText: 'name' }).waitFor();
  assert.equal(await nameError.innerText(), noName.body.error.message);
  assert.equal(await form.getByLabel('Certificate name (required)', { exact: true }).getAttribute('aria-invalid'), 'true');
  await form.getByLabel('Certificate name (required)', { exact: true }).fill('web01');
  assert.deepEqual(await axeProblems(page), []);
  await shot(page, 'msca-cas-enroll-light');

  const sent = page.waitForRequest((r) => r.method() === 'POST' && r.url().endsWith('/certificates/enroll'));
  await form.getByRole('button', { name: 'Enroll with WebServer' }).click();
  assert.deepEqual((await sent).postDataJSON(), { name: 'web01', msca_ca_id: caId, template: 'WebServer', subject: 'CN=web01.corp.test', sans: ['web01.corp.test', 'web.corp.test'] });
  const done = card.locator('.feedback.ok');
  await done.waitFor();
  assert.equal(await form.isVisible(), false, 'the form closes');
  const jobLink = done.locator('a[data-job-id]');
  const jobId = String(await jobLink.getAttribute('data-job-id'));
  const certId = String(await done.locator('a[data-certificate-id]').getAttribute('data-certificate-id'));
  assert.equal(await done.innerText(), `Certificate web01 is being enrolled with WebServer: job ${jobId}`);
  const job = await cf.job(jobId);
  assert.equal(job.type, 'msca_issue_certificate');
  assert.equal(job.certificate_id, certId);
  assert.equal(await done.locator('a[data-certificate-id]').getAttribute('href'), `/certificates/${certId}?project=default`);
  const finished = await cf.waitJob(jobId, ended, 60000);
  assert.equal(finished.status, 'completed', `${JSON.stringify(finished)}\n${adcs.output().slice(-2000)}`);
  await jobLink.click();
  await page.waitForURL(`${cf.url}/jobs/${jobId}?project=default`);
  await page.locator('#msca-workflow [data-field="step"]').filter({ hasText: 'completed' }).waitFor();
  await page.locator('dl.summary .status-completed').waitFor();
  assert.equal(await page.locator('#msca-workflow [data-field="terminal_reason"]').innerText(), 'issued');
  const cert = await call('GET', `${P}/certificates/${certId}`);
  assert.equal(cert.name, 'web01');
  assert.equal(cert.msca_ca_id, caId);
  assert.equal(cert.template, 'WebServer');
  assert.deepEqual(errors, []);
  await page.close();
});

test('Delete asks first: Keep changes nothing, a CA a certificate uses is refused with the API\'s message, a spare one goes', { timeout: 60000 }, async () => {
  const spare = await call('POST', `${P}/msca-cas`, { name: 'spare-ca', cep_url: adcs.cepUrl, ca_bundle_pem: adcs.caPem,
    auth: { kind: 'username_password', username: 'alice', password: 'alice-password' }, renewal_mode: 'renew_with_current' }, 201);
  const page = await browser.newPage({ viewport: { width: 1360, height: 900 } });
  const errors = collectErrors(page);
  await signIn(page, cf.url, adminToken);
  await open(page);
  const dialog = page.getByRole('dialog');
  await page.getByRole('button', { name: 'Delete corp-ca' }).click();
  await dialog.waitFor();
  assert.equal(await dialog.getByRole('heading').innerText(), 'Delete AD CS CA corp-ca?');
  assert.equal(await dialog.getByRole('button', { name: 'Keep it' }).evaluate((b) => b === document.activeElement), true, 'Keep has the focus');
  await dialog.getByRole('button', { name: 'Keep it' }).click();
  await dialog.waitFor({ state: 'detached' });
  assert.equal((await call('GET', `${P}/msca-cas`)).items.length, 2);

  // corp-ca issued web01: the API refuses (409) and says why.
  const refused = await cf.api('DELETE', `${P}/msca-cas/${caId}`);
  assert.equal(refused.status, 409, refused.text);
  await page.getByRole('button', { name: 'Delete corp-ca' }).click();
  await dialog.getByRole('button', { name: 'Delete CA' }).click();
  const fail = page.locator('main .feedback.error');
  await fail.waitFor();
  assert.equal(await fail.innerText(), `corp-ca: ${refused.body.error.message}`);
  assert.equal((await call('GET', `${P}/msca-cas`)).items.length, 2);

  await page.getByRole('button', { name: 'Delete spare-ca' }).click();
  await dialog.getByRole('button', { name: 'Delete CA' }).click();
  await page.locator('main .feedback.ok').filter({ hasText: 'spare-ca deleted' }).waitFor();
  await page.locator(`#msca-cas tr[data-id="${spare.id}"]`).waitFor({ state: 'detached' });
  await page.locator(`section.msca-ca-card[data-ca-id="${spare.id}"]`).waitFor({ state: 'detached' });
  assert.deepEqual((await call('GET', `${P}/msca-cas`)).items.map((/** @type {any} */ c) => c.name), ['corp-ca']);
  assert.deepEqual(errors, []);
  await page.close();
});

test('the Kerberos fields: principal, realm, password or keytab (one of them), KDC; the body sent and the API\'s answer at its field', { timeout: 60000 }, async () => {
  const page = await browser.newPage({ viewport: { width: 1360, height: 900 } });
  const errors = collectErrors(page);
  await signIn(page, cf.url, adminToken);
  await open(page);
  const form = page.locator('#add-msca-ca');
  await form.getByLabel('Kind', { exact: true }).selectOption('kerberos');
  assert.equal(await form.getByLabel('Username (required)', { exact: true }).count(), 0);
  for (const label of ['Principal (required)', 'Realm (required)', 'Password', 'Keytab (base64)', 'KDC']) await form.getByLabel(label, { exact: true }).waitFor();
  assert.equal(await form.getByLabel('Password', { exact: true }).getAttribute('type'), 'password');
  await form.getByLabel('Name (required)', { exact: true }).fill('krb-ca');
  await form.getByLabel('CEP URL (required)', { exact: true }).fill(adcs.cepUrl.replace('UsernamePassword', 'Kerberos'));
  await form.getByLabel('Principal (required)', { exact: true }).fill('svc-certfleet');
  await form.getByLabel('Realm (required)', { exact: true }).fill('CORP.TEST');
  // Neither a password nor a keytab: said at the password, nothing sent.
  let posts = 0;
  page.on('request', (r) => { if (r.method() === 'POST' && r.url().endsWith('/msca-cas')) ++posts; });
  await form.getByRole('button', { name: 'Add CA' }).click();
  assert.equal(await form.locator('[data-field-error="auth.password"]').innerText(), 'Give the principal\'s password or its keytab.');
  assert.equal(posts, 0);
  await form.getByLabel('Password', { exact: true }).fill('svc-password');
  await form.getByLabel('KDC', { exact: true }).fill('127.0.0.1:1');
  const sent = page.waitForRequest((r) => r.method() === 'POST' && r.url().endsWith('/msca-cas'));
  const answer = page.waitForResponse((r) => r.request().method() === 'POST' && r.url().endsWith('/msca-cas'));
  await form.getByRole('button', { name: 'Add CA' }).click();
  assert.deepEqual((await sent).postDataJSON().auth, { kind: 'kerberos', principal: 'svc-certfleet', realm: 'CORP.TEST', password: 'svc-password', kdc: '127.0.0.1:1' });
  // No KDC answers there: whatever the API says, it is shown at the field it names.
  const r = await answer;
  assert.ok(r.status() >= 400, `${r.status()}`);
  const err = (await r.json()).error;
  const shown = form.locator(`[data-field-error="${err.field}"]`);
  await shown.filter({ hasText: err.message.slice(0, 20) }).waitFor();
  assert.equal(await shown.innerText(), err.message);
  assert.deepEqual((await call('GET', `${P}/msca-cas`)).items.map((/** @type {any} */ c) => c.name), ['corp-ca']);
  assert.deepEqual(errors, []);
  await page.close();
});

test('roles: an operator gets Refresh Policy only; a viewer sees the CAs and templates without a button', async () => {
  for (const [token, role] of /** @type {const} */ ([[operatorToken, 'operator'], [viewerToken, 'viewer']])) {
    const page = await browser.newPage();
    const errors = collectErrors(page);
    await signIn(page, cf.url, token);
    await open(page);
    const card = page.locator(`section.msca-ca-card[data-ca-id="${caId}"]`);
    await card.locator('tr[data-template="WebServer"]').waitFor();
    assert.equal(await page.locator('#add-msca-ca').count(), 0, role);
    assert.equal(await page.locator('[data-action="delete"], [data-action="enroll"]').count(), 0, role);
    assert.equal(await card.getByRole('button', { name: 'Refresh Policy of corp-ca' }).count(), role === 'operator' ? 1 : 0, role);
    assert.deepEqual(errors, []);
    await page.close();
  }
});

test('dark, and at 360 px: no axe violation, no sideways page scroll; screenshots', { timeout: 180000 }, async () => {
  for (const [scheme, phone] of /** @type {const} */ ([['dark', false], ['light', true], ['dark', true]])) {
    const b = await launch({ colorScheme: scheme, ...(phone ? { viewport: { width: 360, height: 740 } } : { viewport: { width: 1360, height: 900 } }) });
    try {
      const page = await b.newPage();
      const errors = collectErrors(page);
      await signIn(page, cf.url, adminToken);
      await open(page);
      const card = page.locator(`section.msca-ca-card[data-ca-id="${caId}"]`);
      await card.locator('tr[data-template="WebServer"]').waitFor();
      const at = `${scheme}${phone ? ' at 360 px' : ''}`;
      assert.deepEqual(await axeProblems(page), [], `list ${at}`);
      if (phone) {
        await card.getByRole('button', { name: 'Enroll ECWebServer', exact: true }).click();
        await card.getByRole('form', { name: 'Enroll with ECWebServer at corp-ca' }).waitFor();
        const wide = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
        assert.ok(wide <= 0, `the page scrolls sideways by ${wide} px at 360 px (${scheme})`);
        const cut = await page.evaluate(() => [...document.querySelectorAll('main button')]
          .filter((el) => { const r = el.getBoundingClientRect(); return r.width > 0 && r.right > innerWidth; }).length);
        assert.equal(cut, 0, `buttons out of view at 360 px (${scheme})`);
        assert.deepEqual(await axeProblems(page), [], `enroll form ${at}`);
        await shot(page, `msca-cas-phone-${scheme}`);
      } else {
        await shot(page, `msca-cas-list-${scheme}`);
        const form = page.locator('#add-msca-ca');
        await form.getByLabel('Name (required)', { exact: true }).fill('corp-ca-2');
        await form.getByLabel('CEP URL (required)', { exact: true }).fill(adcs.cepUrl);
        await form.getByLabel('CA bundle (PEM)', { exact: true }).fill(adcs.caPem);
        await form.getByLabel('Username (required)', { exact: true }).fill('alice');
        await form.getByLabel('Password (required)', { exact: true }).fill('wrong-password');
        await form.getByRole('button', { name: 'Add CA' }).click();
        await form.locator('[data-field-error="auth.password"]').filter({ hasText: 'msca_auth' }).waitFor();
        assert.deepEqual(await axeProblems(page), [], `add form ${at}`);
        await shot(page, `msca-cas-add-${scheme}`);
        await card.getByRole('button', { name: 'Enroll WebServer', exact: true }).click();
        const ef = card.getByRole('form', { name: 'Enroll with WebServer at corp-ca' });
        await ef.getByLabel('Certificate name (required)', { exact: true }).fill('web02');
        await ef.getByLabel('Subject', { exact: true }).fill('CN=web02.corp.test');
        await ef.getByLabel('SANs', { exact: true }).fill('web02.corp.test');
        assert.deepEqual(await axeProblems(page), [], `enroll form ${at}`);
        await shot(page, `msca-cas-enroll-${scheme}`);
      }
      assert.deepEqual(errors, []);
    } finally {
      await b.close();
    }
  }
});
