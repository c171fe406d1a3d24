/**
 * The console's operator features (issue 22) in a real headless Chromium against a real `tock
 * server` child with keys, and a `tock worker --url` child: the Jobs page searches on the server
 * (a job past the first page is found); the Dead letters page counts what a filter picks before it
 * replays, shows the count in its confirmation, and replays only those; a reader gets no bulk
 * button. Each new view is photographed into test-results/console/ (`ops-*.png`).
 */
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { screenshot } from '../setup/browser.js';
import { ConsoleHarness, eventually, SLOW } from './console-harness.js';

/** `doomed` always fails: with max_attempts 1 each of its runs dies at once. */
const HANDLERS = `
export default {
  hello: async () => 'hello',
  doomed: async () => {
    throw new Error('doomed: upstream refused');
  },
};
`;

/** Where the notification sends: port 9 (discard), on which nothing listens here. */
const HOOK = 'http://127.0.0.1:9/';

const h = new ConsoleHarness();
const keys: Record<string, string> = {};
const call = h.call.bind(h);
const signIn = h.signIn.bind(h);

const shownJobs = (page: Page) =>
  page
    .locator('tr[data-job]')
    .evaluateAll((rows) => rows.map((r) => (r as unknown as { dataset: { job: string } }).dataset.job));

/** The dead runs of `jobId`, through the API. */
const deadOf = async (jobId: string): Promise<string[]> =>
  (await call(keys.operator!, 'GET', `/v1/runs?state=dead&job_id=${jobId}`)).json.runs.map(
    (r: { run_id: string }) => r.run_id,
  );

beforeAll(async () => {
  await h.start();
  keys.admin = await h.makeKey('acme', 'admin');
  keys.operator = await h.makeKey('acme', 'operator');
  keys.reader = await h.makeKey('acme', 'reader');
  keys.worker = await h.makeKey('acme', 'worker');
  keys.other = await h.makeKey('globex', 'operator');
  // Deliveries go to a loopback port nothing listens on: each attempt fails, and the log says why.
  await h.server(['--lease', '30s', '--tick', '200ms', '--notify-allow', HOOK]);
  await h.worker(keys.worker, HANDLERS, 'console-ops-worker');

  // 30 fillers put `zeta.late` past the Jobs page's first 25.
  const jobs: [string, Record<string, unknown>][] = [
    ['billing.invoice', { schedule: '@every 1h', handler: 'hello' }],
    ['billing.refund', { schedule: '@every 1h', handler: 'hello', pool: 'money' }],
    ['zeta.late', { schedule: '@every 1h', handler: 'hello' }],
    ['stuck', { schedule: '@every 24h', handler: 'ghost', pool: 'nowhere' }],
    ['berlin.nightly', { schedule: '30 2 * * *', timezone: 'Europe/Berlin', handler: 'hello' }],
    ['doomed', { schedule: '@every 24h', handler: 'doomed', max_attempts: 1 }],
    ['doomed-too', { schedule: '@every 24h', handler: 'doomed', max_attempts: 1 }],
    ...Array.from({ length: 30 }, (_, i): [string, Record<string, unknown>] => [
      `filler-${String(i).padStart(2, '0')}`,
      { schedule: '@every 24h', handler: 'hello' },
    ]),
  ];
  const put = await call(keys.operator!, 'PUT', '/v1/jobs', {
    jobs: jobs.map(([job_id, body]) => ({ job_id, ...body })),
  });
  expect(put.status).toBe(200);
  expect(
    (await call(keys.other!, 'PUT', '/v1/jobs/billing.globex', { schedule: '@every 1h', handler: 'x' }))
      .status,
  ).toBe(200);
  const hook = await call(keys.admin!, 'PUT', '/v1/notifications/ops-hook', {
    url: `${HOOK}hook`,
    events: ['run.dead'],
  });
  expect(hook.status).toBe(201);
}, 90_000);

afterAll(() => h.close());

