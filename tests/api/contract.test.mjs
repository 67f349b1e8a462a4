// The OpenAPI document the server serves (GET /api/v1/openapi.json) is true to the server: one
// end-to-end scenario calls every operation of it — with a 2xx answer wherever this machine can
// give one (real certificates from openssl, a file target, a local webhook sink, a lenient
// pebble ACME CA with a manual DNS provider, a loopback RDAP registry, a TLS endpoint to
// discover) — and the main errors (401, 403, 404, 400 for a malformed id, 405, 415, a missing
// member, an unknown or bad query parameter), all through Stoplight Prism's validating proxy.
// Prism compares each request and each answer with the document and reports what does not match
// in the `sl-violations` header. A request made wrong on purpose (`bad`) may break the request
// side; nothing may break the response side, and every other exchange must be clean. At the end:
// no unexpected violation (listed by operation), no unexpected status, every operation called.
// Inputs docs/api.md allows are sent in their less common forms too (an integer setting as a
// numeric string, a list of contact addresses, a fractional failure_tolerance, a rule template
// object), so a request schema narrower than the server shows up as a violation.
// CONTRACT_DUMP=FILE writes every exchange ({method, pattern, path, status, body}) there.
// Malformed JSON and duplicate keys go straight to the server (Prism hangs on the first and
// drops the second).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFile } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { createServer as createHttpServer } from 'node:http';
import { createServer as createTcpServer } from 'node:net';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { startCertfleet } from '../testbed/certfleet_server.mjs';
import { supervise } from '../testbed/child.mjs';
import { startPebble, freePort } from '../testbed/pebble.mjs';
import { startMscaServer } from '../testbed/msca_server.mjs';
import { startDnsTxtServer } from '../testbed/dns_txt_server.mjs';
import { startRdapServer } from '../testbed/rdap_server.mjs';
import { tlsWorkshop } from '../testbed/tls_endpoints.mjs';

const execFileP = promisify(execFile);

/**
 * A copy of the document where every object schema reached from an answer (not a request body)
 * that lists its properties and says nothing of others refuses others.
 * @param {any} doc
 * @returns {any}
 */
function closeAnswerSchemas(doc) {
  const copy = structuredClone(doc);
  const schemas = copy.components?.schemas ?? {};
  /** @param {any} s */
  const close = (s) => {
    if (!s || typeof s !== 'object') return;
    if (Array.isArray(s)) { s.forEach(close); return; }
    if (s.properties && s.additionalProperties === undefined) s.additionalProperties = false;
    for (const v of Object.values(s)) close(v);
  };
  for (const [name, schema] of Object.entries(schemas)) if (!name.endsWith('_body')) close(schema);
  return copy;
}
const prismBin = resolve('node_modules/.bin/prism');
const P = '/api/v1/projects/default';
const wsRoute = '/api/v1/projects/{p}/jobs/{id}/logs/stream';
const unknownId = '0123456789abcdef01234567';
const methods = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options', 'trace'];
const day = 86400000;

/** @typedef {{location: string[], severity: string, code?: string | number, message: string}} Violation */
/**
 * @typedef {{method: string, path: string, pattern: string | null, operation: string | null,
 *   status: number, headers: Record<string, string>, text: string, body: any,
 *   violations: Violation[], bad: boolean, direct: boolean}} Exchange
 *   operation: "METHOD /template" when the document has that method on the path's template
 */
/**
 * @typedef {{body?: unknown, raw?: string, token?: string, headers?: Record<string, string>,
 *   bad?: boolean, expect?: number | number[], direct?: boolean}} CallOptions
 *   body: sent as JSON; raw: sent as is (Content-Type from headers); token: '' for none, default
 *   the owner's; expect: the status(es) the scenario expects; direct: to the server, not Prism
 */

/** @param {number} ms */
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * A self-signed ECDSA P-256 certificate for `name` and its key (90 days), from the openssl CLI.
 * @param {string} dir @param {string} name @param {string} file the files' base name in dir
 */
async function makeCertificate(dir, name, file) {
  const key = join(dir, `${file}.key`);
  const cert = join(dir, `${file}.pem`);
  await execFileP('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
    '-keyout', key, '-out', cert, '-days', '90', '-subj', `/CN=${name}`, '-addext', `subjectAltName=DNS:${name}`]);
  return { cert_pem: await readFile(cert, 'utf8'), key_pem: await readFile(key, 'utf8') };
}

/**
 * An HTTP server on 127.0.0.1 that answers 200 {} to everything (a webhook receiver).
 * @returns {Promise<{url: string, received: string[], stop: () => Promise<void>}>}
 */
