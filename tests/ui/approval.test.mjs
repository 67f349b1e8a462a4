// Issuance approval in the console (issue 31, docs/approval.md), against a real certfleet and a
// real CA (Debian's pebble): an admin turns the project's issuance_requires_approval on in
// Settings; issue requests made by another admin wait as "awaiting approval" on the Certificates
// list and page; the requester sees why they cannot approve; a second admin approves one (the
// issue job starts, linked, and its page says who asked and who approved) and rejects another (a
// reason is required: an empty one is refused and changes nothing). axe-core on each page, light
// and dark, at 1440 and 360 px. Screenshots: approval-*.png.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startCertfleet, launch, signIn, shot, collectErrors, axe } from './helpers.mjs';
import { startPebble, freePort } from '../testbed/pebble.mjs';

const P = '/api/v1/projects/default';

/** @type {Awaited<ReturnType<typeof startPebble>>} */
let pebble;
/** @type {Awaited<ReturnType<typeof startCertfleet>>} */
let cf;
let requester = '';
let approver = '';
/** @type {{account: string, provider: string}} */
const refs = { account: '', provider: '' };

/** @param {string} name @returns {Promise<string>} the certificate's id */
async function ask(name) {
  const r = await cf.api('POST', `${P}/certificates/issue`, { name, domains: [`${name}.example.test`], acme_account_id: refs.account,
    dns_provider_id: refs.provider, auto_renew: false }, requester);
  assert.equal(r.status, 202, r.text);
  assert.equal(r.body.status, 'awaiting_approval', r.text);
  assert.equal(r.body.job_id, null);
  return r.body.certificate_id;
}

before(async () => {
  pebble = await startPebble();
  // Nothing may ask the host's resolver: a closed loopback port is the resolver, and the manual
  // provider's check_server is another (the approved job stops at awaiting_validation).
  cf = await startCertfleet({ settings: { acme_dns_resolver: `127.0.0.1:${await freePort()}`, acme_allow_list: '127.0.0.1' } });
  requester = await cf.token('admin', { name: 'alice-admin' });
  approver = await cf.token('admin', { name: 'bob-admin' });
  const account = await cf.api('POST', `${P}/acme-accounts`, { name: 'pebble', directory_url: pebble.directoryUrl, terms_agreed: true, ca_bundle_pem: pebble.caPem });
  assert.equal(account.status, 201, account.text);
  const provider = await cf.api('POST', `${P}/dns-providers`, { name: 'by-hand', kind: 'manual', manual: { check_server: `127.0.0.1:${await freePort()}` } });
  assert.equal(provider.status, 201, provider.text);
  refs.account = account.body.id;
  refs.provider = provider.body.id;
});
after(async () => {
  await cf?.stop();
  await pebble?.stop();
});

test('an admin turns issuance approval on in Settings; a bad value is not offered', { timeout: 120000 }, async () => {
  const browser = await launch();
  try {
    const page = await browser.newPage();
    const errors = collectErrors(page);
    await signIn(page, cf.url, approver);
    // A project admin (not a system admin) has Settings: the project's section, no system ones.
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Settings', exact: true }).click();
    const select = page.locator('#project-settings-form select[name="issuance_requires_approval"]');
    await select.waitFor();
    assert.equal(await select.inputValue(), 'off');
    assert.deepEqual(await select.locator('option').allTextContents(), ['off', 'on']);
    assert.match(await page.locator('[data-setting="issuance_requires_approval"] .setting-doc').innerText(), /one of off, on · default off · on: a certificate issue request waits/);
    assert.equal(await page.locator('#system-settings-form').count(), 0);
    await page.locator('#system-settings-note').waitFor();
    await select.selectOption('on');
    await page.getByRole('button', { name: 'Save project settings' }).click();
    await page.locator('.feedback', { hasText: 'Settings saved (issuance_requires_approval)' }).waitFor();
    const now = await cf.api('GET', `${P}/settings`);
    assert.equal(now.body.issuance_requires_approval, 'on');
    assert.deepEqual(await axe(page), []);
    await shot(page, 'approval-settings-light');
    assert.deepEqual(errors, []);
  } finally {
    await browser.close();
  }
});

