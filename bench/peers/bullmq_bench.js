'use strict';
// BullMQ peer benchmark: N no-op jobs enqueued with addBulk (in chunks) into a fresh queue, then
// one Worker (concurrency C, no-op processor) drains them. Then a short paced phase measures
// enqueue -> handler-start latency while the worker is idle-ready.
const { Queue, Worker } = require('bullmq');
const { parseArgs, percentile, round, sleep, log, pacedEnqueue, nowMs } = require('./common');

async function main() {
  const o = parseArgs(process.argv.slice(2), {
    jobs: 100000, concurrency: 50, chunk: 1000, host: '127.0.0.1', port: 6379,
    'latency-jobs': 1000, 'latency-rate': 200, queue: 'bench',
  });
  const connection = { host: o.host, port: o.port, maxRetriesPerRequest: null };
  const jobOpts = { removeOnComplete: true, removeOnFail: true };
  const queue = new Queue(o.queue, { connection });
  await queue.waitUntilReady();
  await queue.obliterate({ force: true }).catch(() => {});

  // Phase 1: bulk enqueue.
  log(`bullmq: enqueue ${o.jobs} jobs in chunks of ${o.chunk}`);
  const e0 = performance.now();
  for (let done = 0; done < o.jobs; done += o.chunk) {
    const n = Math.min(o.chunk, o.jobs - done);
    const batch = new Array(n);
    for (let i = 0; i < n; i++) batch[i] = { name: 'noop', data: { i: done + i }, opts: jobOpts };
    await queue.addBulk(batch);
  }
  const enqueueS = (performance.now() - e0) / 1000;
  const waiting = await queue.getWaitingCount();
  if (waiting !== o.jobs) throw new Error(`expected ${o.jobs} waiting jobs, redis has ${waiting}`);
  log(`bullmq: enqueued in ${enqueueS.toFixed(2)} s`);

  // Phase 2: drain with a worker.
  let phase = 'drain';
  let started = 0, completed = 0, failed = 0, lastDone = 0;
  const lat = [];
  let resolveDrained, resolveLat;
  const drained = new Promise((r) => (resolveDrained = r));
  const latDone = new Promise((r) => (resolveLat = r));
  const w0 = performance.now();
  const worker = new Worker(o.queue, async (job) => {
    if (job.data.t !== undefined) lat.push(nowMs() - job.data.t);
    started++;
  }, { connection, concurrency: o.concurrency, autorun: true });
  worker.on('completed', () => {
    completed++;
    if (phase === 'drain' && completed === o.jobs) { lastDone = performance.now(); resolveDrained(); }
    if (phase === 'latency' && completed === o.jobs + o['latency-jobs']) resolveLat();
  });
  worker.on('failed', (job, err) => { failed++; log('bullmq: job failed', err && err.message); });
  worker.on('error', (err) => log('bullmq: worker error', err && err.message));
  await drained;
  const drainS = (lastDone - w0) / 1000;
  log(`bullmq: drained ${completed} in ${drainS.toFixed(2)} s`);

  // Phase 3: paced latency.
  phase = 'latency';
  const m = o['latency-jobs'];
  if (m > 0) {
    await sleep(200);
    await pacedEnqueue(m, o['latency-rate'], (t) => queue.add('noop', { t }, jobOpts));
    await latDone;
  }
  lat.sort((a, b) => a - b);

  await worker.close();
  await queue.obliterate({ force: true }).catch(() => {});
  await queue.close();

  const out = {
    peer: 'bullmq', version: require('bullmq/package.json').version,
    jobs: o.jobs, concurrency: o.concurrency, add_chunk: o.chunk,
    enqueue_per_s: Math.round(o.jobs / enqueueS),
    processed_per_s: Math.round(o.jobs / drainS),
    drain_s: round(drainS, 2), failed,
    remove_on_complete: true,
  };
  if (m > 0) Object.assign(out, {
    p50_ms: round(percentile(lat, 50), 2), p99_ms: round(percentile(lat, 99), 2),
    latency: `enqueue->handler start, ${m} jobs added one by one at ${o['latency-rate']}/s to an idle worker`,
  });
  out.backend = 'redis-server appendonly yes, appendfsync everysec, save ""';
  process.stdout.write(JSON.stringify(out) + '\n');
}

main().then(() => process.exit(0), (err) => { console.error(err); process.exit(1); });
