// Shared by the UI tests: a server + browser per test file, sign-in, screenshots, fixtures.
import { execFile } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { startCertfleet } from '../testbed/certfleet_server.mjs';
import { launch } from '../testbed/chromium.mjs';

const execFileP = promisify(execFile);
export const screenshotDir = 'build/ui-screenshots';
const axeSource = await readFile(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

export { startCertfleet, launch };

/** @param {number} ms */
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * Signs in through the /login page.
 * @param {import('playwright-core').Page} page
 * @param {string} base
 * @param {string} token
 */
export async function signIn(page, base, token) {
  await page.context().clearCookies();  // a signed-in /login goes on to /dashboard
  await page.goto(`${base}/login`);
  await page.getByLabel('API token').fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL((u) => !u.pathname.startsWith('/login'));
}

/**
 * A full-page screenshot to build/ui-screenshots/NAME.png.
 * @param {import('playwright-core').Page} page
 * @param {string} name
 */
export async function shot(page, name) {
  await mkdir(screenshotDir, { recursive: true });
  await page.screenshot({ path: join(screenshotDir, `${name}.png`), fullPage: true });
}

/** Page errors and console errors, for asserting a page ran clean (CSP violations show here). */
/** @param {import('playwright-core').Page} page */
export function collectErrors(page) {
  /** @type {string[]} */
  const errors = [];
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  // An HTTP error answer (401 before sign-in, a refused PUT) is logged by the browser as
  // "Failed to load resource"; the page handles those. Anything else (a CSP violation, an
  // exception) counts.
  page.on('console', (m) => { if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) errors.push(`console: ${m.text()}`); });
  return errors;
}

/** A self-signed certificate and key for www.example.test (valid 90 days). */
export async function makeCertificate() {
  const dir = await mkdtemp(join(tmpdir(), 'certfleet-ui-cert-'));
  try {
    await execFileP('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
      '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'), '-days', '90',
      '-subj', '/CN=www.example.test', '-addext', 'subjectAltName=DNS:www.example.test,DNS:example.test']);
    return { cert_pem: await readFile(join(dir, 'cert.pem'), 'utf8'), key_pem: await readFile(join(dir, 'key.pem'), 'utf8') };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * A certificate, a file target that works, an SSH target at a closed port (fails with class
 * network, which retry waves take), and an ed25519 credential for it.
 * @param {Awaited<ReturnType<typeof startCertfleet>>} cf
 * @param {string} baseDir a directory under the setting file_target_base_dirs
 */
export async function catalog(cf, baseDir) {
  const p = '/api/v1/projects/default';
  const pem = await makeCertificate();
  const cert = await cf.api('POST', `${p}/certificates`, { name: 'www-example', ...pem });
  if (cert.status !== 201) throw new Error(`certificate: ${cert.status} ${cert.text}`);
  const { privateKey } = generateKeyPairSync('ed25519');
  const cred = await cf.api('POST', `${p}/credentials`, { name: 'deploy-key', kind: 'ssh_key', private_key_pem: privateKey.export({ type: 'pkcs8', format: 'pem' }) });
  if (cred.status !== 201) throw new Error(`credential: ${cred.status} ${cred.text}`);
  await mkdir(join(baseDir, 'ok'), { recursive: true });
  const ok = await cf.api('POST', `${p}/targets`, { name: 'local-ok', module: 'file', file: { cert_path: join(baseDir, 'ok', 'www.crt'), key_path: join(baseDir, 'ok', 'www.key') } });
  if (ok.status !== 201) throw new Error(`file target: ${ok.status} ${ok.text}`);
  // ssh_allow_list admits no loopback address by default: this fixture's target is on 127.0.0.1.
  const allow = await cf.api('PUT', '/api/v1/settings', { ssh_allow_list: '127.0.0.0/8' });
  if (allow.status !== 200) throw new Error(`ssh_allow_list: ${allow.status} ${allow.text}`);
  const bad = await cf.api('POST', `${p}/targets`, { name: 'web-closed-port', module: 'ssh', ssh: {
    host: '127.0.0.1', port: 1, user: 'deploy', credential_id: cred.body.id,
    host_key: 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl',
    cert_path: '/etc/ssl/www.crt', key_path: '/etc/ssl/www.key' } });
  if (bad.status !== 201) throw new Error(`ssh target: ${bad.status} ${bad.text}`);
  return { certificate: cert.body, okTarget: ok.body, badTarget: bad.body };
}

/**
 * Creates a distribution, executes it and waits until it is no longer running.
 * @param {Awaited<ReturnType<typeof startCertfleet>>} cf
 * @param {string} name
 * @param {string} certificateId
 * @param {string[]} targetIds
 */
export async function runDistribution(cf, name, certificateId, targetIds, ms = 60000) {
  const p = '/api/v1/projects/default';
  const d = await cf.api('POST', `${p}/distributions`, { name, certificate_id: certificateId, target_ids: targetIds });
  if (d.status !== 201) throw new Error(`distribution: ${d.status} ${d.text}`);
  const ex = await cf.api('POST', `${p}/distributions/${d.body.id}/execute`);
  if (ex.status !== 202) throw new Error(`execute: ${ex.status} ${ex.text}`);
  const end = Date.now() + ms;
  for (;;) {
    const g = await cf.api('GET', `${p}/distributions/${d.body.id}`);
    if (g.body.status !== 'running') return { distribution: g.body, execute: ex.body };
    if (Date.now() > end) throw new Error(`distribution ${name} still running: ${g.text}`);
    await sleep(100);
  }
}

export { mkdtemp, rm, tmpdir, join };

/**
 * axe-core's violations on the page as it is now, every impact.
 * @param {import('playwright-core').Page} page
 * @returns {Promise<{id: string, impact: string, help: string, nodes: {target: string[]}[]}[]>}
 */
export async function axe(page) {
  await page.evaluate(axeSource);
  return page.evaluate(async () => {
    // @ts-ignore axe is the script evaluated above
    const r = await window.axe.run(document, { resultTypes: ['violations'] });
    return r.violations.map((/** @type {any} */ v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((/** @type {any} */ n) => ({ target: n.target })) }));
  });
}
