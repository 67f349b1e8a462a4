// Debian's Chromium driven by playwright-core (never `npx playwright install`): headless, no
// background networking (the closed network refuses it), a fresh profile per launch.
import { chromium } from 'playwright-core';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const chromiumPath = process.env.CHROMIUM ?? '/usr/bin/chromium';

const flags = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
  '--disable-default-apps', '--disable-extensions', '--mute-audio',
];

/**
 * A persistent context on a fresh user-data-dir (removed by close()).
 * extraArgs: more Chromium flags (the HTTPS test trusts its test certificate's key with
 * --ignore-certificate-errors-spki-list).
 * @param {import('playwright-core').BrowserContextOptions & {colorScheme?: 'light'|'dark', extraArgs?: string[]}} [options]
 */
export async function launch(options = {}) {
  const dir = await mkdtemp(join(tmpdir(), 'certfleet-chromium-'));
  const { extraArgs = [], ...contextOptions } = options;
  const context = await chromium.launchPersistentContext(dir, {
    executablePath: chromiumPath,
    headless: true,
    args: [...flags, ...extraArgs],
    viewport: { width: 1360, height: 900 },
    ...contextOptions,
  });
  // Only 127.0.0.1: anything else is refused before it leaves the browser.
  await context.route((url) => url.hostname !== '127.0.0.1', (route) => route.abort());
  return {
    context,
    async newPage() { return context.newPage(); },
    async close() { await context.close(); await rm(dir, { recursive: true, force: true }); },
  };
}