describe('the console: operator features', { timeout: 4 * SLOW }, () => {
  test('the Jobs search is the server’s: it finds a job past the first page, of the tenant only', async () => {
    const page = await signIn(keys.operator!);
    await page.locator('tr[data-job="billing.invoice"]').waitFor();
    expect(await shownJobs(page)).not.toContain('zeta.late');

    await page.getByLabel('Job id starts with').fill('zeta');
    await page.locator('tr[data-job="zeta.late"]').waitFor({ timeout: SLOW });
    await expect.poll(() => shownJobs(page), { timeout: SLOW }).toEqual(['zeta.late']);

    await page.getByLabel('Job id starts with').fill('billing.');
    await expect
      .poll(() => shownJobs(page), { timeout: SLOW })
      .toEqual(['billing.invoice', 'billing.refund']);
    await page.getByLabel('Pool').fill('money');
    await expect.poll(() => shownJobs(page), { timeout: SLOW }).toEqual(['billing.refund']);
    await screenshot(page, 'ops-01-jobs-search');

    // `%` is a character like any other: nothing starts with it.
    await page.getByLabel('Pool').fill('');
    await page.getByLabel('Job id starts with').fill('%');
    await page.getByText('No job matches.').waitFor({ timeout: SLOW });
    await page.close();
  });

  test('Dead letters: "Replay matching…" shows the count first, then replays only what matches', async () => {
    for (const [jobId, n] of [
      ['doomed', 3],
      ['doomed-too', 2],
    ] as const) {
      for (let i = 0; i < n; i++) {
        const at = new Date(Date.now() - (i + 1) * 60_000).toISOString();
        expect(
          (await call(keys.operator!, 'POST', `/v1/jobs/${jobId}/runs`, { scheduled_for: at })).status,
        ).toBe(201);
      }
      await eventually(
        `${n} runs of ${jobId} are dead`,
        () => deadOf(jobId),
        (d) => d.length === n,
      );
    }
    const before = new Set(await deadOf('doomed'));

    const page = await signIn(keys.operator!);
    await page.getByRole('link', { name: 'Dead letters' }).click();
    await page.getByRole('heading', { name: 'Dead letters' }).waitFor();
    await page.getByLabel('Job', { exact: true }).fill('doomed');
    await page.getByLabel('Last error holds').fill('UPSTREAM');
    await page.getByRole('button', { name: 'Replay matching…' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByText('Replay 3 dead runs of job doomed whose last error holds "UPSTREAM"?').waitFor();
    await screenshot(page, 'ops-02-dead-replay-confirm');
    // Cancel changes nothing.
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    expect(new Set(await deadOf('doomed'))).toEqual(before);

    await page.getByRole('button', { name: 'Replay matching…' }).click();
    await dialog.getByRole('button', { name: 'Replay 3', exact: true }).click();
    await page.getByRole('status').getByText('Replayed 3 dead runs.').waitFor({ timeout: SLOW });
    await screenshot(page, 'ops-03-dead-replayed');
    // Each was replayed once (attempt 2 of a fresh budget); doomed-too's were left alone.
    for (const id of before) {
      const run = await eventually(
        `run ${id} ran again`,
        () => call(keys.operator!, 'GET', `/v1/runs/${id}`),
        (r) => r.json.attempt === 2,
      );
      expect(run.json.max_attempts).toBe(2);
    }
    const other = await call(keys.operator!, 'GET', '/v1/runs?state=dead&job_id=doomed-too');
    expect(other.json.runs.every((r: { attempt: number }) => r.attempt === 1)).toBe(true);
    expect(other.json.runs).toHaveLength(2);
    await page.close();
  });

  test('a reader gets no bulk replay button; the API refuses its bulk replay, with nothing replayed', async () => {
    const page = await signIn(keys.reader!);
    await page.getByRole('link', { name: 'Dead letters' }).click();
    await page.getByRole('heading', { name: 'Dead letters' }).waitFor();
    await page.getByRole('table').waitFor({ timeout: SLOW });
    expect(await page.getByRole('button', { name: 'Replay matching…' }).count()).toBe(0);
    const refused = await call(keys.reader!, 'POST', '/v1/runs/replay', { job_id: 'doomed-too' });
    expect(refused.status).toBe(403);
    expect(await deadOf('doomed-too')).toHaveLength(2);
    await page.close();
  });

  test("a job's page previews its next slots with daylight-saving notes; the Jobs page previews any expression", async () => {
    const page = await signIn(keys.operator!);
    await page.goto(`${h.url}/#/jobs/berlin.nightly`);
    const preview = page.getByTestId('schedule-preview');
    await preview.getByRole('table').waitFor({ timeout: SLOW });
    expect(await preview.locator('tbody tr').count()).toBe(5);
    expect(await preview.textContent()).toMatch(/\+0[12]:00/);
    await screenshot(page, 'ops-04-job-schedule-preview');

    await page.getByRole('navigation').getByRole('link', { name: 'Jobs', exact: true }).first().click();
    await page.getByText('Preview a schedule').click();
    await page.getByLabel('Expression').fill('30 2 * * *');
    await page.getByLabel('Timezone').fill('Europe/Berlin');
    // Five slots from today rarely cross a change of the clocks: the notes of a fixed date are
    // checked through the API below (test/api/schedule.test.ts checks them in full).
    await page.getByTestId('schedule-preview').getByRole('table').waitFor({ timeout: SLOW });
    await screenshot(page, 'ops-05-jobs-schedule-try');
    await page.getByLabel('Timezone').fill('Mars/Olympus');
    await page.getByTestId('schedule-preview').getByRole('alert').waitFor({ timeout: SLOW });

    const answer = await call(
      keys.reader!,
      'GET',
      '/v1/schedule?expression=30%202%20*%20*%20*&timezone=Europe/Berlin&count=3&from=2026-03-27T12:00:00Z',
    );
    expect(answer.json.slots[1].notes).toContain('the local time was skipped; fires at the transition');
    await page.close();
  });

  test('Runs now says why each pending run waits', async () => {
    const at = new Date(Date.now() - 60_000).toISOString();
    const run = await call(keys.operator!, 'POST', '/v1/jobs/stuck/runs', { scheduled_for: at });
    expect(run.status).toBe(201);
    const page = await signIn(keys.reader!);
    await page.getByRole('link', { name: 'Runs now' }).click();
    const row = page.getByRole('row').filter({ hasText: run.json.run_id });
    await row
      .getByTestId('waiting-for')
      .getByText('no live worker serves handler ghost in pool nowhere')
      .waitFor({ timeout: SLOW });
    await screenshot(page, 'ops-06-runs-now-waiting');
    await page.close();
  });

  test('Notifications lists the webhooks, and one its deliveries with state, attempts, last error and next attempt', async () => {
    // The dead runs of the test before each made a run.dead delivery, which fails (nothing listens).
    const log = await eventually(
      'a delivery was attempted',
      () => call(keys.reader!, 'GET', '/v1/notifications/ops-hook/deliveries'),
      (a) => a.json.deliveries.some((d: { attempts: number }) => d.attempts > 0),
    );
    const page = await signIn(keys.reader!);
    await page.getByRole('link', { name: 'Notifications' }).click();
    const row = page.locator('tr[data-notification="ops-hook"]');
    await row.waitFor({ timeout: SLOW });
    expect(await row.textContent()).toContain('run.dead');
    await screenshot(page, 'ops-07-notifications');

    await row.getByRole('link', { name: 'ops-hook' }).click();
    await page.getByRole('heading', { name: 'Deliveries, newest first' }).waitFor();
    const tried = log.json.deliveries.find((d: { attempts: number }) => d.attempts > 0);
    const delivery = page.locator(`tr[data-delivery="${tried.delivery_id}"]`);
    await delivery.waitFor({ timeout: SLOW });
    const text = (await delivery.textContent()) ?? '';
    expect(text).toContain('run.dead');
    expect(text).toMatch(/pending|failed/);
    expect(tried.last_error).toEqual(expect.any(String));
    await delivery.getByText(tried.last_error.slice(0, 20), { exact: false }).waitFor();
    await screenshot(page, 'ops-08-notification-deliveries');

    // Another tenant's key has no such notification.
    const theirs = await call(keys.other!, 'GET', '/v1/notifications/ops-hook/deliveries');
    expect(theirs.status).toBe(404);
    await page.close();
  });

  test('no tab had an uncaught error or a Content-Security-Policy violation', () => {
    expect(h.browser.problems).toEqual([]);
  });
});
