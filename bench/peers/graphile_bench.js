'use strict';
// graphile-worker peer benchmark: N no-op jobs enqueued with addJobs (bulk, in chunks), then one
// runner (concurrency C, local-queue batching and batched completion) drains them. The drain
// ends when the jobs table is empty, i.e. every completion is committed, not just when the last
// handler returned. Then a short paced phase measures enqueue -> handler-start latency.
const { run, makeWorkerUtils, Logger } = require('graphile-worker');
const { Pool } = require('pg');
const { parseArgs, percentile, round, sleep, log, pacedEnqueue, nowMs } = require('./common');

async function main() {
  const o = parseArgs(process.argv.slice(2), {
    jobs: 100000, concurrency: 50, chunk: 1000, 'local-queue': 500,
    'complete-batch-ms': 100, 'fail-batch-ms': 100, 'pool-size': 0,
    db: 'postgres://postgres@127.0.0.1:5432/postgres',
    'latency-jobs': 1000, 'latency-rate': 200,
  });
  const poolSize = o['pool-size'] > 0 ? o['pool-size'] : Math.max(10, Math.min(o.concurrency + 2, 20));
  const quiet = new Logger(() => (level, message) => { if (level === 'error') log('graphile:', message); });
  const pgPool = new Pool({ connectionString: o.db, max: poolSize });
  pgPool.on('error', (err) => log('graphile: pg pool error', err.message));
  pgPool.on('connect', (client) => client.on('error', (err) => log('graphile: pg client error', err.message)));
  const utils = await makeWorkerUtils({ pgPool, logger: quiet });
  await utils.migrate();
  await pgPool.query('truncate graphile_worker._private_jobs cascade');

  // Phase 1: bulk enqueue.
  log(`graphile: enqueue ${o.jobs} jobs in chunks of ${o.chunk}`);
  const e0 = performance.now();
  for (let done = 0; done < o.jobs; done += o.chunk) {
    const n = Math.min(o.chunk, o.jobs - done);
    const specs = new Array(n);
    for (let i = 0; i < n; i++) specs[i] = { identifier: 'noop', payload: { i: done + i } };
    await utils.addJobs(specs);
  }
  const enqueueS = (performance.now() - e0) / 1000;
  const { rows: [{ n: queued }] } = await pgPool.query('select count(*)::int as n from graphile_worker._private_jobs');
  if (queued !== o.jobs) throw new Error(`expected ${o.jobs} queued jobs, table has ${queued}`);
  log(`graphile: enqueued in ${enqueueS.toFixed(2)} s`);
  await pgPool.query('vacuum analyze graphile_worker._private_jobs');

  // Phase 2: drain.
  let started = 0, failed = 0;
  const lat = [];
  const taskList = {
    noop: async (payload) => {
      if (payload.t !== undefined) lat.push(nowMs() - payload.t);
      started++;
    },
  };
  const w0 = performance.now();
  const runner = await run({
    pgPool, concurrency: o.concurrency, taskList, logger: quiet, noHandleSignals: true,
    pollInterval: 1000,
    preset: {
      worker: {
        localQueue: { size: o['local-queue'] },
        completeJobBatchDelay: o['complete-batch-ms'],
        failJobBatchDelay: o['fail-batch-ms'],
      },
    },
  });
  runner.events.on('job:failed', ({ error }) => { failed++; log('graphile: job failed', error && error.message); });
  while (started < o.jobs) await sleep(5);
  const handlersDone = performance.now();
  for (;;) {
    const { rows } = await pgPool.query('select exists(select 1 from graphile_worker._private_jobs) as e');
    if (!rows[0].e) break;
    await sleep(10);
  }
  const drained = performance.now();
  const drainS = (drained - w0) / 1000;
  log(`graphile: handlers done after ${((handlersDone - w0) / 1000).toFixed(2)} s, table empty after ${drainS.toFixed(2)} s`);

  // Phase 3: paced latency.
  const m = o['latency-jobs'];
  if (m > 0) {
    await sleep(200);
    await pacedEnqueue(m, o['latency-rate'], (t) => utils.addJob('noop', { t }));
    while (lat.length < m) await sleep(5);
  }
  lat.sort((a, b) => a - b);

  await runner.stop();
  await utils.release();
  await pgPool.end();

  const out = {
    peer: 'graphile-worker', version: require('graphile-worker/package.json').version,
    jobs: o.jobs, concurrency: o.concurrency, add_chunk: o.chunk,
    enqueue_per_s: Math.round(o.jobs / enqueueS),
    processed_per_s: Math.round(o.jobs / drainS),
    drain_s: round(drainS, 2), failed,
    local_queue_size: o['local-queue'], complete_job_batch_delay_ms: o['complete-batch-ms'],
    fail_job_batch_delay_ms: o['fail-batch-ms'], max_pool_size: poolSize,
  };
  if (m > 0) Object.assign(out, {
    p50_ms: round(percentile(lat, 50), 2), p99_ms: round(percentile(lat, 99), 2),
    latency: `enqueue->handler start, ${m} jobs added one by one at ${o['latency-rate']}/s to an idle worker`,
  });
  out.backend = 'postgresql 15, fsync on, synchronous_commit on';
  process.stdout.write(JSON.stringify(out) + '\n');
}

main().then(() => process.exit(0), (err) => { console.error(err); process.exit(1); });
