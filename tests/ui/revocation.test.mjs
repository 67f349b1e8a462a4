// Revocation on the certificate pages, from a real revocation_check job against a real CRL: a CA
// made with `openssl` (tests/testbed/crl_ca.mjs) publishes its CRL on 127.0.0.1; leaves are
// uploaded with the CA as chain: one good, one revoked on the CRL (keyCompromise), one whose CRL
// distribution point is a closed port (status error: "Not checked"), a self-signed one naming no
// CRL or OCSP (unknown), and one uploaded after the check (none yet). The overview's Revocation
// line and the list's tags must say what the API's revocation_check and revocation say, in their
// colours. axe-core on both pages. Screenshots: certificate-revoked-{light,dark}.png,
// certificates-revocation-light.png.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { startCertfleet, launch, signIn, shot, collectErrors, makeCertificate } from './helpers.mjs';
import { startCrlCa } from '../testbed/crl_ca.mjs';
import { freePort } from '../testbed/pebble.mjs';

const axeSource = await readFile(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const P = '/api/v1/projects/default';

/** @type {Awaited<ReturnType<typeof startCrlCa>>} */
let ca;
/** @type {Awaited<ReturnType<typeof startCertfleet>>} */
let cf;
/** @type {Record<string, any>} certificate views by name, after the check */
const certs = {};

/** @param {string} name @param {{cert_pem: string, key_pem: string, chain_pem?: string}} pem */
async function upload(name, pem) {
  const r = await cf.api('POST', `${P}/certificates`, { name, cert_pem: pem.cert_pem, key_pem: pem.key_pem, ...(pem.chain_pem ? { chain_pem: pem.chain_pem } : {}) });
  assert.equal(r.status, 201, r.text);
  return r.body.id;
}

before(async () => {
  ca = await startCrlCa();
  cf = await startCertfleet({ settings: { check_allow_list: '127.0.0.1/32', check_fetch_timeout_s: 5 } });
  const good = await ca.leaf('good.example.test');
  const revoked = await ca.leaf('revoked.example.test');
  const unreachable = await ca.leaf('unreachable.example.test', { cdp: `http://127.0.0.1:${await freePort()}/ca.crl` });
  await ca.revoke(revoked.file, 'keyCompromise');
  /** @type {Record<string, string>} */
  const ids = {
    'www-good': await upload('www-good', good),
    'www-revoked': await upload('www-revoked', revoked),
    'www-unreachable': await upload('www-unreachable', unreachable),
    'www-private': await upload('www-private', await makeCertificate()),
  };
  const job = await cf.enqueue('revocation_check', {});
  await cf.waitJob(job.id, (j) => ['completed', 'failed', 'dead'].includes(j.status), 60000);
  ids['www-later'] = await upload('www-later', await makeCertificate());
  for (const [name, id] of Object.entries(ids)) {
    const r = await cf.api('GET', `${P}/certificates/${id}`);
    assert.equal(r.status, 200, r.text);
    certs[name] = r.body;
  }
  assert.equal(certs['www-good'].revocation_check?.status, 'good', JSON.stringify(certs['www-good'].revocation_check));
  assert.equal(certs['www-revoked'].revocation_check?.status, 'revoked', JSON.stringify(certs['www-revoked'].revocation_check));
  assert.equal(certs['www-revoked'].status, 'revoked');
  assert.equal(certs['www-unreachable'].revocation_check?.status, 'error', JSON.stringify(certs['www-unreachable'].revocation_check));
  assert.equal(certs['www-private'].revocation_check?.status, 'unknown', JSON.stringify(certs['www-private'].revocation_check));
  assert.equal(certs['www-later'].revocation_check, null);
});
after(async () => {
  await cf?.stop();
  await ca?.stop();
});

/** @param {import('playwright-core').Page} page */
async function axe(page) {
  await page.evaluate(axeSource);
  /** @type {{id: string, impact: string, help: string, nodes: {target: string[]}[]}[]} */
  const violations = await page.evaluate(async () => {
    // @ts-ignore axe is the script evaluated above
    const r = await window.axe.run(document, { resultTypes: ['violations'] });
    return r.violations.map((/** @type {any} */ v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((/** @type {any} */ n) => ({ target: n.target })) }));
  });
  return violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.impact} ${v.id} (${v.help}) at ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
}