test('the requester issues from the Certificates list, sees the request wait and why they cannot approve it', { timeout: 120000 }, async () => {
  const browser = await launch();
  try {
    const page = await browser.newPage();
    const errors = collectErrors(page);
    await signIn(page, cf.url, requester);
    await page.goto(`${cf.url}/certificates`);
    /** @param {string} name @param {string} domains @param {string} [screenshot] */
    const issue = async (name, domains, screenshot) => {
      await page.getByRole('button', { name: 'Issue certificate…' }).click();
      const dialog = page.getByRole('dialog', { name: 'Issue a certificate?' });
      await dialog.getByLabel('Name').fill(name);
      await dialog.getByLabel('Domains').fill(domains);
      assert.equal(await dialog.getByLabel('ACME account').inputValue(), refs.account);
      assert.equal(await dialog.getByLabel('DNS provider').inputValue(), refs.provider);
      assert.ok(await dialog.getByLabel('Renew automatically').isChecked());
      if (screenshot) {
        assert.deepEqual(await axe(page), []);
        await shot(page, screenshot);
      }
      await dialog.getByRole('button', { name: 'Issue' }).click();
    };
    // A bad name: the API's message, naming the field; nothing is stored.
    await issue('shop', 'bad_name!.example.test');
    await page.locator('.issue-tool .feedback.error', { hasText: 'domains[0]' }).waitFor();
    assert.equal((await cf.api('GET', `${P}/certificates`)).body.items.filter((/** @type {any} */ c) => c.name === 'shop').length, 0);
    await issue('shop', 'shop.example.test, www.shop.example.test', 'approval-issue-dialog-light');
    const made = page.locator('.issue-tool .feedback.ok', { hasText: 'awaits approval by another admin' }).getByRole('link', { name: 'shop' });
    await made.waitFor();
    const id = String(await made.getAttribute('href')).match(/\/certificates\/([0-9a-f]{24})/)?.[1] ?? '';
    const stored = (await cf.api('GET', `${P}/certificates/${id}`)).body;
    assert.deepEqual(stored.domains, ['shop.example.test', 'www.shop.example.test']);
    assert.equal(stored.status, 'awaiting_approval');
    const tag = page.locator('tr', { hasText: 'shop' }).locator('[data-tag="awaiting_approval"]');
    await tag.waitFor();
    assert.equal(await tag.innerText(), 'awaiting approval');
    assert.deepEqual(await axe(page), []);
    await made.click();
    await page.waitForURL(new RegExp(`/certificates/${id}`));
    await page.locator('#approval-note', { hasText: 'another admin of the project approves or rejects it' }).waitFor();
    assert.equal(await page.getByRole('button', { name: 'Approve' }).count(), 0);
    assert.equal(await page.getByRole('button', { name: 'Reject' }).count(), 0);
    // Nothing issued yet: Renew and Revoke would only fail, so they are not offered.
    assert.equal(await page.getByRole('button', { name: 'Renew' }).count(), 0);
    assert.equal(await page.getByRole('button', { name: 'Revoke' }).count(), 0);
    assert.match(await page.locator('[data-field="approval"]').innerText(), /awaiting approval requested by alice-admin/);
    assert.deepEqual(errors, []);
  } finally {
    await browser.close();
  }
});

