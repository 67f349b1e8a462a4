// The Dashboard (issue 31) against a real certfleet: the landing page after sign-in and of "/";
// its counts equal GET …/dashboard's and the Jobs list's; each count links to the list filtered
// by it; the certificates expiring within the window of certificate_expiry_thresholds_days; a
// distribution whose last run failed, linked; axe-core at any impact, light and dark; screenshots
// dashboard-{light,dark}.png and dashboard-phone-light.png.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startCertfleet, launch, signIn, catalog, runDistribution, mkdtemp, rm, tmpdir, join, shot, collectErrors, axe } from './helpers.mjs';

const P = '/api/v1/projects/default';

/** @type {Awaited<ReturnType<typeof startCertfleet>>} */
let cf;
let base = '';
let viewer = '';
/** @type {any} */
let cat;

before(async () => {
  base = await mkdtemp(join(tmpdir(), 'certfleet-ui-dash-'));
  cf = await startCertfleet({ settings: { file_target_base_dirs: base } });
  cat = await catalog(cf, base);
  // The fixture's certificate lasts 90 days: a 100-day window makes it "expiring".
  const put = await cf.api('PUT', '/api/v1/settings', { certificate_expiry_thresholds_days: '100,30,7' });
  assert.equal(put.status, 200, put.text);
  await runDistribution(cf, 'www to two hosts', cat.certificate.id, [cat.okTarget.id, cat.badTarget.id]);
  const admin = await cf.token('admin', { name: 'alice-admin' });
  await cf.enqueue('noop', {}, { token: admin, run_at: Date.now() + 3600_000 });
  await cf.enqueue('noop', {}, { token: admin, run_at: Date.now() + 3600_000 });
  const dead = await cf.enqueue('noop', { fail_times: 1, permanent: true }, { token: admin });
  await cf.waitJob(dead.id, (j) => j.status === 'dead');
  viewer = await cf.token('viewer', { name: 'victor-viewer' });
});
after(async () => {
  await cf?.stop();
  await rm(base, { recursive: true, force: true });
});

test('sign-in lands on the Dashboard; its counts are the API\'s and link to the filtered lists', async () => {
  const browser = await launch();
  try {
    const page = await browser.newPage();
    const errors = collectErrors(page);
    await signIn(page, cf.url, viewer);
    assert.equal(new URL(page.url()).pathname, '/dashboard');
    await page.getByRole('heading', { name: 'Dashboard', level: 1 }).waitFor();
    await page.locator('#dash-jobs').waitFor();
    const api = (await cf.api('GET', `${P}/dashboard`, undefined, viewer)).body;
    const list = (await cf.api('GET', `${P}/jobs`, undefined, viewer)).body;
    assert.deepEqual(api.jobs.counts, list.counts);

    // Jobs: the All types row, per status, each linking to that tab; zero is not a link.
    const total = page.locator('table.dash-jobs tr.total-row');
    const dead = total.locator('a[href*="status=dead"]');
    assert.equal(await dead.innerText(), String(list.counts.dead));
    assert.equal(await dead.getAttribute('href'), '/jobs?project=default&status=dead');
    assert.equal(await total.locator('a[href*="status=pending"]').innerText(), String(list.counts.pending));
    assert.equal(await total.locator('a[href*="status=cancelled"]').count(), 0);
    // The noop row links the type and status together.
    const noop = page.locator('table.dash-jobs tr', { hasText: 'noop' });
    assert.equal(await noop.locator('td').first().innerText(), 'main');
    assert.equal(await noop.locator('a[href*="status=dead"]').getAttribute('href'), '/jobs?project=default&type=noop&status=dead');

    // Certificates: the window comes from the setting; the soonest links the certificate.
    const certs = page.locator('section[aria-labelledby="dash-certificates"]');
    assert.equal(api.certificates.window_days, 100);
    assert.match(await certs.innerText(), /1 expiring within 100 days/);
    assert.equal(await certs.getByRole('link', { name: 'www-example' }).getAttribute('href'), `/certificates/${cat.certificate.id}?project=default`);

    // Distributions: the run that failed on its closed-port target, linked, with its error.
    const dists = page.locator('section[aria-labelledby="dash-distributions"]');
    assert.equal(api.distributions.failed, 1);
    const failed = dists.getByRole('link', { name: 'www to two hosts' });
    assert.match(String(await failed.getAttribute('href')), /^\/distributions\/[0-9a-f]{24}\?project=default$/);
    assert.match(await dists.innerText(), /Last run failed \(1\)/);

    // Checks: nothing watched here yet; the counts say so.
    assert.match(await page.locator('section[aria-labelledby="dash-checks"]').innerText(), /0 watched/);
    assert.deepEqual(await axe(page), []);
    await shot(page, 'dashboard-light');

    // "/" is the Dashboard too; the brand link goes there.
    await page.goto(`${cf.url}/jobs`);
    await page.getByRole('heading', { name: 'Job Queue' }).waitFor();
    await page.locator('a.brand').click();
    await page.waitForURL((u) => u.pathname === '/dashboard');
    await page.goto(`${cf.url}/`);
    await page.waitForURL((u) => u.pathname === '/dashboard');
    await page.locator('#dash-jobs').waitFor();
    assert.deepEqual(errors, []);
  } finally {
    await browser.close();
  }
});

test('the Dashboard dark and at phone width: no axe violation, no sideways page scroll', async () => {
  for (const [scheme, phone] of /** @type {const} */ ([['dark', false], ['light', true]])) {
    const browser = await launch({ colorScheme: scheme, ...(phone ? { viewport: { width: 360, height: 740 } } : {}) });
    try {
      const page = await browser.newPage();
      await signIn(page, cf.url, viewer);
      await page.locator('#dash-jobs').waitFor();
      assert.deepEqual(await axe(page), [], `${scheme}${phone ? ' phone' : ''}`);
      if (phone) assert.equal(await page.evaluate(() => document.documentElement.scrollWidth - innerWidth), 0);
      await shot(page, phone ? 'dashboard-phone-light' : `dashboard-${scheme}`);
    } finally {
      await browser.close();
    }
  }
});
