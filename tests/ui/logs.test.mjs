// The logs card: live streaming over the WebSocket, auto-scroll that pauses when scrolled up and
// resumes at the bottom, no gap and no duplicate after a forced reconnect, the full refetch on
// `end`, level tags, bold [tags] and IP:port, detail blocks, the filter, and a 100,000-line log.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startCertfleet, launch, signIn, sleep, collectErrors } from './helpers.mjs';

/** @type {Awaited<ReturnType<typeof startCertfleet>>} */
let cf;
/** @type {Awaited<ReturnType<typeof launch>>} */
let browser;
/** @type {import('playwright-core').Page} */
let page;

before(async () => {
  cf = await startCertfleet();
  browser = await launch();
  page = await browser.newPage();
  await signIn(page, cf.url, await cf.token('viewer', { name: 'log-reader' }));
});
after(async () => {
  await browser?.close();
  await cf?.stop();
});

async function counts() {
  return page.locator('#log-count').evaluate((el) => ({
    total: Number(/** @type {HTMLElement} */ (el).dataset.total), last: Number(/** @type {HTMLElement} */ (el).dataset.lastSeq) }));
}
async function scrollInfo() {
  return page.locator('.vviewport').evaluate((el) => ({ top: el.scrollTop, height: el.clientHeight, scroll: el.scrollHeight }));
}

test('a live log streams, auto-scroll pauses and resumes, a forced reconnect leaves no gap or duplicate', { timeout: 90000 }, async () => {
  const errors = collectErrors(page);
  const N = 600;
  const job = await cf.enqueue('noop', { lines: N, line_ms: 20 });
  /** @type {string[]} */
  const urls = [];
  let connections = 0;
  /** @type {import('playwright-core').WebSocketRoute | null} */
  let first = null;
  let firstLines = 0;
  await page.routeWebSocket(/\/logs\/stream/, (ws) => {
    urls.push(ws.url());
    const n = ++connections;
    if (n === 1) first = ws;
    const server = ws.connectToServer();
    server.onMessage((m) => {
      if (n === 1) {
        try { firstLines += (JSON.parse(String(m)).lines ?? []).length; } catch { /* not JSON */ }
      }
      ws.send(m);
    });
    ws.onMessage((m) => server.send(m));
  });
  await page.goto(`${cf.url}/jobs/${job.id}`);
  await page.locator('#log-stream-state', { hasText: 'Auto-refreshing' }).waitFor();
  await page.waitForFunction(() => Number(document.querySelector('#log-count')?.getAttribute('data-total')) >= 60);
  // Auto-scroll follows the new lines.
  let s = await scrollInfo();
  assert.ok(s.top + s.height >= s.scroll - 30, `at the bottom: ${JSON.stringify(s)}`);
  assert.equal(await page.locator('#autoscroll-state').getAttribute('data-state'), 'on');

  // Force a reconnect: the browser side of the first socket is closed under the page.
  const before = await counts();
  /** @type {any} */ (first).close({ code: 4000, reason: 'test: dropped' });
  await page.waitForFunction(() => Number(document.querySelector('#log-count')?.getAttribute('data-total')) >= 200);
  assert.ok(connections >= 2, 'the page reconnected');
  const after = new URL(urls[1]).searchParams.get('after');
  assert.ok(Number(after) >= before.last, `reconnected from the last seq seen (${after} ≥ ${before.last})`);
  const mid = await counts();
  assert.equal(mid.total, mid.last, `no gap, no duplicate while live: ${JSON.stringify(mid)}`);
  const seqs = await page.locator('.log-row').evaluateAll((rows) => rows.map((r) => Number(r.getAttribute('data-seq'))));
  assert.equal(new Set(seqs).size, seqs.length, 'no duplicate row on screen');

  // Scrolling up pauses the auto-scroll; new lines do not move the view.
  await page.locator('.vviewport').hover();
  await page.mouse.wheel(0, -3000);
  await page.locator('#autoscroll-state[data-state="paused"]').waitFor();
  const pausedTop = (await scrollInfo()).top;
  await page.waitForFunction((t) => Number(document.querySelector('#log-count')?.getAttribute('data-total')) >= t + 40, mid.total);
  s = await scrollInfo();
  assert.ok(Math.abs(s.top - pausedTop) < 2, `the view stayed while paused (${pausedTop} -> ${s.top})`);
  assert.ok(s.top + s.height < s.scroll - 100, 'no longer at the bottom');
  // Scrolling back to the bottom resumes it.
  await page.mouse.wheel(0, 1e6);
  await page.locator('#autoscroll-state[data-state="on"]').waitFor();
  const c = await counts();
  await page.waitForFunction((t) => Number(document.querySelector('#log-count')?.getAttribute('data-total')) >= t + 20, c.total);
  s = await scrollInfo();
  assert.ok(s.top + s.height >= s.scroll - 30, 'following again');

  // The end: the whole log once more, every line exactly once.
  await page.locator('#live-tag').waitFor({ state: 'hidden', timeout: 60000 });
  await page.waitForFunction((n) => document.querySelector('#log-count')?.textContent === `${n} lines`, N, { timeout: 15000 });
  const end = await counts();
  assert.equal(end.total, N);
  assert.equal(end.last, N);
  await page.locator('#log-stream-state').waitFor({ state: 'hidden' });
  assert.ok(firstLines > 0);
  await page.unrouteAll({ behavior: 'ignoreErrors' });
  assert.deepEqual(errors.filter((e) => !/WebSocket/.test(e)), []);
});