/** "2026-12-01 22:49:16 UTC", local with its zone, as the UI writes times. @param {string} iso */
async function uiTime(/** @type {import('playwright-core').Page} */ page, iso) {
  return page.evaluate((t) => {
    const d = new Date(t);
    const p = (/** @type {number} */ n) => String(n).padStart(2, '0');
    const zone = new Intl.DateTimeFormat(undefined, { timeZoneName: 'short' }).formatToParts(d).find((x) => x.type === 'timeZoneName')?.value;
    return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}${zone ? ` ${zone}` : ''}`;
  }, iso);
}

/** The overview's Revocation value. @param {import('playwright-core').Page} page @param {string} name */
async function revocationLine(page, name) {
  await page.goto(`${cf.url}/certificates/${certs[name].id}`);
  const line = page.locator('#tab-panel .revocation');
  await line.waitFor();
  const dt = page.locator('#tab-panel dt', { hasText: /^Revocation$/ });
  assert.equal(await dt.count(), 1);
  return line;
}

for (const scheme of /** @type {const} */ (['light', 'dark'])) {
  test(`the overview's Revocation line for each answer (${scheme}); axe-core; screenshots`, { timeout: 120000 }, async () => {
    const browser = await launch({ colorScheme: scheme });
    try {
      const page = await browser.newPage();
      const errors = collectErrors(page);
      await signIn(page, cf.url, cf.ownerToken);
      /** @type {Record<string, string>} */
      const colours = {};

      const good = certs['www-good'].revocation_check;
      let line = await revocationLine(page, 'www-good');
      assert.equal(await line.getAttribute('data-revocation'), 'good');
      assert.equal(good.source, 'crl');
      assert.equal(await line.textContent(),
        `Good (CRL, checked ${await uiTime(page, good.checked_at)}, next update ${await uiTime(page, good.next_update)})`);
      colours.good = await line.locator('.tag').evaluate((e) => getComputedStyle(e).color);
      if (scheme === 'light') assert.deepEqual(await axe(page), []);

      const rv = certs['www-revoked'];
      line = await revocationLine(page, 'www-revoked');
      assert.equal(await line.getAttribute('data-revocation'), 'revoked');
      assert.equal(rv.revocation.reason, 'keyCompromise');
      assert.equal(rv.revocation.source, 'crl');
      assert.equal(await line.textContent(),
        `Revoked (CRL, checked ${await uiTime(page, rv.revocation_check.checked_at)})`);
      assert.equal(rv.revocation_check.source, 'crl');
      colours.revoked = await line.locator('.tag').evaluate((e) => getComputedStyle(e).color);
      assert.equal(await line.evaluate((e) => getComputedStyle(e).color), colours.revoked, 'the whole revoked line is red');
      // The Revoked row: reason, time, seen by CRL; no job link (a check saw it, nobody asked).
      const revokedRow = page.locator('#tab-panel dt', { hasText: /^Revoked$/ }).locator('xpath=following-sibling::dd[1]');
      assert.equal(await revokedRow.textContent(), `keyCompromise, ${await uiTime(page, rv.revocation.revoked_at)}, seen by CRL`);
      assert.equal(await revokedRow.locator('a').count(), 0);
      assert.equal(await page.locator('#tab-panel .tag.outcome-revoked').textContent(), 'revoked');
      assert.deepEqual(await axe(page), []);
      await shot(page, `certificate-revoked-${scheme}`);

      const err = certs['www-unreachable'].revocation_check;
      line = await revocationLine(page, 'www-unreachable');
      assert.equal(await line.getAttribute('data-revocation'), 'error');
      assert.match(err.detail, /^CRL http:\/\/127\.0\.0\.1:\d+\/ca\.crl: /);
      assert.equal(await line.textContent(), `Not checked: ${err.detail} (tried ${await uiTime(page, err.checked_at)})`);
      colours.error = await line.locator('.tag').evaluate((e) => getComputedStyle(e).color);
      if (scheme === 'light') await shot(page, 'certificate-revocation-unchecked-light');

      const unk = certs['www-private'].revocation_check;
      line = await revocationLine(page, 'www-private');
      assert.equal(await line.getAttribute('data-revocation'), 'unknown');
      assert.equal(await line.textContent(), `Unknown: ${unk.detail} (checked ${await uiTime(page, unk.checked_at)})`);
      colours.unknown = await line.locator('.tag').evaluate((e) => getComputedStyle(e).color);

      line = await revocationLine(page, 'www-later');
      assert.equal(await line.getAttribute('data-revocation'), 'none');
      assert.equal(await line.textContent(), 'Not checked yet');

      assert.equal(new Set(Object.values(colours)).size, 4, `four colours: ${JSON.stringify(colours)}`);
      assert.deepEqual(errors, []);
    } finally {
      await browser.close();
    }
  });
}

test('the list tags a revoked certificate red and an unchecked one orange', { timeout: 60000 }, async () => {
  const browser = await launch();
  try {
    const page = await browser.newPage();
    const errors = collectErrors(page);
    await signIn(page, cf.url, cf.ownerToken);
    await page.goto(`${cf.url}/certificates`);
    await page.locator('tbody tr.click-row').first().waitFor();
    /** @param {string} name */
    // The name's cell (an operator's list starts with the selection column).
    const tagsOf = async (name) => page.locator(`tbody tr[data-id="${certs[name].id}"] td:has(a) .tag`).allTextContents();
    assert.deepEqual(await tagsOf('www-revoked'), ['revoked']);
    assert.deepEqual(await tagsOf('www-unreachable'), ['revocation unchecked']);
    assert.equal(await page.locator(`tbody tr[data-id="${certs['www-unreachable'].id}"] .tag`).getAttribute('title'),
      certs['www-unreachable'].revocation_check.detail);
    for (const name of ['www-good', 'www-private', 'www-later']) assert.deepEqual(await tagsOf(name), [], name);
    const red = await page.locator('[data-tag=revoked]').evaluate((e) => getComputedStyle(e).color);
    const orange = await page.locator('[data-tag=revocation-unchecked]').evaluate((e) => getComputedStyle(e).color);
    assert.notEqual(red, orange);
    assert.deepEqual(await axe(page), []);
    await shot(page, 'certificates-revocation-light');
    assert.deepEqual(errors, []);
  } finally {
    await browser.close();
  }
});
