// Web UI benchmark (issue 14), in Debian's Chromium driven by playwright-core against a real
// `certfleet serve`:
//   1. navigation → first rows of /jobs: a fresh navigation each time, measured in the page as
//      performance.now() (ms since the navigation started) when the first job row exists;
//   2. appended log line → painted on the job detail: a live noop job writes a line every 200 ms;
//      in the page a MutationObserver notes each new row and the next animation frame (the paint)
//      is compared with the line's store timestamp (`ts`, same machine clock).
// Medians of RUNS (default 10). Usage, from the repo root after `npm ci` and a build:
//   node bench/ui_bench.mjs [RUNS=10] [JOBS=2000]   (bench/ui_bench.sh installs and builds first)
import { startCertfleet } from '../tests/testbed/certfleet_server.mjs';
import { launch } from '../tests/testbed/chromium.mjs';

const runs = Number(process.argv[2] ?? 10);
const jobs = Number(process.argv[3] ?? 2000);

/** @param {number[]} v */
const median = (v) => { const s = [...v].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };

const srv = await startCertfleet();
const browser = await launch();
try {
  // A store with a few thousand jobs, so the list page is a real page of a real table.
  for (let i = 0; i < jobs; i += 50) {
    await Promise.all(Array.from({ length: Math.min(50, jobs - i) }, () => srv.enqueue('noop', {})));
  }
  const page = await browser.newPage();
  // Marks the moment the first job row is in the document (before the page's own scripts run).
  await page.addInitScript(() => {
    new MutationObserver((_, obs) => {
      if (document.querySelector('tr.job-row')) { performance.mark('first-row'); obs.disconnect(); }
    }).observe(document, { childList: true, subtree: true });
  });
  await page.goto(`${srv.url}/login`);
  await page.getByLabel('API token').fill(srv.ownerToken);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL((u) => u.pathname === '/jobs');

  const nav = [];
  for (let i = 0; i < runs; ++i) {
    await page.goto('about:blank');
    await page.goto(`${srv.url}/jobs`, { waitUntil: 'commit' });
    await page.locator('tr.job-row').first().waitFor();
    // The moment the row was inserted, not when Playwright saw it: the page records it.
    nav.push(await page.evaluate(() => {
      const e = performance.getEntriesByType('mark').find((m) => m.name === 'first-row');
      return e ? e.startTime : performance.now();
    }));
  }

  const live = await srv.enqueue('noop', { lines: runs + 5, line_ms: 200 });
  await page.goto(`${srv.url}/jobs/${live.id}?project=default`);
  await page.locator('.logs-card').waitFor();
  const lag = await page.evaluate(async (want) => {
    /** @type {Map<number, number>} seq → paint time (epoch ms) */
    const painted = new Map();
    const list = document.querySelector('.logs-card');
    await new Promise((resolve) => {
      const seen = new Set();
      const obs = new MutationObserver(() => {
        for (const row of list.querySelectorAll('.log-row')) {
          const seq = Number(row.getAttribute('data-seq'));
          if (seen.has(seq)) continue;
          seen.add(seq);
          requestAnimationFrame(() => { painted.set(seq, performance.timeOrigin + performance.now()); });
        }
        if (painted.size >= want) { obs.disconnect(); resolve(undefined); }
      });
      obs.observe(list, { childList: true, subtree: true });
      setTimeout(resolve, 20000);
    });
    return [...painted.entries()];
  }, runs + 2);
  // The lines' own timestamps, from the API.
  const logs = await srv.api('GET', `/api/v1/projects/default/jobs/${live.id}/logs?limit=1000`);
  const ts = new Map(logs.body.lines.map((/** @type {any} */ l) => [l.seq, Date.parse(l.ts)]));
  // The first two lines may arrive with the first fetch, not the stream: measure the later ones.
  const lags = lag.filter(([seq]) => seq > 2 && ts.has(seq)).map(([seq, at]) => at - /** @type {number} */ (ts.get(seq)));
  console.log(JSON.stringify({
    navigation_to_first_rows_ms: { median: Math.round(median(nav) * 10) / 10, runs: nav.map((v) => Math.round(v)) },
    log_append_to_paint_ms: { median: Math.round(median(lags) * 10) / 10, samples: lags.map((v) => Math.round(v)) },
    jobs_stored: jobs,
  }));
} finally {
  await browser.close();
  await srv.stop();
}
