// Debian's `pebble` (TESTBED.md) for the UI tests: a real ACME CA on 127.0.0.1. Its own HTTPS
// identity (a test CA and a localhost/127.0.0.1 leaf) is made here with `openssl` in a temp dir,
// the listeners take free ports, PEBBLE_VA_NOSLEEP=1 and PEBBLE_WFE_NONCEREJECT=0 keep it fast
// and free of deliberate badNonce answers, and `-dnsserver` points at a closed loopback port
// (no test here needs the CA to see a DNS record). Stopped by its PID (SIGTERM, then SIGKILL).
// The C++ testbed's tests/testbed/pebble.cpp starts it the same way.
import { spawn, execFile } from 'node:child_process';
import { request as httpsRequest } from 'node:https';
import { createServer } from 'node:net';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { supervise } from './child.mjs';

const execFileP = promisify(execFile);
export const pebblePath = process.env.PEBBLE ?? '/usr/bin/pebble';

/** A port that was free a moment ago on 127.0.0.1 (nothing listens on it when this returns). */
export function freePort() {
  return new Promise((res, rej) => {
    const s = createServer();
    s.once('error', rej);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      const port = a && typeof a === 'object' ? a.port : 0;
      s.close(() => res(port));
    });
  });
}

/**
 * A test CA and a leaf for localhost / 127.0.0.1 signed by it (ECDSA P-256), in `dir`.
 * @param {string} dir
 * @returns {Promise<{caPem: string, certFile: string, keyFile: string}>}
 */
async function makeTlsIdentity(dir) {
  const f = (/** @type {string} */ n) => join(dir, n);
  const ossl = (/** @type {string[]} */ args) => execFileP('openssl', args);
  await ossl(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
    '-keyout', f('ca.key'), '-out', f('ca.pem'), '-days', '2', '-subj', '/CN=certfleet test pebble TLS CA',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign']);
  await ossl(['req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
    '-keyout', f('pebble-tls.key'), '-out', f('leaf.csr'), '-subj', '/CN=localhost']);
  await writeFile(f('leaf.ext'), [
    'basicConstraints=critical,CA:FALSE',
    'keyUsage=critical,digitalSignature',
    'extendedKeyUsage=serverAuth',
    'subjectAltName=DNS:localhost,IP:127.0.0.1',
    '',
  ].join('\n'));
  await ossl(['x509', '-req', '-in', f('leaf.csr'), '-CA', f('ca.pem'), '-CAkey', f('ca.key'), '-CAcreateserial',
    '-out', f('leaf.pem'), '-days', '2', '-extfile', f('leaf.ext')]);
  const caPem = await readFile(f('ca.pem'), 'utf8');
  await writeFile(f('pebble-tls.crt'), (await readFile(f('leaf.pem'), 'utf8')) + caPem);
  return { caPem, certFile: f('pebble-tls.crt'), keyFile: f('pebble-tls.key') };
}

/**
 * GET over HTTPS to 127.0.0.1, verifying the server against `ca`: {status, body}; status 0
 * with the reason in body when it failed.
 * @param {string} url @param {string} ca
 * @returns {Promise<{status: number, body: string}>}
 */
export function httpsGet(url, ca) {
  return new Promise((res) => {
    const req = httpsRequest(url, { ca, timeout: 5000 }, (r) => {
      let body = '';
      r.setEncoding('utf8');
      r.on('data', (c) => { body += c; });
      r.on('end', () => res({ status: r.statusCode ?? 0, body }));
    });
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', (e) => res({ status: 0, body: e.message }));
    req.end();
  });
}

/** @param {number} ms */
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * Starts pebble. `env`: more environment for it (e.g. PEBBLE_AUTHZREUSE); `dnsServer`:
 * "127.0.0.1:PORT" where it resolves DNS-01 records (default: a closed loopback port).
 * @param {{env?: Record<string, string>, dnsServer?: string}} [opts]
 * @returns {Promise<{directoryUrl: string, managementUrl: string, caPem: string, pid: number,
 *   rootPem: () => Promise<string>, log: () => string, stop: () => Promise<void>}>}
 */
export async function startPebble(opts = {}) {
  const dir = await mkdtemp(join(tmpdir(), 'certfleet-pebble-'));
  try {
    const tls = await makeTlsIdentity(dir);
    let lastLog = '';
    for (let attempt = 0; attempt < 5; ++attempt) {
      const port = await freePort();
      const mgmt = await freePort();
      const dns = opts.dnsServer ?? `127.0.0.1:${await freePort()}`;
      if (port === mgmt) continue;
      const config = join(dir, 'pebble-config.json');
      await writeFile(config, JSON.stringify({ pebble: {
        listenAddress: `127.0.0.1:${port}`,
        managementListenAddress: `127.0.0.1:${mgmt}`,
        certificate: tls.certFile,
        privateKey: tls.keyFile,
        // Challenge ports of http-01 / tls-alpn-01, which these tests never use.
        httpPort: 5002,
        tlsPort: 5001,
        ocspResponderURL: '',
        externalAccountBindingRequired: false,
      } }));
      const child = spawn(pebblePath, ['-config', config, '-dnsserver', dns], {
        cwd: dir,
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, PEBBLE_VA_NOSLEEP: '1', PEBBLE_WFE_NONCEREJECT: '0', ...(opts.env ?? {}) },
      });
      const { pid, output, running, stop: stopChild } = supervise(child);

      // Ready: it printed its last start-up line, and both listeners answer over TLS (the
      // ports may have been taken by someone else between freePort() and pebble's bind).
      const directoryUrl = `https://127.0.0.1:${port}/dir`;
      const managementUrl = `https://127.0.0.1:${mgmt}`;
      let ready = false;
      for (let i = 0; i < 300 && running(); ++i) {
        if (output().includes('ACME directory available at')) {
          const [d, r] = await Promise.all([httpsGet(directoryUrl, tls.caPem), httpsGet(`${managementUrl}/roots/0`, tls.caPem)]);
          if (d.status === 200 && r.status === 200 && running()) { ready = true; break; }
        }
        await sleep(100);
      }
      if (ready) {
        return {
          directoryUrl,
          managementUrl,
          caPem: tls.caPem,
          pid,
          async rootPem() {
            const r = await httpsGet(`${managementUrl}/roots/0`, tls.caPem);
            if (r.status !== 200) throw new Error(`pebble /roots/0 answered ${r.status}: ${r.body}`);
            return r.body;
          },
          log: output,
          async stop() {
            await stopChild();
            await rm(dir, { recursive: true, force: true });
          },
        };
      }
      lastLog = output();
      await stopChild();
    }
    throw new Error(`pebble did not start:\n${lastLog}`);
  } catch (e) {
    await rm(dir, { recursive: true, force: true });
    throw e;
  }
}