for (const scheme of /** @type {const} */ (['light', 'dark'])) {
  for (const phone of [false, true]) {
    test(`another admin approves one request and rejects another (${scheme}, ${phone ? '360 px' : '1440 px'})`, { timeout: 180000 }, async () => {
      const tagName = `${scheme}${phone ? '-phone' : ''}`;
      const yes = await ask(`yes-${tagName}`);
      const no = await ask(`no-${tagName}`);
      const browser = await launch({ colorScheme: scheme, viewport: phone ? { width: 360, height: 740 } : { width: 1440, height: 900 } });
      try {
        const page = await browser.newPage();
        const errors = collectErrors(page);
        await signIn(page, cf.url, approver);
        await page.goto(`${cf.url}/certificates/${yes}`);
        const approve = page.getByRole('button', { name: 'Approve' });
        await approve.waitFor();
        assert.match(await page.locator('[data-field="approval"]').innerText(), /requested by alice-admin/);
        assert.deepEqual(await axe(page), []);
        assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), 'no sideways page scroll');
        await shot(page, `approval-waiting-${tagName}`);

        // Approve: a dialog that names the certificate and who asked; the job is linked.
        await approve.click();
        const dialog = page.getByRole('dialog', { name: `Approve yes-${tagName}?` });
        await dialog.waitFor();
        assert.match(await dialog.innerText(), /requested by alice-admin/);
        await dialog.getByRole('button', { name: 'Approve' }).click();
        const link = page.locator('.feedback', { hasText: 'Approved: issuance started' }).getByRole('link');
        await link.waitFor();
        const after = await cf.api('GET', `${P}/certificates/${yes}`);
        assert.equal(after.body.approval.decision, 'approved');
        assert.equal(after.body.status === 'pending' || after.body.status === 'active' || after.body.status === 'failed', true, after.text);
        const jobId = after.body.last_job_id;
        assert.equal(await link.innerText(), `job ${jobId}`);
        await page.locator('[data-field="approval"]', { hasText: 'Approved by bob-admin' }).waitFor();
        // The job page says who asked and who approved.
        await link.click();
        await page.waitForURL(new RegExp(`/jobs/${jobId}`));
        await page.locator('[data-field="approval"]', { hasText: /Approved by bob-admin, .*requested by alice-admin/ }).waitFor();
        assert.deepEqual(await axe(page), []);
        await shot(page, `approval-job-${tagName}`);

        // Reject: the reason is required; an empty one is refused by the API and changes nothing.
        await page.goto(`${cf.url}/certificates/${no}`);
        await page.getByRole('button', { name: 'Reject' }).click();
        let rejectDialog = page.getByRole('dialog', { name: `Reject no-${tagName}?` });
        await rejectDialog.waitFor();
        await rejectDialog.getByRole('button', { name: 'Reject' }).click();
        await page.locator('.feedback.error', { hasText: 'reason is required' }).waitFor();
        assert.equal((await cf.api('GET', `${P}/certificates/${no}`)).body.status, 'awaiting_approval');
        await page.getByRole('button', { name: 'Reject' }).click();
        rejectDialog = page.getByRole('dialog', { name: `Reject no-${tagName}?` });
        await rejectDialog.getByLabel('Reason').fill('not a name we serve');
        assert.deepEqual(await axe(page), []);
        await shot(page, `approval-reject-dialog-${tagName}`);
        await rejectDialog.getByRole('button', { name: 'Reject' }).click();
        await page.locator('.feedback', { hasText: `Rejected: nothing was issued for no-${tagName}` }).waitFor();
        await page.locator('[data-field="approval"]', { hasText: 'Rejected by bob-admin: not a name we serve' }).waitFor();
        assert.equal(await page.getByRole('button', { name: 'Approve' }).count(), 0);
        const rejected = await cf.api('GET', `${P}/certificates/${no}`);
        assert.equal(rejected.body.status, 'rejected');
        assert.equal(rejected.body.approval.reason, 'not a name we serve');
        await page.goto(`${cf.url}/certificates`);
        await page.locator('tr', { hasText: `no-${tagName}` }).locator('[data-tag="rejected"]').waitFor();
        assert.deepEqual(await axe(page), []);
        await shot(page, `approval-list-${tagName}`);
        assert.deepEqual(errors, []);
      } finally {
        await browser.close();
      }
    });
  }
}
