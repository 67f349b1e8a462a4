// Lighthouse on the Jobs page (issue 31), in Debian's Chromium against a real `certfleet serve`
// holding JOBS jobs: the accessibility, best-practices and performance scores, desktop and mobile,
// the failed audits by name, and the page's own first-rows time (performance.mark set when the
// first job row is in the document) over RUNS fresh navigations.
// Usage (bench/lighthouse.sh installs, builds and runs it):
//   node bench/lighthouse/lighthouse.mjs [JOBS=100000] [RUNS=5]
import lighthouse from 'lighthouse';
import desktopConfig from 'lighthouse/core/config/desktop-config.js';
import * as chromeLauncher from 'chrome-launcher';
import { startCertfleet } from '../../tests/testbed/certfleet_server.mjs';
import { chromiumPath } from '../../tests/testbed/chromium.mjs';

const jobs = Number(process.argv[2] ?? 100000);
const runs = Number(process.argv[3] ?? 5);

/** @param {number[]} v */
const median = (v) => { const s = [...v].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };

const srv = await startCertfleet();
/** @type {Awaited<ReturnType<typeof chromeLauncher.launch>> | null} */
let chrome = null;
try {
  // The store: JOBS no-op jobs through the API (the worker runs them as they come).
  const t0 = Date.now();
  const wave = 64;
  for (let i = 0; i < jobs; i += wave) {
    await Promise.all(Array.from({ length: Math.min(wave, jobs - i) }, () => srv.enqueue('noop', {})));
  }
  const seeded_s = (Date.now() - t0) / 1000;
  const list = await srv.api('GET', '/api/v1/projects/default/jobs?page_size=1');
  if (list.body?.total < jobs) throw new Error(`the store holds ${list.body?.total} jobs, not ${jobs}`);

  // A web UI sign-in: its cookie goes with every request Lighthouse's browser makes.
  const session = await srv.api('POST', '/api/v1/session', { token: srv.ownerToken }, '');
  const cookie = String(session.headers.get('set-cookie') ?? '').split(';')[0];
  if (session.status !== 201 || !cookie) throw new Error(`sign-in failed: ${session.status} ${session.text}`);

  chrome = await chromeLauncher.launch({
    chromePath: chromiumPath,
    chromeFlags: ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--disable-default-apps', '--disable-extensions', '--no-first-run'],
  });
  const url = `${srv.url}/jobs`;
  /** @type {Record<string, any>} */
  const out = { jobs_stored: list.body.total, seeded_s, chromium: chromiumPath, lighthouse: (await import('lighthouse/package.json', { with: { type: 'json' } })).default.version };
  for (const [form, config] of /** @type {const} */ ([['desktop', desktopConfig], ['mobile', undefined]])) {
    const r = await lighthouse(url, {
      port: chrome.port, output: 'json', logLevel: 'error',
      onlyCategories: ['accessibility', 'best-practices', 'performance'],
      extraHeaders: { Cookie: cookie },
    }, config);
    if (!r) throw new Error('lighthouse returned nothing');
    const lhr = r.lhr;
    if (lhr.finalDisplayedUrl && !lhr.finalDisplayedUrl.endsWith('/jobs')) throw new Error(`ended at ${lhr.finalDisplayedUrl}, not the Jobs page (signed out?)`);
    /** @type {Record<string, number | null>} */
    const scores = {};
    /** @type {string[]} */
    const failed = [];
    for (const [id, c] of Object.entries(lhr.categories)) {
      scores[id] = c.score === null ? null : Math.round(c.score * 100);
      if (id === 'performance') continue;
      for (const ref of c.auditRefs) {
        const a = lhr.audits[ref.id];
        if (ref.weight > 0 && a.score !== null && a.score < 1) failed.push(`${id}: ${ref.id} (${a.title})`);
      }
    }
    out[form] = {
      scores,
      failed_audits: failed,
      first_contentful_paint_ms: Math.round(lhr.audits['first-contentful-paint'].numericValue ?? 0),
      largest_contentful_paint_ms: Math.round(lhr.audits['largest-contentful-paint'].numericValue ?? 0),
      total_blocking_time_ms: Math.round(lhr.audits['total-blocking-time'].numericValue ?? 0),
      cumulative_layout_shift: lhr.audits['cumulative-layout-shift'].numericValue,
    };
  }

  // First rows: fresh navigations in the same browser, timed in the page.
  const { chromium } = await import('playwright-core');
  const browser = await chromium.connectOverCDP(`http://127.0.0.1:${chrome.port}`);
  const context = browser.contexts()[0] ?? await browser.newContext();
  const [name, value] = cookie.split('=');
  await context.addCookies([{ name, value, url: srv.url }]);
  const page = await context.newPage();
  await page.addInitScript(() => {
    new MutationObserver((_, obs) => {
      if (document.querySelector('tr.job-row')) { performance.mark('first-row'); obs.disconnect(); }
    }).observe(document, { childList: true, subtree: true });
  });
  const nav = [];
  for (let i = 0; i < runs; ++i) {
    await page.goto('about:blank');
    await page.goto(url, { waitUntil: 'commit' });
    await page.locator('tr.job-row').first().waitFor({ timeout: 20000 });
    nav.push(await page.evaluate(() => {
      const e = performance.getEntriesByType('mark').find((m) => m.name === 'first-row');
      return e ? e.startTime : performance.now();
    }));
  }
  out.navigation_to_first_rows_ms = { median: Math.round(median(nav) * 10) / 10, runs: nav.map((v) => Math.round(v)) };
  await browser.close().catch(() => {});
  console.log(JSON.stringify(out, null, 1));
} finally {
  if (chrome) await chrome.kill();
  await srv.stop();
}
