/**
 * The web console (src/console) in a real headless Chromium against a real `tock server` child with
 * keys, and a `tock worker --url` child running the jobs of tenant `acme`. It proves what a person
 * at the console relies on: signing in with a key (kept in the tab's sessionStorage only); a
 * reader key gets no write button, and the API refuses its writes anyway; another tenant's jobs
 * never appear; a triggered run appears and finishes, with its output and logs; a dead letter is
 * replayed and then succeeds; a paused job has no next slot; a server without keys opens the
 * console without signing in. Each page is photographed into test-results/console/.
 */
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { screenshot } from '../setup/browser.js';
import { ConsoleHarness, eventually, SLOW, type TabWindow } from './console-harness.js';

/** `hello` prints and logs; `flaky` fails its first attempt (its job allows one, so the run dies). */
const HANDLERS = `
export default {
  hello: async (ctx) => {
    ctx.log('hello logged');
    return { output: 'hello from the console test' };
  },
  flaky: async ({ attempt }) => {
    if (attempt === 1) throw new Error('flaky fails its first attempt');
    return 'flaky succeeded';
  },
};
`;

const h = new ConsoleHarness();
const keys: Record<string, string> = {};
let url = '';
const call = (key: string, method: string, p: string, body?: unknown) => h.call(key, method, p, body);
const signIn = (key: string) => h.signIn(key);

/** Clicks `label` (in `scope`), then the confirming button of the dialog that opens. */
async function confirmAction(page: Page, scope: ReturnType<Page['locator']>, label: string, confirm = label) {
  await scope.getByRole('button', { name: label, exact: true }).click();
  await page.getByRole('dialog').getByRole('button', { name: confirm, exact: true }).click();
}

beforeAll(async () => {
  await h.start();
  keys.operator = await h.makeKey('acme', 'operator');
  keys.reader = await h.makeKey('acme', 'reader');
  keys.worker = await h.makeKey('acme', 'worker');
  keys.other = await h.makeKey('globex', 'operator');

  // A lease longer than the worker's long-poll wait: a remote worker dates a lease from when its
  // claim was sent, so a run claimed late in a long wait under a shorter lease is dropped unstarted.
  url = (await h.server(['--lease', '30s', '--tick', '200ms'])).url;
  await h.worker(keys.worker, HANDLERS, 'console-worker');

  for (const [id, body] of [
    ['nightly', { schedule: '@every 1h', handler: 'hello' }],
    ['flaky', { schedule: '@every 1h', handler: 'flaky', max_attempts: 1 }],
    ['pausable', { schedule: '@every 1h', handler: 'hello' }],
  ] as const) {
    expect((await call(keys.operator, 'PUT', `/v1/jobs/${id}`, body)).status).toBe(200);
  }
  expect(
    (await call(keys.other, 'PUT', '/v1/jobs/globex-secret', { schedule: '@every 1h', handler: 'x' })).status,
  ).toBe(200);
}, 90_000);

afterAll(() => h.close());

