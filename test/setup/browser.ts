/**
 * A real headless Chromium for the console's end-to-end tests: Debian's `chromium` at
 * /usr/bin/chromium (CI installs it; see .ci/run), driven by playwright-core, with a fresh profile
 * in a temporary directory. Never downloads a browser. Screenshots go to test-results/console/
 * (gitignored), one file per page, for a person to look at after a run.
 */
import { mkdirSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type BrowserContext, chromium, type Page } from 'playwright-core';

export const CHROMIUM = process.env.TOCK_CHROMIUM ?? '/usr/bin/chromium';
export const SCREENSHOTS = path.resolve(import.meta.dirname, '../../test-results/console');

const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export interface Browser {
  /** A new tab: its own sessionStorage, so its own sign-in. */
  tab(): Promise<Page>;
  /**
   * What went wrong in any tab so far: uncaught errors, and console errors such as a
   * Content-Security-Policy violation (not the browser's line for each answer of 4xx, which the
   * tests cause on purpose).
   */
  problems: string[];
  close(): Promise<void>;
}

export async function launchBrowser(): Promise<Browser> {
  const profile = await mkdtemp(path.join(tmpdir(), 'tock-chromium-'));
  const context: BrowserContext = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ARGS,
    viewport: { width: 1280, height: 800 },
  });
  mkdirSync(SCREENSHOTS, { recursive: true });
  const problems: string[] = [];
  context.on('page', (page) => {
    page.on('pageerror', (err) => problems.push(`uncaught: ${err.message}`));
    page.on('console', (m) => {
      if (m.type() === 'error' && !m.text().startsWith('Failed to load resource'))
        problems.push(`console: ${m.text()}`);
    });
  });
  return {
    problems,
    tab: () => context.newPage(),
    close: async () => {
      await context.close();
      await rm(profile, { recursive: true, force: true });
    },
  };
}

/** Writes the page as test-results/console/<name>.png. */
export async function screenshot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: path.join(SCREENSHOTS, `${name}.png`), fullPage: true });
}
