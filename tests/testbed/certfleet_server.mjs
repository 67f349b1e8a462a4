// Starts a real `certfleet serve --mode=all` on a temp data dir for the UI tests: reads the
// port from its "serving:" line and the owner token from DATA/owner-token, creates more tokens
// with `certfleet token create`, talks to the API with a bearer token, and stops the process by
// its PID (SIGTERM, then SIGKILL).
import { spawn, execFile } from 'node:child_process';
import { request as httpsRequest } from 'node:https';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';

const execFileP = promisify(execFile);

export const bin = resolve(process.env.CERTFLEET_BIN ?? 'build/certfleet');

/**
 * @param {{settings?: Record<string, string|number>, processSettings?: Record<string, string>,
 *          tls?: {certFile: string, keyFile: string, caPem: string}}} [opts]
 *   settings: system settings PUT once the server is up; processSettings: --set flags; tls: serve
 *   HTTPS with these files (url is then https://127.0.0.1:PORT; api() trusts caPem).
 */
export async function startCertfleet(opts = {}) {
  const data = await mkdtemp(join(tmpdir(), 'certfleet-ui-'));
  const args = ['serve', '--mode=all', '--data', data, '--listen', '127.0.0.1:0'];
  for (const [k, v] of Object.entries(opts.processSettings ?? {})) args.push('--set', `${k}=${v}`);
  if (opts.tls) args.push('--set', `tls_cert_file=${opts.tls.certFile}`, '--set', `tls_key_file=${opts.tls.keyFile}`);
  const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const port = await new Promise((res, rej) => {
    const timer = setTimeout(() => rej(new Error(`certfleet did not report its port in 20 s:\n${out}`)), 20000);
    const onData = (/** @type {Buffer} */ b) => {
      out += b.toString();
      const m = /serving:.*listen=127\.0\.0\.1:(\d+)/.exec(out);
      if (m) { clearTimeout(timer); res(Number(m[1])); }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.on('exit', (code) => { clearTimeout(timer); rej(new Error(`certfleet exited (${code}) before serving:\n${out}`)); });
  });
  child.stdout.on('data', (b) => { out += b.toString(); if (out.length > 1 << 20) out = out.slice(-(1 << 19)); });
  child.stderr.on('data', (b) => { out += b.toString(); if (out.length > 1 << 20) out = out.slice(-(1 << 19)); });
  const ownerToken = (await readFile(join(data, 'owner-token'), 'utf8')).trim();
  const url = `${opts.tls ? 'https' : 'http'}://127.0.0.1:${port}`;

  /**
   * @param {string} method
   * @param {string} path
   * @param {unknown} [body]
   * @param {string} [token] bearer token (default: the owner's)
   * @param {Record<string,string>} [headers]
   */
  async function api(method, path, body, token = ownerToken, headers = {}) {
    if (opts.tls) return apiTls(method, path, body, token, headers);
    const res = await fetch(url + path, {
      method,
      headers: { ...(token ? { Authorization: `Bearer ${token}` } : {}), ...(body !== undefined ? { 'Content-Type': 'application/json' } : {}), ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    let json = null;
    try { json = text ? JSON.parse(text) : null; } catch { json = null; }
    return { status: res.status, body: json, text, headers: res.headers };
  }

  /**
   * api() over HTTPS: Node's fetch cannot be given a CA per call, node:https can.
   * @param {string} method @param {string} path @param {unknown} body @param {string} token
   * @param {Record<string,string>} headers
   * @returns {Promise<{status: number, body: any, text: string, headers: Headers}>}
   */
  function apiTls(method, path, body, token, headers) {
    return new Promise((res, rej) => {
      const data = body === undefined ? undefined : JSON.stringify(body);
      const req = httpsRequest(url + path, {
        method,
        ca: opts.tls?.caPem,
        headers: { ...(token ? { Authorization: `Bearer ${token}` } : {}), ...(data !== undefined ? { 'Content-Type': 'application/json' } : {}), ...headers },
      }, (r) => {
        let text = '';
        r.setEncoding('utf8');
        r.on('data', (c) => { text += c; });
        r.on('end', () => {
          let json = null;
          try { json = text ? JSON.parse(text) : null; } catch { json = null; }
          const h = new Headers();
          for (const [k, v] of Object.entries(r.headers)) if (v !== undefined) h.set(k, Array.isArray(v) ? v.join(', ') : v);
          res({ status: r.statusCode ?? 0, body: json, text, headers: h });
        });
      });
      req.on('error', rej);
      if (data !== undefined) req.write(data);
      req.end();
    });
  }

  /**
   * A new token: `certfleet token create`.
   * @param {'viewer'|'operator'|'admin'|'owner'} role
   * @param {{name?: string, system?: boolean, project?: string}} [o]
   */
  async function token(role, o = {}) {
    const a = ['token', 'create', '--data', data, '--project', o.project ?? 'default', '--role', role, '--name', o.name ?? `ui-test-${role}`];
    if (o.system) a.push('--system');
    const { stdout, stderr } = await execFileP(bin, a);
    const m = /cf_[A-Za-z0-9_-]{43}/.exec(stdout + stderr);
    if (!m) throw new Error(`no token in the output of token create:\n${stdout}${stderr}`);
    return m[0];
  }

  /**
   * Enqueues a job (owner token by default); returns the job.
   * @param {string} type
   * @param {object} payload
   * @param {{token?: string, project?: string, run_at?: number|string}} [o]
   */
  async function enqueue(type, payload, o = {}) {
    const r = await api('POST', `/api/v1/projects/${o.project ?? 'default'}/jobs`, { type, payload, ...(o.run_at !== undefined ? { run_at: o.run_at } : {}) }, o.token);
    if (r.status !== 201 && r.status !== 200) throw new Error(`enqueue ${type}: ${r.status} ${r.text}`);
    return r.body;
  }

  /** @param {string} id @param {string} [project] */
  async function job(id, project = 'default') {
    const r = await api('GET', `/api/v1/projects/${project}/jobs/${id}`);
    if (r.status !== 200) throw new Error(`get job ${id}: ${r.status} ${r.text}`);
    return r.body;
  }

  /**
   * Waits until `pred(job)` holds (polls every 50 ms).
   * @param {string} id @param {(j: any) => boolean} pred @param {number} [ms]
   */
  async function waitJob(id, pred, ms = 15000) {
    const end = Date.now() + ms;
    for (;;) {
      const j = await job(id);
      if (pred(j)) return j;
      if (Date.now() > end) throw new Error(`job ${id} never matched; last: ${JSON.stringify(j)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  if (opts.settings && Object.keys(opts.settings).length) {
    const r = await api('PUT', '/api/v1/settings', opts.settings);
    if (r.status !== 200) throw new Error(`settings: ${r.status} ${r.text}`);
  }

  async function stop() {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      process.kill(/** @type {number} */ (child.pid), 'SIGTERM');
      const t = setTimeout(() => { try { process.kill(/** @type {number} */ (child.pid), 'SIGKILL'); } catch { /* gone */ } }, 5000);
      await exited;
      clearTimeout(t);
    }
    await rm(data, { recursive: true, force: true });
  }

  return { url, port, data, pid: child.pid, ownerToken, api, token, enqueue, job, waitJob, stop, log: () => out };
}
