// A peer process a test started: its output kept (the last 512 KiB to 1 MiB, for failure
// messages) and a stop by its PID — SIGTERM, then SIGKILL after 5 s.
/**
 * @param {import('node:child_process').ChildProcess} child spawned with stdout and stderr piped
 * @returns {{pid: number, output: () => string, running: () => boolean, stop: () => Promise<void>}}
 */
export function supervise(child) {
  let out = '';
  const keep = (/** @type {Buffer} */ b) => { out += b.toString(); if (out.length > 1 << 20) out = out.slice(-(1 << 19)); };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const exited = new Promise((r) => child.once('exit', r));
  const pid = /** @type {number} */ (child.pid);
  const running = () => child.exitCode === null && child.signalCode === null;
  async function stop() {
    if (!running()) return;
    try { process.kill(pid, 'SIGTERM'); } catch { /* gone */ }
    const t = setTimeout(() => { try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ } }, 5000);
    await exited;
    clearTimeout(t);
  }
  return { pid, output: () => out, running, stop };
}
