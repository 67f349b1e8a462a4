'use strict';
// Shared helpers for the peer benchmarks: argument parsing, percentiles, output.

function parseArgs(argv, defaults) {
  const out = { ...defaults };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith('--')) throw new Error(`unexpected argument ${a}`);
    const eq = a.indexOf('=');
    let key, val;
    if (eq >= 0) { key = a.slice(2, eq); val = a.slice(eq + 1); } else { key = a.slice(2); val = argv[++i]; }
    if (!(key in defaults)) throw new Error(`unknown option --${key}`);
    if (val === undefined) throw new Error(`--${key} needs a value`);
    out[key] = typeof defaults[key] === 'number' ? Number(val) : val;
    if (typeof defaults[key] === 'number' && !Number.isFinite(out[key])) throw new Error(`--${key}: not a number: ${val}`);
  }
  return out;
}

function percentile(sorted, p) {
  if (sorted.length === 0) return null;
  const idx = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[idx];
}

const round = (x, d = 1) => (x == null ? null : Math.round(x * 10 ** d) / 10 ** d);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const log = (...a) => console.error(`[${new Date().toISOString()}]`, ...a);

// Enqueues `count` jobs one by one at `rate` jobs/s (in small ticks) while a worker is running;
// `addOne(t)` must enqueue one job carrying t (ms, performance.timeOrigin-based clock).
async function pacedEnqueue(count, rate, addOne) {
  const t0 = performance.now();
  const pending = [];
  for (let i = 0; i < count; i++) {
    const due = t0 + (i * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 1) await sleep(wait);
    pending.push(addOne(nowMs()));
  }
  await Promise.all(pending);
}

// Wall-clock milliseconds with sub-ms resolution, comparable across the process.
const nowMs = () => performance.timeOrigin + performance.now();

module.exports = { parseArgs, percentile, round, sleep, log, pacedEnqueue, nowMs };
