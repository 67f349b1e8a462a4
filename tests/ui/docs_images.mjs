// Copies the reviewed screenshots from build/ui-screenshots/ to docs/img/ at a smaller scale
// (Chromium draws each one scaled; no image tools needed). Run after the tests:
//   node tests/ui/docs_images.mjs [name …]   (names: only those pages)
import { readFile, stat } from 'node:fs/promises';
import { launch } from '../testbed/chromium.mjs';

const pages = ['login', 'jobs', 'jobs-failed', 'job-active', 'job-detail', 'job-failed', 'distributions',
  'distribution-detail', 'certificates', 'certificate-detail', 'certificate-distribution', 'notifications', 'settings',
  'not-found', 'acme-workflow-manual', 'acme-workflow-failed', 'domains', 'domains-empty', 'certificate-revoked',
  'certificate-revocation-unchecked', 'certificates-revocation', 'discovery', 'discovery-certificates', 'discovery-empty',
  'discovery-import', 'dns-providers', 'dashboard', 'dashboard-phone', 'certificates-bulk-renew',
  'certificates-bulk-renew-dialog', 'approval-settings', 'approval-waiting', 'approval-waiting-phone',
  'approval-reject-dialog', 'approval-job', 'approval-list', 'jobs-phone', 'approval-issue-dialog'];
const dark = new Set(['dashboard', 'login', 'jobs', 'job-active', 'distribution-detail', 'notifications', 'settings',
  'acme-workflow-manual', 'domains', 'certificate-revoked', 'discovery', 'discovery-certificates', 'approval-waiting']);
const only = process.argv.slice(2);
// Screenshots whose file is not NAME-SCHEME.png (pages.test.mjs's phone shots, SCHEME-phone, are
// full pages too tall for the docs; approval.test.mjs's phone shot is short).
/** @type {Record<string, string>} */
const files = { 'approval-waiting-phone-light': 'approval-waiting-light-phone', 'jobs-phone-light': 'jobs-light-phone' };
/** @type {Record<string, number>} */
const scales = { 'dashboard-phone': 0.8, 'jobs-phone': 0.8, dashboard: 0.66, domains: 0.64, 'certificates-revocation': 0.6, jobs: 0.64, 'distribution-detail': 0.62, 'acme-workflow-manual': 0.6, 'acme-workflow-failed': 0.56 };
const defaultScale = 0.72;
// Pages too tall for the docs: only their top this many source pixels (the Settings page's first
// sections show what the rest looks like).
/** @type {Record<string, number>} */
const crops = { settings: 1250, 'approval-job': 760, 'jobs-phone': 1100 };
const limit = 150 * 1024;

const browser = await launch();
const page = await browser.newPage();
try {
  for (const name of pages) {
    if (only.length && !only.includes(name)) continue;
    for (const scheme of ['light', 'dark']) {
      if (scheme === 'dark' && !dark.has(name)) continue;
      const src = `build/ui-screenshots/${files[`${name}-${scheme}`] ?? `${name}-${scheme}`}.png`;
      const png = await readFile(src);
      const width = png.readUInt32BE(16), height = png.readUInt32BE(20);
      const scale = scales[name] ?? defaultScale;
      const w = Math.round(width * scale), hgt = Math.round(height * scale);
      await page.setViewportSize({ width: w, height: hgt });
      await page.setContent(`<body style="margin:0"><img id="i" width="${w}" height="${hgt}" src="data:image/png;base64,${png.toString('base64')}"></body>`);
      await page.locator('#i').evaluate((img) => /** @type {HTMLImageElement} */ (img).decode());
      const out = `docs/img/ui-${name}-${scheme}.png`;
      const crop = crops[name];
      if (crop && crop < height) await page.setViewportSize({ width: w, height: Math.round(crop * scale) });
      await (crop && crop < height ? page.screenshot({ path: out }) : page.locator('#i').screenshot({ path: out }));
      const size = (await stat(out)).size;
      console.log(`${out}: ${w}x${hgt}, ${Math.round(size / 1024)} KB${size > limit ? '  (over 150 KB!)' : ''}`);
    }
  }
} finally {
  await browser.close();
}
