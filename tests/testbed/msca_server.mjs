// The AD CS enrollment peer (tests/testbed/msca_server.py: CEP/CES from MS-XCEP and MS-WSTEP, a
// test CA of its own) for the Node tests, on 127.0.0.1, stopped by its PID. The C++ tests use
// msca_server.hpp over the same script.
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { supervise } from './child.mjs';

/**
 * Starts msca_server.py on a temp dir with user alice (password alice-password) and waits for its
 * ports.json (written last).
 * @returns {Promise<{ports: {https: number, client_cert: number, admin: number}, caPem: string,
 *   cepUrl: string, cesUrl: string, admin: (path: string, method?: string) => Promise<any>, output: () => string,
 *   stop: () => Promise<void>}>}
 */
export async function startMscaServer() {
  const dir = await mkdtemp(join(tmpdir(), 'certfleet-adcs-'));
  const script = resolve('tests/testbed/msca_server.py');
  const child = supervise(spawn('/usr/bin/python3', [script, '--dir', dir, '--user', 'alice:alice-password'],
    { stdio: ['ignore', 'pipe', 'pipe'] }));
  /** @type {{https: number, client_cert: number, admin: number}} */
  let ports;
  let caPem;
  for (const end = Date.now() + 30000; ;) {
    try {
      ports = JSON.parse(await readFile(join(dir, 'ports.json'), 'utf8'));
      caPem = await readFile(join(dir, 'ca.pem'), 'utf8');
      break;
    } catch {
      if (!child.running()) throw new Error(`msca_server.py exited:\n${child.output()}`);
      if (Date.now() > end) throw new Error(`msca_server.py wrote no ports.json in 30 s:\n${child.output()}`);
      await sleep(100);
    }
  }
  const base = `https://127.0.0.1:${ports.https}`;
  return {
    ports,
    caPem,
    cepUrl: `${base}/ADPolicyProvider_CEP_UsernamePassword/service.svc/CEP`,
    cesUrl: `${base}/TestCA_CES_UsernamePassword/service.svc/CES`,
    // The side channel (plain HTTP on the admin port): GET /requests, POST /requests/<id>/approve, …
    /** @param {string} path @param {string} [method] */
    async admin(path, method = 'GET') {
      const r = await fetch(`http://127.0.0.1:${ports.admin}${path}`, { method });
      const text = await r.text();
      if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${text}`);
      return text ? JSON.parse(text) : null;
    },
    output: () => child.output(),
    async stop() {
      await child.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
