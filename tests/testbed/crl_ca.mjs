// A small CA for the UI tests that publishes a CRL: `openssl` makes the CA (P-256) and leaf
// certificates whose CRL distribution point is this module's HTTP server on 127.0.0.1 (or any URL
// the test names, e.g. a closed port), `openssl ca -revoke` + `-gencrl` revoke one, and the
// server answers `GET /ca.crl` with the current CRL in DER. The C++ tests have their own CA
// helpers (tests/testbed/certs.cpp); this one is for the node tests.
import { execFile } from 'node:child_process';
import { createServer } from 'node:http';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export async function startCrlCa() {
  const dir = await mkdtemp(join(tmpdir(), 'certfleet-ui-ca-'));
  const cnf = join(dir, 'ca.cnf');
  await writeFile(join(dir, 'index.txt'), '');
  await writeFile(join(dir, 'crlnumber'), '01\n');
  await writeFile(cnf, [
    '[ ca ]', 'default_ca = cfca', '[ cfca ]', `dir = ${dir}`, 'database = $dir/index.txt', 'new_certs_dir = $dir',
    'certificate = $dir/ca.pem', 'private_key = $dir/ca.key', 'crlnumber = $dir/crlnumber', 'default_md = sha256',
    'default_crl_days = 7', 'unique_subject = no', '',
  ].join('\n'));
  await run('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
    '-keyout', join(dir, 'ca.key'), '-out', join(dir, 'ca.pem'), '-days', '365', '-subj', '/CN=certfleet UI test CA',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign']);
  const caPem = await readFile(join(dir, 'ca.pem'), 'utf8');

  /** @type {Buffer} */
  let crl = Buffer.alloc(0);
  async function publish() {
    await run('openssl', ['ca', '-config', cnf, '-gencrl', '-out', join(dir, 'ca.crl.pem')]);
    await run('openssl', ['crl', '-in', join(dir, 'ca.crl.pem'), '-outform', 'DER', '-out', join(dir, 'ca.crl')]);
    crl = await readFile(join(dir, 'ca.crl'));
  }
  await publish();

  let fetches = 0;
  const server = createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/ca.crl') {
      fetches += 1;
      res.writeHead(200, { 'Content-Type': 'application/pkix-crl', 'Content-Length': crl.length });
      res.end(crl);
      return;
    }
    res.writeHead(404);
    res.end();
  });
  const port = await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const a = server.address();
      resolve(typeof a === 'object' && a ? a.port : 0);
    });
  });
  const crlUrl = `http://127.0.0.1:${port}/ca.crl`;
  let n = 0;

  return {
    caPem,
    crlUrl,
    get fetches() { return fetches; },
    /**
     * A leaf for `name` signed by the CA, its CRL distribution point `cdp` (default: this server).
     * @param {string} name @param {{cdp?: string}} [o]
     * @returns {Promise<{cert_pem: string, key_pem: string, chain_pem: string, file: string}>}
     */
    async leaf(name, o = {}) {
      n += 1;
      const base = join(dir, `leaf${n}`);
      await writeFile(`${base}.ext`, [`subjectAltName=DNS:${name}`, 'basicConstraints=CA:FALSE',
        'keyUsage=critical,digitalSignature', 'extendedKeyUsage=serverAuth', `crlDistributionPoints=URI:${o.cdp ?? crlUrl}`, ''].join('\n'));
      await run('openssl', ['req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
        '-keyout', `${base}.key`, '-out', `${base}.csr`, '-subj', `/CN=${name}`]);
      await run('openssl', ['x509', '-req', '-in', `${base}.csr`, '-CA', join(dir, 'ca.pem'), '-CAkey', join(dir, 'ca.key'),
        '-set_serial', String(1000 + n), '-days', '90', '-sha256', '-extfile', `${base}.ext`, '-out', `${base}.pem`]);
      return { cert_pem: await readFile(`${base}.pem`, 'utf8'), key_pem: await readFile(`${base}.key`, 'utf8'), chain_pem: caPem, file: `${base}.pem` };
    },
    /**
     * Revokes a leaf (its PEM file) with an RFC 5280 reason and publishes the new CRL.
     * @param {string} file @param {string} reason
     */
    async revoke(file, reason) {
      await run('openssl', ['ca', '-config', cnf, '-revoke', file, '-crl_reason', reason]);
      await publish();
    },
    async stop() {
      await new Promise((r) => { server.closeAllConnections(); server.close(() => r(undefined)); });
      await rm(dir, { recursive: true, force: true });
    },
  };
}
