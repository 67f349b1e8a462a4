// The web UI over HTTPS (issue 19): a server with tls_cert_file / tls_key_file, Chromium trusting
// exactly that certificate's key (--ignore-certificate-errors-spki-list), sign-in through the
// /login page, and the session cookie Secure (with HttpOnly and SameSite=Strict).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash, X509Certificate } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { startCertfleet, launch, collectErrors } from './helpers.mjs';

const execFileP = promisify(execFile);

/** @type {Awaited<ReturnType<typeof startCertfleet>>} */
let cf;
/** @type {Awaited<ReturnType<typeof launch>>} */
let browser;
let certDir = '';
let adminToken = '';

before(async () => {
  certDir = await mkdtemp(join(tmpdir(), 'certfleet-ui-tls-'));
  const certFile = join(certDir, 'tls.pem');
  const keyFile = join(certDir, 'tls.key');
  await execFileP('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
    '-keyout', keyFile, '-out', certFile, '-days', '30', '-subj', '/CN=127.0.0.1',
    '-addext', 'subjectAltName=IP:127.0.0.1']);
  const caPem = await readFile(certFile, 'utf8');
  cf = await startCertfleet({ tls: { certFile, keyFile, caPem } });
  adminToken = await cf.token('admin', { name: 'tls-admin' });
  // Chromium accepts a certificate whose key hashes (SHA-256 of the SubjectPublicKeyInfo) to this.
  const spki = new X509Certificate(caPem).publicKey.export({ type: 'spki', format: 'der' });
  const pin = createHash('sha256').update(spki).digest('base64');
  browser = await launch({ extraArgs: [`--ignore-certificate-errors-spki-list=${pin}`] });
});
after(async () => {
  await browser?.close();
  await cf?.stop();
  if (certDir) await rm(certDir, { recursive: true, force: true });
});

test('over HTTPS the sign-in works and the session cookie is Secure', async () => {
  assert.match(cf.url, /^https:\/\/127\.0\.0\.1:\d+$/);
  const health = await cf.api('GET', '/healthz', undefined, '');
  assert.equal(health.status, 200, health.text);

  const page = await browser.newPage();
  const errors = collectErrors(page);
  await page.goto(`${cf.url}/jobs`);
  await page.waitForURL(/\/login\?next=%2Fjobs/);
  assert.ok(page.url().startsWith('https://'), page.url());
  await page.getByLabel('API token').fill(adminToken);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL(/\/jobs$/);
  await page.getByRole('heading', { name: 'Job Queue' }).waitFor();
  assert.match(await page.locator('.who').innerText(), /tls-admin \(admin\)/);

  const cookie = (await browser.context.cookies(cf.url)).find((c) => c.name === 'certfleet_session');
  assert.ok(cookie, 'the session cookie is set');
  assert.equal(cookie.secure, true, 'Secure over HTTPS');
  assert.equal(cookie.httpOnly, true);
  assert.equal(cookie.sameSite, 'Strict');

  // The signed-in page keeps working over TLS: a job list answer reaches it.
  const job = await cf.enqueue('noop', {}, { token: adminToken, run_at: Date.now() + 3600_000 });
  await page.getByRole('button', { name: 'Refresh' }).click();
  await page.locator(`a[href*="${job.id}"], tr:has-text("noop")`).first().waitFor();
  assert.deepEqual(errors.filter((e) => !/401|Failed to load resource/.test(e)), []);
  await page.close();
});