async function startSink() {
  /** @type {string[]} */
  const received = [];
  const server = createHttpServer((req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      received.push(`${req.method} ${req.url} ${body.slice(0, 200)}`);
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end('{}');
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', () => r(undefined)));
  const a = server.address();
  const port = a && typeof a === 'object' ? a.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    stop: () => new Promise((r) => { server.closeAllConnections(); server.close(() => r(undefined)); }),
  };
}

/**
 * A TCP port on 127.0.0.1 that nothing listens on (bound, then closed): connecting is refused.
 * @returns {Promise<number>}
 */
async function closedPort() {
  const s = createTcpServer();
  await new Promise((r) => s.listen(0, '127.0.0.1', () => r(undefined)));
  const a = s.address();
  await new Promise((r) => s.close(() => r(undefined)));
  return a && typeof a === 'object' ? a.port : 1;
}

/**
 * Starts `prism proxy DOC UPSTREAM` on 127.0.0.1 and waits for "Prism is listening".
 * @param {string} doc @param {string} upstream
 */
async function startPrism(doc, upstream) {
  const port = await freePort();
  const child = spawn(prismBin, ['proxy', doc, upstream, '-h', '127.0.0.1', '-p', String(port), '--cors=false'],
    { stdio: ['ignore', 'pipe', 'pipe'] });
  const { output, running, stop } = supervise(child);
  const end = Date.now() + 60000;
  while (!output().includes('Prism is listening')) {
    if (!running()) throw new Error(`prism exited before listening:\n${output()}`);
    if (Date.now() > end) { await stop(); throw new Error(`prism did not listen in 60 s:\n${output()}`); }
    await sleep(50);
  }
  return { url: `http://127.0.0.1:${port}`, stop, log: output };
}

/**
 * The document's path templates, most literal first, each with its regex and methods.
 * @param {any} doc
 */
function templatesOf(doc) {
  return Object.entries(/** @type {Record<string, any>} */ (doc.paths)).map(([template, item]) => ({
    template,
    re: new RegExp(`^${template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+')}$`),
    params: (template.match(/\{/g) ?? []).length,
    methods: new Set(Object.keys(item).filter((k) => methods.includes(k)).map((m) => m.toUpperCase())),
  })).sort((a, b) => a.params - b.params);
}

/**
 * Groups violations by operation, counting repeats, for the assertion message.
 * @param {{operation: string, v: Violation, status: number}[]} list
 */
function report(list) {
  /** @type {Map<string, Map<string, number>>} */
  const byOp = new Map();
  for (const { operation, v, status } of list) {
    const lines = byOp.get(operation) ?? new Map();
    const line = `[${v.severity}] ${v.location.join('.')}: ${v.message} (answer ${status})`;
    lines.set(line, (lines.get(line) ?? 0) + 1);
    byOp.set(operation, lines);
  }
  return [...byOp].sort(([a], [b]) => a.localeCompare(b))
    .map(([op, lines]) => `${op}\n${[...lines].map(([l, n]) => `    ${l}${n > 1 ? ` ×${n}` : ''}`).join('\n')}`).join('\n');
}

test('every operation of the served OpenAPI document, answers and errors, passes Prism\'s validating proxy', { timeout: 300000 }, async (t) => {
  const started = Date.now();
  const dir = await mkdtemp(join(tmpdir(), 'certfleet-contract-'));
  const filesBase = join(dir, 'files');
  await mkdir(join(filesBase, 'www'), { recursive: true });
  await mkdir(join(filesBase, 'slow'), { recursive: true });

  /** @type {Exchange[]} */
  const exchanges = [];
  /** @type {string[]} */
  const statusProblems = [];
  /** @type {Array<() => Promise<unknown>>} */
  const cleanups = [];

  try {
    // The world around the server, all on 127.0.0.1, started side by side.
    const [pebble, dns, sink, tls, uploaded, renewed, closed, adcs] = await Promise.all([
      startPebble({ env: { PEBBLE_VA_ALWAYS_VALID: '1' } }),
      startDnsTxtServer(),
      startSink(),
      tlsWorkshop(),
      makeCertificate(dir, 'www.contract.test', 'www-v1'),
      makeCertificate(dir, 'www.contract.test', 'www-v2'),
      closedPort(),
      startMscaServer(),
    ]);
    cleanups.push(() => pebble.stop(), () => dns.stop(), () => sink.stop(), () => tls.stop(), () => adcs.stop());
    const rdap = await startRdapServer({ 'contract-watch.test': { expires: new Date(Date.now() + 300 * day), registrar: 'Example Registrar, Inc.' } });
    cleanups.push(() => rdap.stop());
    const bootstrap = await rdap.bootstrapFile(join(dir, 'dns.json'), ['test']);
    const appLeaf = await tls.leaf('app.contract.test');
    const appEndpoint = (await tls.serve(appLeaf)).endpoint;
    const cf = await startCertfleet({ processSettings: { rdap_bootstrap_file: bootstrap } });
    cleanups.push(() => cf.stop());
    const [viewer, operator] = [await cf.token('viewer', { name: 'contract-viewer' }), await cf.token('operator', { name: 'contract-operator' })];

    // The document, as the server serves it, is what Prism checks against.
    const served = await cf.api('GET', '/api/v1/openapi.json');
    assert.equal(served.status, 200, served.text);
    const doc = served.body;
    const docFile = join(dir, 'openapi.json');
    // The served answers are open (a later version may add members); Prism gets a copy whose
    // answer schemas are closed, so a member the document does not describe is a violation.
    await writeFile(docFile, JSON.stringify(closeAnswerSchemas(doc)));
    // Redocly's recommended rules over the served document (redocly.yaml): no error, no warning.
    const servedFile = join(dir, 'served-openapi.json');
    await writeFile(servedFile, served.text);
    const lint = await execFileP(resolve('node_modules/.bin/redocly'),
      ['lint', servedFile, '--config', resolve('redocly.yaml'), '--format=json'],
      { env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' }, maxBuffer: 1 << 24 })
      .catch((/** @type {any} */ e) => e);
    const lintReport = JSON.parse(lint.stdout);
    assert.deepEqual({ errors: lintReport.totals.errors, warnings: lintReport.totals.warnings }, { errors: 0, warnings: 0 },
      (lintReport.problems ?? []).map((/** @type {any} */ p) => `${p.ruleId}: ${p.message} at ${p.location?.[0]?.pointer}`).join('\n'));
    const templates = templatesOf(doc);
    const prism = await startPrism(docFile, cf.url);
    cleanups.push(() => prism.stop());
    t.diagnostic(`set-up took ${Date.now() - started} ms`);

    /**
     * One request through Prism (or straight to the server with `direct`), recorded.
     * @param {string} method @param {string} path @param {CallOptions} [o]
     * @returns {Promise<Exchange>}
     */
    async function call(method, path, o = {}) {
      /** @type {Record<string, string>} */
      const headers = {};
      const token = o.token ?? cf.ownerToken;
      if (token) headers.Authorization = `Bearer ${token}`;
      /** @type {string | undefined} */
      let payload;
      if (o.raw !== undefined) payload = o.raw;
      else if (o.body !== undefined) { payload = JSON.stringify(o.body); headers['Content-Type'] = 'application/json'; }
      Object.assign(headers, o.headers ?? {});
      const res = await fetch((o.direct ? cf.url : prism.url) + path, { method, headers, body: payload, redirect: 'manual' });
      const text = await res.text();
      let body = null;
      try { body = text ? JSON.parse(text) : null; } catch { body = null; }
      /** @type {Violation[]} */
      let violations = [];
      const sl = res.headers.get('sl-violations');
      if (sl) {
        try { violations = JSON.parse(sl); } catch { violations = [{ location: ['sl-violations'], severity: 'Error', message: `unparsable header: ${sl}` }]; }
      }
      const bare = path.split('?')[0];
      const found = templates.filter((x) => x.re.test(bare));
      const withMethod = found.find((x) => x.methods.has(method));
      const pattern = (withMethod ?? found[0])?.template ?? null;
      /** @type {Exchange} */
      const x = {
        method, path, pattern, operation: withMethod ? `${method} ${withMethod.template}` : null,
        status: res.status, headers: Object.fromEntries(res.headers), text, body, violations,
        bad: o.bad ?? false, direct: o.direct ?? false,
      };
      exchanges.push(x);
      if (o.expect !== undefined) {
        const want = Array.isArray(o.expect) ? o.expect : [o.expect];
        if (!want.includes(x.status)) statusProblems.push(`${method} ${path}: ${x.status}, expected ${want.join(' or ')}: ${text.slice(0, 400)}`);
      }
      return x;
    }

    /**
     * The member `key` of an answer, or an error saying which call did not give it.
     * @param {Exchange} x @param {string} key
     * @returns {any}
     */
    function need(x, key) {
      const v = x.body?.[key];
      if (v === undefined || v === null) throw new Error(`${x.method} ${x.path} answered ${x.status} without ${key}: ${x.text.slice(0, 600)}\n${statusProblems.join('\n')}`);
      return v;
    }

    /**
     * Polls a job (straight to the server, not recorded) until `pred` holds.
     * @param {string} id @param {(j: any) => boolean} pred @param {number} [ms]
     */
    const waitJob = (id, pred, ms = 30000) => cf.waitJob(id, pred, ms);
    /** @param {any} j */
    const finished = (j) => ['completed', 'dead', 'cancelled'].includes(j.status);

    /**
     * Polls a distribution (straight to the server) until it is not running.
     * @param {string} id
     */
    async function waitDistribution(id, ms = 30000) {
      const end = Date.now() + ms;
      for (;;) {
        const r = await cf.api('GET', `${P}/distributions/${id}`);
        if (r.body?.status !== 'running') return r.body;
        if (Date.now() > end) throw new Error(`distribution ${id} still running: ${r.text}`);
        await sleep(100);
      }
    }

    // --- Health, metrics, the document itself.
    await call('GET', '/healthz', { token: '', expect: 200 });
    await call('GET', '/readyz', { token: '', expect: 200 });
    await call('GET', '/metrics', { token: '', expect: 200 });
    await call('GET', '/api/v1/openapi.json', { token: viewer, expect: 200 });

    // --- System settings (a system-admin token: the owner's), workers.
    await call('GET', '/api/v1/settings', { expect: 200 });
    await call('GET', '/api/v1/settings/schema', { expect: 200 });
    await call('PUT', '/api/v1/settings', { expect: 200, body: {
      file_target_base_dirs: filesBase,
      egress_allow_list: '127.0.0.1/32',
      ssh_allow_list: '127.0.0.1/32',
      acme_allow_list: '127.0.0.1',
      msca_allow_list: '127.0.0.1',
      acme_dns_resolver: `127.0.0.1:${closed}`,
      check_allow_list: '127.0.0.1/32',
      domain_whois_server: '',
      discovery_allow_list: '127.0.0.1/32',
    } });
    await call('PUT', '/api/v1/settings', { body: { jobs_page_size_default: 30 }, expect: 200 });
    // docs/api.md: "an integer setting takes a number or a numeric string".
    await call('PUT', '/api/v1/settings', { body: { jobs_page_size_default: '30' }, expect: 200 });
    await call('GET', '/api/v1/workers', { expect: 200 });

    // --- Projects.
    await call('GET', '/api/v1/projects', { token: viewer, expect: 200 });
    await call('POST', '/api/v1/projects', { body: { name: 'contract-scratch' }, expect: 201 });
    await call('DELETE', '/api/v1/projects/contract-scratch', { expect: 200 });
    // Tokens: create (default and never-expiring lifetimes), list, revoke; the made token works.
    const made = await call('POST', `${P}/tokens`, { body: { name: 'contract-ci', role: 'operator', ttl_s: 3600 }, expect: 201 });
    await call('POST', `${P}/tokens`, { body: { name: 'contract-default-ttl', role: 'viewer' }, expect: 201 });
    await call('POST', `${P}/tokens`, { body: { name: 'contract-forever', role: 'viewer', ttl_s: 0 }, expect: 201 });
    await call('GET', `${P}/jobs`, { token: need(made, 'token'), expect: 200 });
    await call('GET', `${P}/tokens`, { expect: 200 });
    await call('POST', `${P}/tokens`, { body: { name: 'x', role: 'root' }, bad: true, expect: 400 });
    await call('DELETE', `${P}/tokens/${need(made, 'id')}`, { expect: 200 });
    await call('DELETE', `${P}/tokens/${made.body.id}`, { expect: 409 });

    // --- Sessions: sign in with a token, then the cookie and the CSRF token.
    const signIn = await call('POST', '/api/v1/session', { token: '', body: { token: operator }, expect: 201 });
    const cookie = /certfleet_session=[^;]+/.exec(signIn.headers['set-cookie'] ?? '')?.[0] ?? '';
    assert.ok(cookie, `POST /api/v1/session set no certfleet_session cookie: ${JSON.stringify(signIn.headers)}`);
    const csrf = need(signIn, 'csrf_token');
    await call('GET', '/api/v1/session', { token: '', headers: { Cookie: cookie }, expect: 200 });
    await call('DELETE', '/api/v1/session', { token: '', headers: { Cookie: cookie, 'X-CSRF-Token': csrf }, expect: 204 });

    // --- Jobs.
    const noop = await call('POST', `${P}/jobs`, { body: { type: 'noop', payload: { ms: 0, log: true }, idempotency_key: 'contract-noop' }, expect: 201 });
    const noopId = need(noop, 'id');
    await call('POST', `${P}/jobs`, { body: { type: 'noop', payload: { ms: 0, log: true }, idempotency_key: 'contract-noop' }, expect: 200 });
    await waitJob(noopId, finished);
    await call('GET', `${P}/jobs/${noopId}`, { token: viewer, expect: 200 });
    await call('GET', `${P}/dashboard`, { token: viewer, expect: 200 });
    await call('GET', `${P}/jobs/${noopId}/logs?after=0&limit=10`, { token: viewer, expect: 200 });
    await call('GET', `${P}/jobs?status=completed&type=noop&page_size=5`, { token: viewer, expect: 200 });
    await call('GET', `${P}/jobs`, { token: viewer, expect: 200 });
    await call('POST', `${P}/jobs/${noopId}/retry`, { expect: 409 });
    const doomed = await call('POST', `${P}/jobs`, { body: { type: 'noop', payload: { fail_times: 1, permanent: true } }, expect: 201 });
    await waitJob(need(doomed, 'id'), (j) => j.status === 'dead');
    await call('POST', `${P}/jobs/${doomed.body.id}/retry`, { expect: 200 });
    const later = await call('POST', `${P}/jobs`, { body: { type: 'noop', payload: {}, run_at: Date.now() + 3600000 }, expect: 201 });
    await call('POST', `${P}/jobs/${need(later, 'id')}/cancel`, { expect: 200 });
    await call('POST', `${P}/jobs/${later.body.id}/cancel`, { expect: 409 });
    const laterIso = await call('POST', `${P}/jobs`, { body: { type: 'noop', run_at: new Date(Date.now() + 3600000).toISOString() }, expect: 201 });
    await call('POST', `${P}/jobs/${need(laterIso, 'id')}/cancel`, { expect: 200 });
    await call('POST', `${P}/jobs/${noopId}/validate-dns`, { token: operator, expect: 409 });

    // --- Credentials.
    const password = await call('POST', `${P}/credentials`, { body: { name: 'hook-secret', kind: 'password', password: 's3cret-for-hmac' }, expect: 201 });
    const { privateKey } = generateKeyPairSync('ed25519');
    const sshKey = await call('POST', `${P}/credentials`, { body: { name: 'deploy-key', kind: 'ssh_key', private_key_pem: privateKey.export({ type: 'pkcs8', format: 'pem' }) }, expect: 201 });
    await call('GET', `${P}/credentials`, { token: viewer, expect: 200 });
    await call('GET', `${P}/credentials/${need(password, 'id')}`, { token: viewer, expect: 200 });

    // --- Certificates (uploaded).
    const cert = await call('POST', `${P}/certificates`, { body: { name: 'www-contract', ...uploaded }, expect: 201 });
    const certId = need(cert, 'id');
    await call('GET', `${P}/certificates?page=1&page_size=10`, { token: viewer, expect: 200 });
    await call('GET', `${P}/certificates/${certId}`, { token: viewer, expect: 200 });
    await call('POST', `${P}/certificates/${certId}/versions`, { body: renewed, expect: 201 });
    await call('POST', `${P}/certificates/${certId}/renew`, { token: operator, expect: 409 });
    await call('POST', `${P}/certificates/${certId}/revoke`, { body: { reason: 'superseded' }, expect: 409 });

    // --- Targets: file, webhook, ssh (at a closed port).
    const fileTarget = await call('POST', `${P}/targets`, { expect: 201, body: { name: 'local-www', module: 'file',
      file: { cert_path: join(filesBase, 'www', 'www.crt'), key_path: join(filesBase, 'www', 'www.key'), chain_path: join(filesBase, 'www', 'chain.pem') } } });
    // A delivery that takes 2 s and then fails (its post command exits 1): a run long enough to cancel.
    const slowTarget = await call('POST', `${P}/targets`, { expect: 201, body: { name: 'local-slow', module: 'file',
      file: { cert_path: join(filesBase, 'slow', 'www.crt'), key_path: join(filesBase, 'slow', 'www.key'), post_command: "/bin/sh -c 'sleep 2; exit 1'" } } });
    const hookTarget = await call('POST', `${P}/targets`, { expect: 201, body: { name: 'hook-receiver', module: 'webhook',
      webhook: { url: `${sink.url}/deliver`, secret_credential_id: password.body.id, allow_plain_http: true } } });
    const sshTarget = await call('POST', `${P}/targets`, { expect: 201, body: { name: 'ssh-closed', module: 'ssh', ssh: {
      host: '127.0.0.1', port: closed, user: 'deploy', credential_id: need(sshKey, 'id'),
      host_key: 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl',
      cert_path: '/etc/ssl/www.crt', key_path: '/etc/ssl/www.key' },
    validate: { tls: { host: '127.0.0.1', port: 443, sni: 'www.contract.test' } } } });
    await call('GET', `${P}/targets`, { token: viewer, expect: 200 });
    await call('GET', `${P}/targets/${need(fileTarget, 'id')}`, { token: viewer, expect: 200 });
    await call('POST', `${P}/targets/${need(sshTarget, 'id')}/scan-host-key`, { token: operator, expect: 502 });
    await call('POST', `${P}/targets/${fileTarget.body.id}/scan-host-key`, { token: operator, expect: 400 });
    // The bulk import: JSON lines stored; CSV whose rows are refused (an unknown module), each by its line.
    /** @param {string} name */
    const importLine = (name) => JSON.stringify({ name, module: 'webhook',
      webhook: { url: `${sink.url}/deliver`, secret_credential_id: password.body.id, allow_plain_http: true } });
    const imported = await call('POST', `${P}/targets:import`, { expect: 201, raw: `${importLine('bulk-1')}\n${importLine('bulk-2')}\n`,
      headers: { 'Content-Type': 'application/x-ndjson' } });
    await call('POST', `${P}/targets:import`, { expect: 400, raw: 'name,module\nbulk-3,ftp\nbulk-4,gopher\n',
      headers: { 'Content-Type': 'text/csv' } });

    // --- Notification channels and rules.
    const hook = await call('POST', `${P}/notification-channels`, { expect: 201, body: { name: 'ops-hook', kind: 'webhook',
      url: `${sink.url}/notify`, secret_credential_id: password.body.id } });
    const mail = await call('POST', `${P}/notification-channels`, { expect: 201, body: { name: 'ops-mail', kind: 'email',
      email: { host: '127.0.0.1', port: closed, starttls: false, from: 'certfleet@contract.test', to: ['ops@contract.test'] } } });
    await call('GET', `${P}/notification-channels`, { token: viewer, expect: 200 });
    await call('GET', `${P}/notification-channels/${need(hook, 'id')}`, { token: viewer, expect: 200 });
    const tested = await call('POST', `${P}/notification-channels/${hook.body.id}/test`, { expect: 200 });
    if (tested.body?.delivered !== true) statusProblems.push(`the channel test was not delivered to the local sink: ${tested.text}`);
    const rule = await call('POST', `${P}/notification-rules`, { expect: 201, body: { event: 'distribution.finished', channel_id: hook.body.id } });
    // template: {"subject"?, "body"?} for email, Slack and Teams channels.
    const mailRule = await call('POST', `${P}/notification-rules`, { expect: 201, body: { event: 'certificate.expiring', channel_id: need(mail, 'id'),
      template: { subject: 'expiring soon', body: 'a certificate expires soon' } } });
    await call('GET', `${P}/notification-rules`, { token: viewer, expect: 200 });
    await call('GET', `${P}/notification-rules/${need(rule, 'id')}`, { token: viewer, expect: 200 });

    // --- Domains (the loopback RDAP registry answers for .test).
    const domain = await call('POST', `${P}/domains`, { body: { name: 'contract-watch.test' }, expect: 201 });
    await call('GET', `${P}/domains`, { token: viewer, expect: 200 });
    await call('GET', `${P}/domains/${need(domain, 'id')}`, { token: viewer, expect: 200 });
    const domainCheck = await call('POST', `${P}/domains/${domain.body.id}/check`, { token: operator, expect: 202 });

    // --- Discovery: one TLS endpoint of ours; its certificate is found, then imported.
    const source = await call('POST', `${P}/discovery-sources`, { body: { name: 'loopback', endpoints: [appEndpoint], sni: ['app.contract.test'] }, expect: 201 });
    await call('GET', `${P}/discovery-sources`, { token: viewer, expect: 200 });
    await call('GET', `${P}/discovery-sources/${need(source, 'id')}`, { token: viewer, expect: 200 });
    const scan = await call('POST', `${P}/discovery-sources/${source.body.id}/run`, { token: operator, expect: 202 });
    await waitJob(need(scan, 'job_id'), finished);
    const found = await call('GET', `${P}/discovered-certificates?source=${source.body.id}`, { token: viewer, expect: 200 });
    const discovered = found.body?.items?.[0];
    /** @type {string | null} */
    let importedId = null;
    if (discovered) {
      await call('GET', `${P}/discovered-certificates/${discovered.id}`, { token: viewer, expect: 200 });
      const imported = await call('POST', `${P}/discovered-certificates/${discovered.id}/import`, { expect: 201,
        body: { name: 'app-imported', key_pem: appLeaf.key_pem, chain_pem: appLeaf.chain_pem } });
      importedId = imported.body?.id ?? null;
    } else {
      statusProblems.push(`discovery found nothing at ${appEndpoint}: ${found.text}`);
    }
    await call('GET', `${P}/discovered-certificates/${unknownId}`, { token: viewer, expect: 404 });
    await call('POST', `${P}/discovered-certificates/${unknownId}/import`, { expect: 404, body: { name: 'nothing', key_pem: appLeaf.key_pem } });

    // --- ACME: an account at the lenient pebble, a manual DNS provider, issue, validate, renew, revoke.
    // contact_email: "an address or a list of at most 10" (docs/api.md).
    const account = await call('POST', `${P}/acme-accounts`, { expect: 201, body: { name: 'pebble', directory_url: pebble.directoryUrl,
      terms_agreed: true, ca_bundle_pem: pebble.caPem, contact_email: ['ops@contract.test'] } });
    await call('GET', `${P}/acme-accounts`, { token: viewer, expect: 200 });
    await call('GET', `${P}/acme-accounts/${need(account, 'id')}`, { token: viewer, expect: 200 });
    const provider = await call('POST', `${P}/dns-providers`, { body: { name: 'by-hand', kind: 'manual', manual: { check_server: dns.server } }, expect: 201 });
    await call('GET', `${P}/dns-providers`, { token: viewer, expect: 200 });
    await call('GET', `${P}/dns-providers/${need(provider, 'id')}`, { token: viewer, expect: 200 });
    const issue = await call('POST', `${P}/certificates/issue`, { expect: 202, body: { name: 'shop', domains: ['shop.contract.test'],
      acme_account_id: account.body.id, dns_provider_id: provider.body.id, key_type: 'ecdsa-p256', auto_renew: false } });
    const acmeCertId = need(issue, 'certificate_id');
    const prepared = await waitJob(need(issue, 'job_id'), finished, 60000);
    for (const c of prepared.workflow?.manual_challenges ?? []) dns.set(c.fqdn, c.value);
    const asked = await call('POST', `${P}/jobs/${issue.body.job_id}/validate-dns`, { token: operator, expect: 202 });
    const validated = await waitJob(need(asked, 'job_id'), finished, 60000);
    if (validated.status !== 'completed') statusProblems.push(`the ACME validation job ended ${validated.status}: ${JSON.stringify(validated).slice(0, 600)}`);
    await call('GET', `${P}/certificates/${acmeCertId}`, { token: viewer, expect: 200 });
    await call('POST', `${P}/certificates/${acmeCertId}/renew`, { token: operator, expect: 202 });
    // The same certificate in bulk: the renewal just queued answers (created: false).
    await call('POST', `${P}/certificates/renew`, { token: operator, expect: 202, body: { certificate_ids: [acmeCertId] } });
    await call('POST', `${P}/certificates/renew`, { token: operator, bad: true, expect: 400, body: { expiring_within_days: 0 } });
    await call('POST', `${P}/certificates/${acmeCertId}/revoke`, { body: { reason: 4 }, expect: 202 });
    await call('POST', `${P}/certificates/${acmeCertId}/versions`, { body: renewed, expect: 409 });

    // --- Issuance approval (docs/approval.md): the project's setting, a waiting request, the
    // requester refused, another admin approves one and rejects another (a reason is required).
    await call('GET', `${P}/settings`, { token: viewer, expect: 200 });
    await call('GET', `${P}/settings/schema`, { token: viewer, expect: 200 });
    await call('PUT', `${P}/settings`, { body: { issuance_requires_approval: 'maybe' }, bad: true, expect: 400 });
    await call('PUT', `${P}/settings`, { body: { jobs_page_size_default: 30 }, bad: true, expect: 400 });
    await call('PUT', `${P}/settings`, { body: { issuance_requires_approval: 'on' }, expect: 200 });
    const approver = need(await call('POST', `${P}/tokens`, { body: { name: 'contract-approver', role: 'admin', ttl_s: 3600 }, expect: 201 }), 'token');
    const asks = [];
    for (const name of ['shop-approved', 'shop-rejected']) {
      const waiting = await call('POST', `${P}/certificates/issue`, { expect: 202, body: { name, domains: [`${name}.contract.test`],
        acme_account_id: account.body.id, dns_provider_id: provider.body.id, auto_renew: false } });
      assert.equal(waiting.body.status, 'awaiting_approval', JSON.stringify(waiting.body));
      asks.push(need(waiting, 'certificate_id'));
    }
    await call('POST', `${P}/certificates/${asks[0]}/approve`, { expect: 403 });
    const approved = await call('POST', `${P}/certificates/${asks[0]}/approve`, { token: approver, expect: 202 });
    await call('POST', `${P}/certificates/${asks[0]}/approve`, { token: approver, expect: 409 });
    await call('POST', `${P}/certificates/${asks[1]}/reject`, { token: approver, bad: true, expect: 400, body: { reason: ' ' } });
    await call('POST', `${P}/certificates/${asks[1]}/reject`, { token: approver, expect: 200, body: { reason: 'not a name we serve' } });
    await call('PUT', `${P}/settings`, { body: { issuance_requires_approval: 'off' }, expect: 200 });
    // The account and the provider are deleted further down: these two go first (the approved
    // one once its job has prepared the order).
    await waitJob(need(approved, 'job_id'), finished, 60000);
    for (const id of asks) await call('DELETE', `${P}/certificates/${id}`, { expect: 200 });

    // --- Distribution A: the certificate to the file target, executed, rolled back.
    // failure_tolerance: "a number from 0 to 1".
    const distA = await call('POST', `${P}/distributions`, { expect: 201, body: { name: 'www to local', certificate_id: certId,
      target_ids: [fileTarget.body.id], failure_tolerance: 0.5, canary: false, fail_fast: false, auto_execute: false } });
    const distAId = need(distA, 'id');
    await call('GET', `${P}/distributions`, { token: viewer, expect: 200 });
    await call('POST', `${P}/distributions/${distAId}/execute`, { token: operator, expect: 202 });
    const ranA = await waitDistribution(distAId);
    if (ranA.status !== 'success') statusProblems.push(`distribution A ended ${ranA.status}: ${JSON.stringify(ranA).slice(0, 600)}`);
    await call('GET', `${P}/distributions/${distAId}`, { token: viewer, expect: 200 });
    await call('GET', `${P}/distributions/${distAId}/results?run=1&page_size=10`, { token: viewer, expect: 200 });
    // With certificates (uploaded and ACME), a domain and a finished run: every part filled.
    await call('GET', `${P}/dashboard`, { token: viewer, expect: 200 });
    await call('POST', `${P}/distributions/${distAId}/rollback`, { token: operator, body: { run_no: 1 }, expect: 202 });
    await waitDistribution(distAId);
    await call('GET', `${P}/distributions/${distAId}/results`, { token: viewer, expect: 200 });
    await call('POST', `${P}/distributions/${distAId}/retry-failed`, { token: operator, expect: 409 });
    await call('POST', `${P}/distributions/${distAId}/cancel`, { token: operator, expect: 409 });

    // --- Distribution B: a slow failing target and the closed SSH port; cancelled, retried, cancelled.
    const distB = await call('POST', `${P}/distributions`, { expect: 201, body: { name: 'www to slow and closed', certificate_id: certId,
      target_ids: [need(slowTarget, 'id'), sshTarget.body.id] } });
    const distBId = need(distB, 'id');
    await call('POST', `${P}/distributions/${distBId}/execute`, { token: operator, expect: 202 });
    await call('POST', `${P}/distributions/${distBId}/cancel`, { token: operator, expect: 202 });
    await waitDistribution(distBId);
    await call('POST', `${P}/distributions/${distBId}/retry-failed`, { token: operator, expect: 202 });
    // The retry run may end before this asks (its slow target's files may match by now): 409 then.
    await call('POST', `${P}/distributions/${distBId}/cancel`, { token: operator, expect: [202, 409] });
    await waitDistribution(distBId);
    await call('GET', `${P}/distributions/${distBId}/results?status=cancelled`, { token: viewer, expect: 200 });
    // Re-drive the closed port's target in the run that just ended (it failed or was cancelled there).
    await call('POST', `${P}/distributions/${distBId}/retry-targets`, { token: operator, expect: 202, body: { target_ids: [sshTarget.body.id] } });
    await call('POST', `${P}/distributions/${distBId}/retry-targets`, { token: operator, bad: true, expect: 400, body: { job_id: 'x' } });
    await waitDistribution(distBId);

    // --- Audit.
    await call('GET', `${P}/audit?page_size=20`, { expect: 200 });

    // --- Errors.
    await call('GET', `${P}/jobs`, { token: '', bad: true, expect: 401 });
    await call('POST', `${P}/jobs`, { token: '', bad: true, body: { type: 'noop' }, expect: 401 });
    await call('GET', `${P}/audit`, { token: viewer, expect: 403 });
    await call('PUT', '/api/v1/settings', { token: operator, body: { jobs_page_size_default: 25 }, expect: 403 });
    await call('GET', `${P}/jobs/${unknownId}`, { token: viewer, expect: 404 });
    await call('GET', `${P}/certificates/${unknownId}`, { token: viewer, expect: 404 });
    await call('DELETE', `${P}/targets/${unknownId}`, { expect: 404 });
    await call('GET', '/api/v1/projects/no-such-project/jobs', { expect: 404 });
    await call('GET', `${P}/jobs/not-an-id`, { token: viewer, bad: true, expect: 400 });
    await call('DELETE', `${P}/certificates/XYZ`, { bad: true, expect: 400 });
    await call('PATCH', `${P}/jobs`, { bad: true, body: { type: 'noop' }, expect: 405 });
    await call('DELETE', '/api/v1/settings', { bad: true, expect: 405 });
    await call('POST', `${P}/jobs`, { bad: true, raw: 'type=noop', headers: { 'Content-Type': 'text/plain' }, expect: 415 });
    await call('POST', '/api/v1/session', { token: '', bad: true, raw: JSON.stringify({ token: operator }), headers: { 'Content-Type': 'text/plain' }, expect: 415 });
    const missing = await call('POST', `${P}/jobs`, { bad: true, body: { payload: {} }, expect: 400 });
    if (missing.body?.error?.field !== 'type') statusProblems.push(`a body without type: the error names ${JSON.stringify(missing.body?.error?.field)}, not type`);
    const missingName = await call('POST', `${P}/certificates`, { bad: true, body: { cert_pem: uploaded.cert_pem, key_pem: uploaded.key_pem }, expect: 400 });
    if (missingName.body?.error?.field !== 'name') statusProblems.push(`a certificate without name: the error names ${JSON.stringify(missingName.body?.error?.field)}, not name`);
    const unknownParam = await call('GET', `${P}/jobs?colour=blue`, { token: viewer, bad: true, expect: 400 });
    if (unknownParam.body?.error?.field !== 'colour') statusProblems.push(`an unknown query parameter: the error names ${JSON.stringify(unknownParam.body?.error?.field)}`);
    const badStatus = await call('GET', `${P}/jobs?status=sleeping`, { token: viewer, bad: true, expect: 400 });
    if (badStatus.body?.error?.field !== 'status') statusProblems.push(`a bad status: the error names ${JSON.stringify(badStatus.body?.error?.field)}`);
    await call('GET', `${P}/jobs?page_size=500`, { token: viewer, bad: true, expect: 400 });
    // A member a nested section does not have is refused by name, as the document's closed section says.
    const extraMember = await call('POST', `${P}/targets`, { bad: true, expect: 400, body: { name: 'extra-member', module: 'file',
      file: { cert_path: '/tmp/x.crt', key_path: '/tmp/x.key', owner: 'www-data' } } });
    if (extraMember.body?.error?.field !== 'file.owner') statusProblems.push(`a file target with owner: the error names ${JSON.stringify(extraMember.body?.error?.field)}, not file.owner`);
    await call('POST', `${P}/notification-rules`, { bad: true, body: { event: 'no.such.event', channel_id: hook.body.id }, expect: 400 });
    // Straight to the server (Prism hangs on malformed JSON and merges duplicate keys).
    const malformed = await call('POST', `${P}/jobs`, { direct: true, bad: true, raw: '{"type": "noop"', headers: { 'Content-Type': 'application/json' }, expect: 400 });
    if (malformed.body?.error?.field !== 'body') statusProblems.push(`malformed JSON: the error names ${JSON.stringify(malformed.body?.error?.field)}, not body`);
    const twice = await call('POST', `${P}/jobs`, { direct: true, bad: true, raw: '{"type": "noop", "payload": {"ms": 1, "ms": -5}}', headers: { 'Content-Type': 'application/json' }, expect: 400 });
    if (twice.body?.error?.field !== 'payload.ms') statusProblems.push(`a duplicate key: the error names ${JSON.stringify(twice.body?.error?.field)}, not payload.ms`);

    // --- The WebSocket route without Upgrade: 400 (it is not in the coverage count).
    await call('GET', `${P}/jobs/${noopId}/logs/stream`, { token: viewer, expect: 400 });

    // --- AD CS: a CA at the testbed's CEP/CES server, its templates, an enrollment issued at once.
    const adcsCa = await call('POST', `${P}/msca-cas`, { expect: 201, body: { name: 'corp-ca', cep_url: adcs.cepUrl,
      auth: { kind: 'username_password', username: 'alice', password: 'alice-password' }, ca_bundle_pem: adcs.caPem,
      default_template: 'WebServer', renewal_mode: 'new_key' } });
    await call('GET', `${P}/msca-cas`, { token: viewer, expect: 200 });
    await call('GET', `${P}/msca-cas/${need(adcsCa, 'id')}`, { token: viewer, expect: 200 });
    await call('GET', `${P}/msca-cas/${adcsCa.body.id}/templates?refresh=1`, { token: viewer, expect: 200 });
    await call('GET', `${P}/msca-cas/${adcsCa.body.id}/templates?refresh=maybe`, { token: viewer, bad: true, expect: 400 });
    await call('POST', `${P}/certificates/enroll`, { expect: 400, body: { name: 'adcs-bad', msca_ca_id: adcsCa.body.id,
      template: 'ECWebServer', key_type: 'rsa-2048', subject: 'CN=bad.corp.test' } });
    const enrolled = await call('POST', `${P}/certificates/enroll`, { expect: 202, body: { name: 'adcs-web',
      msca_ca_id: adcsCa.body.id, template: 'WebServer', subject: 'CN=web.corp.test', sans: ['web.corp.test'] } });
    const enrollJob = await waitJob(need(enrolled, 'job_id'), finished);
    if (enrollJob.status !== 'completed') statusProblems.push(`msca_issue_certificate ended ${enrollJob.status}: ${enrollJob.error}`);
    await call('GET', `${P}/jobs/${enrolled.body.job_id}`, { token: viewer, expect: 200 });
    await call('GET', `${P}/certificates/${enrolled.body.certificate_id}`, { token: viewer, expect: 200 });

    // --- Deletes, users first.
    await waitJob(need(domainCheck, 'job_id'), finished);
    for (const id of [distAId, distBId]) await call('DELETE', `${P}/distributions/${id}`, { expect: 200 });
    for (const id of [rule.body.id, need(mailRule, 'id')]) await call('DELETE', `${P}/notification-rules/${id}`, { expect: 200 });
    await call('DELETE', `${P}/notification-channels/${hook.body.id}`, { expect: 200 });
    await call('DELETE', `${P}/notification-channels/${mail.body.id}`, { expect: 200 });
    for (const id of [fileTarget.body.id, slowTarget.body.id, need(hookTarget, 'id'), sshTarget.body.id, ...need(imported, 'ids')]) await call('DELETE', `${P}/targets/${id}`, { expect: 200 });
    for (const id of [password.body.id, sshKey.body.id]) await call('DELETE', `${P}/credentials/${id}`, { expect: 200 });
    for (const id of [certId, acmeCertId, ...(importedId ? [importedId] : [])]) await call('DELETE', `${P}/certificates/${id}`, { expect: 200 });
    await call('DELETE', `${P}/dns-providers/${provider.body.id}`, { expect: 200 });
    await call('DELETE', `${P}/acme-accounts/${account.body.id}`, { expect: 200 });
    await call('DELETE', `${P}/certificates/${enrolled.body.certificate_id}`, { expect: 200 });
    await call('DELETE', `${P}/msca-cas/${adcsCa.body.id}`, { expect: 200 });
    await call('DELETE', `${P}/domains/${domain.body.id}`, { expect: 200 });
    await call('DELETE', `${P}/discovery-sources/${source.body.id}`, { expect: 200 });
    await call('GET', `${P}/certificates/${certId}`, { token: viewer, expect: 404 });
    t.diagnostic(`scenario done after ${Date.now() - started} ms`);

    // --- What the run proved.
    const operations = templates.flatMap((x) => [...x.methods].map((m) => `${m} ${x.template}`))
      .filter((op) => op !== `GET ${wsRoute}`);
    const viaPrism = exchanges.filter((x) => !x.direct);
    const called = new Set(viaPrism.map((x) => x.operation));
    const never = operations.filter((op) => !called.has(op));
    const ok2xx = new Set(viaPrism.filter((x) => x.status >= 200 && x.status < 300).map((x) => x.operation));
    const no2xx = operations.filter((op) => called.has(op) && !ok2xx.has(op));
    t.diagnostic(`${operations.length} operations (WebSocket route aside), ${viaPrism.length} requests through Prism, ${exchanges.length - viaPrism.length} straight`);
    for (const op of no2xx) t.diagnostic(`no 2xx answer here: ${op}`);

    /** @type {{operation: string, v: Violation, status: number}[]} */
    const unexpected = [];
    /** @type {{operation: string, v: Violation, status: number}[]} */
    const excused = [];
    for (const x of viaPrism) {
      for (const v of x.violations) {
        const item = { operation: x.operation ?? `${x.method} ${x.pattern ?? x.path} (no such operation)`, v, status: x.status };
        if (x.bad && v.location[0] === 'request') excused.push(item);
        else unexpected.push(item);
      }
    }
    if (excused.length) t.diagnostic('request violations of the deliberately bad requests (expected):');
    for (const line of report(excused).split('\n')) t.diagnostic(line);
    // One assertion, so that a run shows every kind of failure at once.
    const failures = [];
    if (unexpected.length) failures.push(`Prism reported ${unexpected.length} violation(s) of the document, by operation:\n${report(unexpected)}`);
    // The proxy must be validating at all: the requests made wrong on purpose are flagged.
    if (!excused.length) failures.push('Prism flagged none of the deliberately bad requests: is it validating?');
    if (never.length) failures.push(`operations of the document never called:\n  ${never.join('\n  ')}`);
    if (statusProblems.length) failures.push(`answers the scenario did not expect:\n  ${statusProblems.join('\n  ')}`);
    assert.equal(failures.length, 0, failures.join('\n\n'));
  } finally {
    for (const stop of cleanups.reverse()) {
      try { await stop(); } catch (e) { t.diagnostic(`clean-up: ${e}`); }
    }
    await rm(dir, { recursive: true, force: true });
    const dumpPath = process.env.CONTRACT_DUMP;
    if (dumpPath) {
      await writeFile(dumpPath, JSON.stringify(exchanges.map((x) => ({
        method: x.method, pattern: x.pattern, path: x.path, status: x.status, body: x.body ?? x.text,
      })), null, 1));
    }
    t.diagnostic(`wall time ${Date.now() - started} ms`);
  }
});