test('level tags and row colours, bold tags and IP:port, the detail block, the filter', async () => {
  const job = await cf.enqueue('noop', { lines: 40 });
  await cf.waitJob(job.id, (j) => j.status === 'completed');
  await page.goto(`${cf.url}/jobs/${job.id}`);
  await page.waitForFunction(() => document.querySelector('#log-count')?.textContent === '40 lines');
  const warn = page.locator('.log-row.level-warn').first();
  assert.equal(await warn.locator('.tag.level').innerText(), 'WARN');
  assert.equal(await page.locator('.log-row.level-error .tag.level').first().innerText(), 'ERROR');
  assert.equal(await page.locator('.log-row.level-info .tag.level').first().innerText(), 'INFO');
  const bold = await page.locator('.log-row').first().locator('strong').allInnerTexts();
  assert.ok(bold.includes('[noop]'), `bold ${bold}`);
  assert.ok(bold.some((b) => /^127\.0\.0\.1:\d+$/.test(b)), `bold ${bold}`);
  // The filter, kept in the URL.
  await page.getByLabel('Filter log lines').fill('line 20 of');
  await page.waitForFunction(() => document.querySelector('#log-count')?.textContent === '1 of 40 lines');
  assert.match(page.url(), /q=line\+20\+of|q=line%2020%20of/);
  // Line 20 has a detail: it opens in a scrollable monospace block.
  await page.getByRole('button', { name: 'Detail' }).click();
  await page.locator('#log-detail pre', { hasText: 'every tenth line has a detail' }).waitFor();
  await page.getByRole('button', { name: 'Close' }).click();
  await page.locator('#log-detail').waitFor({ state: 'hidden' });
});

test('a 100,000-line log stays usable: only the visible rows are in the page', { timeout: 240000 }, async () => {
  const job = await cf.enqueue('noop', { lines: 100000 });
  await cf.waitJob(job.id, (j) => j.status === 'completed', 200000);
  const t0 = Date.now();
  await page.goto(`${cf.url}/jobs/${job.id}`);
  await page.waitForFunction(() => document.querySelector('#log-count')?.textContent === '100000 lines', null, { timeout: 120000 });
  const loaded = Date.now() - t0;
  const rows = await page.locator('.log-row').count();
  assert.ok(rows > 10 && rows < 200, `${rows} rows in the DOM`);
  // Jump to the middle and filter: both answer quickly.
  const t1 = Date.now();
  await page.locator('.vviewport').evaluate((el) => { el.scrollTop = el.scrollHeight / 2; });
  await page.waitForFunction(() => [...document.querySelectorAll('.log-row')].some((r) => Math.abs(Number(r.getAttribute('data-seq')) - 50000) < 100));
  const jumped = Date.now() - t1;
  await page.getByLabel('Filter log lines').fill('line 77777 of');
  await page.waitForFunction(() => document.querySelector('#log-count')?.textContent === '1 of 100000 lines');
  assert.ok(jumped < 2000, `scrolling to the middle took ${jumped} ms`);
  console.log(`100,000 lines: loaded in ${loaded} ms, scrolled to the middle in ${jumped} ms`);
  void sleep;
});
