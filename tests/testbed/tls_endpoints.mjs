// Real TLS endpoints on 127.0.0.1 for the node tests: certificates made with the `openssl` CLI in
// a temp dir (a small CA and leaves it signs, or self-signed ones) and `openssl s_server -www`
// serving one of them on a free port (read from its "ACCEPT 127.0.0.1:PORT" line), stopped by
// its PID.
import { execFile, spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/**
 * @typedef {{cert: string, key: string, chain: string | null, cert_pem: string, key_pem: string, chain_pem: string}} CertFiles
 *   file paths, and the PEM texts (chain_pem "" for a self-signed one)
 */

export async function tlsWorkshop() {
  const dir = await mkdtemp(join(tmpdir(), 'certfleet-ui-tls-'));
  let n = 0;
  /** @type {import('node:child_process').ChildProcess[]} */
  const servers = [];
  const ca = { key: join(dir, 'ca.key'), cert: join(dir, 'ca.pem') };
  await run('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
    '-keyout', ca.key, '-out', ca.cert, '-days', '365', '-subj', '/CN=certfleet UI discovery CA',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign']);
  const caPem = await readFile(ca.cert, 'utf8');

  /** @param {string} rsaOrEc @returns {string[]} */
  const keyArgs = (rsaOrEc) => rsaOrEc === 'rsa' ? ['-newkey', 'rsa:2048'] : ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1'];

  /** @param {string} base @param {string | null} chain @returns {Promise<CertFiles>} */
  async function files(base, chain) {
    return { cert: `${base}.pem`, key: `${base}.key`, chain, cert_pem: await readFile(`${base}.pem`, 'utf8'),
      key_pem: await readFile(`${base}.key`, 'utf8'), chain_pem: chain ? await readFile(chain, 'utf8') : '' };
  }

  return {
    dir,
    caPem,
    /**
     * A leaf for `name` signed by the CA (EC P-256, 90 days unless told).
     * @param {string} name @param {{days?: number, key?: 'ec' | 'rsa'}} [o]
     */
    async leaf(name, o = {}) {
      const base = join(dir, `leaf${++n}`);
      await writeFile(`${base}.ext`, [`subjectAltName=DNS:${name}`, 'basicConstraints=CA:FALSE',
        'keyUsage=critical,digitalSignature', 'extendedKeyUsage=serverAuth', ''].join('\n'));
      await run('openssl', ['req', '-new', ...keyArgs(o.key ?? 'ec'), '-nodes', '-keyout', `${base}.key`, '-out', `${base}.csr`, '-subj', `/CN=${name}`]);
      await run('openssl', ['x509', '-req', '-in', `${base}.csr`, '-CA', ca.cert, '-CAkey', ca.key, '-set_serial', String(2000 + n),
        '-days', String(o.days ?? 90), '-sha256', '-extfile', `${base}.ext`, '-out', `${base}.pem`]);
      return files(base, ca.cert);
    },
    /**
     * A self-signed certificate for `name` (RSA 2048 or EC P-256), valid `days` days.
     * @param {string} name @param {{days?: number, key?: 'ec' | 'rsa'}} [o]
     */
    async selfSigned(name, o = {}) {
      const base = join(dir, `self${++n}`);
      await run('openssl', ['req', '-x509', ...keyArgs(o.key ?? 'ec'), '-nodes', '-keyout', `${base}.key`, '-out', `${base}.pem`,
        '-days', String(o.days ?? 90), '-subj', `/CN=${name}`, '-addext', `subjectAltName=DNS:${name}`]);
      return files(base, null);
    },
    /**
     * `openssl s_server -www` on 127.0.0.1 with these files (and its chain sent when it has one).
     * @param {CertFiles} c
     * @returns {Promise<{port: number, endpoint: string, pid: number}>}
     */
    async serve(c) {
      const args = ['s_server', '-accept', '127.0.0.1:0', '-cert', c.cert, '-key', c.key, '-www'];
      if (c.chain) args.push('-cert_chain', c.chain);
      const child = spawn('openssl', args, { stdio: ['ignore', 'pipe', 'pipe'] });
      servers.push(child);
      let out = '';
      const port = await new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`openssl s_server did not say ACCEPT in 10 s:\n${out}`)), 10000);
        const onData = (/** @type {Buffer} */ b) => {
          out += b.toString();
          const m = /ACCEPT 127\.0\.0\.1:(\d+)/.exec(out);
          if (m) { clearTimeout(timer); resolve(Number(m[1])); }
        };
        child.stdout?.on('data', onData);
        child.stderr?.on('data', onData);
        child.once('exit', (code) => { clearTimeout(timer); reject(new Error(`openssl s_server exited (${code}):\n${out}`)); });
      });
      return { port, endpoint: `127.0.0.1:${port}`, pid: /** @type {number} */ (child.pid) };
    },
    async stop() {
      for (const child of servers) {
        if (child.exitCode !== null || child.signalCode !== null) continue;
        const exited = new Promise((r) => child.once('exit', r));
        try { process.kill(/** @type {number} */ (child.pid), 'SIGTERM'); } catch { /* gone */ }
        await exited;
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}