// Each step of these tests waits at most SLOW on its own, and a test takes several: the test's bound
// is their sum, so a slow step fails with its own message, not the test runner's 30 s timeout.
describe('the web console', { timeout: 4 * SLOW }, () => {
  test('signs in with a key kept in sessionStorage only, and shows the tenant, the role and its jobs only', async () => {
    const page = await h.browser.tab();
    await page.goto(url);
    await page.getByLabel('API key').waitFor();
    await screenshot(page, '01-sign-in');
    await page.getByLabel('API key').fill('tock_not-a-key');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByText('That key is unknown or revoked.').waitFor();

    await page.getByLabel('API key').fill(keys.operator!);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.getByTestId('tenant').textContent()).toBe('acme');
    expect(await page.getByTestId('role').textContent()).toBe('operator');
    await page.locator('tr[data-job="flaky"]').waitFor();
    const jobs = await page.locator('tr[data-job]').evaluateAll((rows) => rows.map((r) => r.dataset.job));
    expect(jobs.sort()).toEqual(['flaky', 'nightly', 'pausable']);
    await screenshot(page, '02-jobs');

    const stored = await page.evaluate(() => {
      const w = globalThis as unknown as TabWindow;
      return {
        session: w.sessionStorage.getItem('tock.key'),
        local: w.localStorage.length,
        href: w.location.href,
      };
    });
    expect(stored.session).toBe(keys.operator);
    expect(stored.local).toBe(0);
    expect(stored.href).not.toContain(keys.operator!);

    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('API key').waitFor();
    expect(
      await page.evaluate(() => (globalThis as unknown as TabWindow).sessionStorage.getItem('tock.key')),
    ).toBeNull();
    await page.close();
  });

  test("another tenant's key sees its own jobs, never acme's", async () => {
    const page = await signIn(keys.other!);
    await page.locator('tr[data-job="globex-secret"]').waitFor();
    expect(await page.locator('tr[data-job]').count()).toBe(1);
    await page.goto(`${url}/#/jobs/nightly`);
    await page.getByRole('alert').getByText('job "nightly" does not exist', { exact: false }).waitFor();
    await page.close();
  });

  test('a reader key sees no write button, and the API refuses its writes', async () => {
    const page = await signIn(keys.reader!);
    expect(await page.getByTestId('role').textContent()).toBe('reader');
    await page.locator('tr[data-job="nightly"]').waitFor();
    for (const name of ['Pause', 'Resume', 'Trigger', 'Delete', 'Replay', 'Cancel run'])
      expect(await page.getByRole('button', { name, exact: true }).count()).toBe(0);
    await page.locator('tr[data-job="nightly"]').getByRole('link', { name: 'nightly' }).click();
    await page.getByRole('heading', { name: 'Definition' }).waitFor();
    expect(await page.getByRole('button', { name: 'Pause', exact: true }).count()).toBe(0);
    await screenshot(page, '03-job-as-reader');
    // The same request a write button would make, from the page with the tab's key: refused.
    const status = await page.evaluate(async () => {
      const key = (globalThis as unknown as TabWindow).sessionStorage.getItem('tock.key');
      const res = await fetch('/v1/jobs/nightly/pause', {
        method: 'POST',
        headers: { authorization: `Bearer ${key}` },
      });
      return res.status;
    });
    expect(status).toBe(403);
    expect((await call(keys.operator!, 'GET', '/v1/jobs/nightly')).json.state).toBe('active');
    await page.close();
  });

  test('triggering a job shows its run appear and finish, with its output and logs', async () => {
    const page = await signIn(keys.operator!);
    const row = page.locator('tr[data-job="nightly"]');
    await confirmAction(page, row, 'Trigger', 'Trigger now');
    await page.getByRole('status').getByText('of job nightly is pending').waitFor({ timeout: SLOW });
    await row.getByRole('link', { name: 'nightly' }).click();
    const history = page.getByRole('table', { name: /Runs of nightly/ });
    await history.getByText('succeeded').waitFor({ timeout: SLOW });
    await screenshot(page, '04-job');
    await history.getByRole('link').first().click();
    await page.getByText('hello from the console test').waitFor({ timeout: SLOW });
    await page.getByText('hello logged').waitFor();
    expect(await page.getByTestId('run-state').textContent()).toBe('succeeded');
    await screenshot(page, '05-run');
    await page.close();
  });

  test('a dead letter is listed, inspected and replayed', async () => {
    const trigger = await call(keys.operator!, 'POST', '/v1/jobs/flaky/runs');
    expect(trigger.status).toBe(201);
    const runId: string = trigger.json.run_id;
    await eventually(
      'the flaky run is dead',
      () => call(keys.operator!, 'GET', `/v1/runs/${runId}`),
      (r) => r.json.state === 'dead',
    );
    const page = await signIn(keys.operator!);
    await page.getByRole('link', { name: 'Dead letters' }).click();
    const row = page.getByRole('row').filter({ hasText: runId });
    await row.getByText('flaky fails its first attempt').waitFor({ timeout: SLOW });
    await screenshot(page, '06-dead-letters');
    await confirmAction(page, row, 'Replay');
    await page.getByRole('status').getByText(`Run ${runId} is queued again.`).waitFor({ timeout: SLOW });
    await page.goto(`${url}/#/runs/${runId}`);
    await expect.poll(() => page.getByTestId('run-state').textContent(), { timeout: SLOW }).toBe('succeeded');
    await page.getByText('flaky succeeded').waitFor();
    await page.getByRole('heading', { name: /Attempt 1/ }).waitFor();
    await page.close();
  });

  test('pausing a job stops its next slot; resuming brings one back', async () => {
    const page = await signIn(keys.operator!);
    const row = page.locator('tr[data-job="pausable"]');
    await row.getByTestId('next-slot').locator('time').waitFor();
    await confirmAction(page, row, 'Pause');
    await row.getByText('paused').waitFor({ timeout: SLOW });
    expect(await row.getByTestId('next-slot').textContent()).toBe('none');
    const job = await call(keys.operator!, 'GET', '/v1/jobs/pausable');
    expect(job.json).toMatchObject({ state: 'paused', next_run_at: null });
    await confirmAction(page, row, 'Resume');
    await row.getByTestId('next-slot').locator('time').waitFor({ timeout: SLOW });
    await page.close();
  });

  test('a server without keys (--insecure, as tock dev) opens the console without signing in', async () => {
    const open = await h.server(['--insecure', '--tick', '200ms'], 'the open server to listen');
    const page = await h.browser.tab();
    await page.goto(open.url);
    await page.getByRole('heading', { name: 'Jobs' }).waitFor({ timeout: SLOW });
    expect(await page.getByTestId('tenant').textContent()).toBe('default');
    expect(await page.getByTestId('role').textContent()).toBe('cluster-admin');
    await page.getByText('open mode: no key').waitFor();
    expect(await page.getByRole('button', { name: 'Sign out' }).count()).toBe(0);
    await page.getByText('No jobs yet.').waitFor({ timeout: SLOW });
    await page.close();
    open.process.child.kill('SIGTERM');
    await open.process.exited;
  });

  test('runs now and cluster pages load for an operator', async () => {
    const page = await signIn(keys.operator!);
    // The jobs after the tests above: each with its newest run (docs/console.png is this picture).
    await page.locator('tr[data-job="flaky"]').getByTestId('last-run').getByText('succeeded').waitFor();
    await screenshot(page, '09-jobs-after');
    await page.getByRole('link', { name: 'Runs now' }).click();
    await page.getByRole('heading', { name: 'Running' }).waitFor();
    await screenshot(page, '07-runs-now');
    await page.getByRole('link', { name: 'Cluster' }).click();
    await page.getByText("Your tenant's remote workers").waitFor({ timeout: SLOW });
    await page.getByRole('cell', { name: 'acme/console-worker' }).waitFor({ timeout: SLOW });
    await screenshot(page, '08-cluster');
    await page.close();
  });

  test('no tab had an uncaught error or a Content-Security-Policy violation', () => {
    expect(h.browser.problems).toEqual([]);
  });
});
