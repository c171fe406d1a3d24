/**
 * Issue 22's console items in a real headless Chromium against a real `tock server` child: the delay
 * charts and the Limits page render the numbers the API and `/metrics` report. A job's two runs
 * start late by known, different amounts (triggered a pause apart, before any worker runs); then
 * the job page's "largest delay of the last 5 minutes" must equal
 * `tock_job_scheduling_delay_seconds` scraped from `/metrics` for that job (the same figure: the
 * largest delay of its runs with a slot in the window), and each chart's table must equal
 * `GET /v1/delay` over the window the chart shows; the canvas must have drawn the lines. A limit
 * out of tokens holds a run back: the Limits page shows it held, as `GET /v1/limits` and
 * `tock_limit_held_runs` do. Pages are photographed into test-results/console/.
 */
import type { Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { screenshot } from '../setup/browser.js';
import { ConsoleHarness, eventually, SLOW } from './console-harness.js';

const HANDLERS = `
export default {
  hello: async () => 'hello',
};
`;

/** The pause between the two triggers of `late`, and between the second and the worker's start, ms. */
const APART_MS = 1500;

/**
 * The jobs' schedule: a slot only on 29 February, so no scheduled run joins the triggered ones
 * while the test runs (an hourly job would get one if the test crossed the hour).
 */
const RARELY = '0 0 29 2 *';

const h = new ConsoleHarness();
const keys: Record<string, string> = {};

/** The value of `name{tenant="acme",<label>="<value>"}` in a /metrics text, or null. */
function gauge(text: string, name: string, label: string, value: string): number | null {
  const line = text.split('\n').find((l) => l.startsWith(`${name}{tenant="acme",${label}="${value}"} `));
  return line === undefined ? null : Number(line.slice(line.lastIndexOf(' ') + 1));
}

async function scrape(): Promise<string> {
  const a = await h.call(keys.admin!, 'GET', '/metrics');
  expect(a.status, a.text).toBe(200);
  return a.text;
}

/** A run's delay, ms (to the ms the API's instants carry): its start minus when it became due. */
const delayMs = (r: { started_at: string; available_at: string; created_at: string }) =>
  Date.parse(r.started_at) - Math.max(Date.parse(r.available_at), Date.parse(r.created_at));

interface ShownChart {
  from: string;
  to: string;
  step: string;
  rows: { start: string; cells: [string, string, string][] }[];
}

/** A chart's window and the rows of its table as the page shows them, read at once. */
function readChart(figure: Locator): Promise<ShownChart> {
  return figure.evaluate((f) => ({
    from: f.dataset.from ?? '',
    to: f.dataset.to ?? '',
    step: f.dataset.step ?? '',
    rows: [...f.querySelectorAll('tbody tr')].map((tr) => ({
      start: (tr as typeof f).dataset.bucket ?? '',
      cells: [...tr.querySelectorAll('td[data-stat]')].map((td) => {
        const d = (td as typeof f).dataset;
        return [d.stat ?? '', d.seconds ?? '', td.textContent ?? ''] as [string, string, string];
      }),
    })),
  }));
}

/**
 * The chart's table equals `GET /v1/delay` over the chart's window (`query`: its pool or job): a
 * row per bucket with runs, each statistic's exact seconds and its text to the ms.
 */
async function expectChartMatchesApi(
  page: Page,
  testId: string,
  query: Record<string, string>,
  stats: string[],
) {
  const figure = page.getByTestId(testId);
  await figure.locator('tbody tr').first().waitFor({ state: 'attached', timeout: SLOW });
  const shown = await readChart(figure);
  const q = new URLSearchParams({ ...query, from: shown.from, to: shown.to, step: `${shown.step}s` });
  const api = await h.call(keys.reader!, 'GET', `/v1/delay?${q}`);
  expect(api.status, api.text).toBe(200);
  const expected = (api.json.buckets as Record<string, number | null | string>[])
    .filter((b) => (b.runs as number) > 0)
    .map((b) => ({
      start: b.start as string,
      cells: stats.map((s) => {
        const v = b[s] as number;
        return [s, String(v), `${v.toFixed(3)} s`];
      }),
    }));
  expect(expected.length).toBeGreaterThan(0);
  expect(shown.rows).toEqual(expected);
  return api.json;
}

/** Pixels of the chart's canvas in one of the lines' colours (p50, p99, max): 0 if nothing was drawn. */
function linePixels(page: Page, testId: string): Promise<number> {
  return page
    .getByTestId(testId)
    .locator('canvas')
    .evaluate((c) => {
      const canvas = c as unknown as {
        width: number;
        height: number;
        getContext(kind: '2d'): {
          getImageData(x: number, y: number, w: number, h: number): { data: number[] };
        };
      };
      const { data } = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height);
      const colours = [
        [0x0a, 0x55, 0xc4],
        [0x8a, 0x12, 0x12],
        [0x6b, 0x4a, 0x00],
      ];
      let n = 0;
      for (let i = 0; i < data.length; i += 4) {
        const [r, g, b, a] = [data[i]!, data[i + 1]!, data[i + 2]!, data[i + 3]!];
        if (
          a > 200 &&
          colours.some(([cr, cg, cb]) => Math.abs(r - cr!) + Math.abs(g - cg!) + Math.abs(b - cb!) < 24)
        )
          n++;
      }
      return n;
    });
}

beforeAll(async () => {
  await h.start();
  keys.operator = await h.makeKey('acme', 'operator');
  keys.reader = await h.makeKey('acme', 'reader');
  keys.worker = await h.makeKey('acme', 'worker');
  keys.admin = await h.makeKey('acme', 'cluster-admin');
  await h.server(['--lease', '30s', '--tick', '200ms']);
  for (const [id, body] of [
    ['late', { schedule: RARELY, handler: 'hello' }],
    ['paced', { schedule: RARELY, handler: 'hello', limits: ['paced-api'] }],
  ] as const) {
    if (id === 'paced') {
      // One start per 1000 s: the second run waits on it.
      const limit = await h.call(keys.operator, 'PUT', '/v1/limits/paced-api', { rate: 0.001, burst: 1 });
      expect(limit.status, limit.text).toBe(201);
    }
    const put = await h.call(keys.operator, 'PUT', `/v1/jobs/${id}`, body);
    expect(put.status, put.text).toBe(200);
  }
  const cap = await h.call(keys.operator, 'PUT', '/v1/limits/db-pool', { max_concurrency: 3 });
  expect(cap.status, cap.text).toBe(201);
}, 90_000);

afterAll(() => h.close());

describe('the console charts and limits', { timeout: 6 * SLOW }, () => {
  test("the job page's delay is /metrics' tock_job_scheduling_delay_seconds, and its chart is GET /v1/delay", async () => {
    // Two runs due a pause apart, and no worker until a pause after the second: each starts late by
    // a different amount, the first by the most. The pauses are what is measured, not a wait for an event.
    for (const _ of [1, 2]) {
      const t = await h.call(keys.operator!, 'POST', '/v1/jobs/late/runs');
      expect(t.status, t.text).toBe(201);
      await new Promise((r) => setTimeout(r, APART_MS));
    }
    await h.worker(keys.worker!, HANDLERS, 'charts-worker');
    const runs = await eventually(
      "both of late's runs succeeded",
      async () =>
        (await h.call(keys.reader!, 'GET', '/v1/jobs/late/runs')).json.runs as Record<string, string>[],
      (rs) => rs.length === 2 && rs.every((r) => r.state === 'succeeded'),
    );
    const delays = runs.map((r) => delayMs(r as never)).sort((a, b) => a - b);
    expect(delays[1]! - delays[0]!).toBeGreaterThan(APART_MS / 2);

    // The gauge once a sample has read the ended runs (a sample is at most 15 s old): the largest.
    const metric = await eventually(
      "/metrics reports late's largest delay",
      async () => gauge(await scrape(), 'tock_job_scheduling_delay_seconds', 'job', 'late'),
      (v) => v !== null && Math.abs(v * 1000 - delays[1]!) <= 2,
    );

    const page = await h.signIn(keys.reader!);
    await page.goto(`${h.url}/#/jobs/late`);
    const figure = page.getByTestId('recent-max').locator('strong');
    await expect.poll(() => figure.getAttribute('data-seconds'), { timeout: SLOW }).not.toBe('');
    expect(Number(await figure.getAttribute('data-seconds'))).toBe(metric);
    expect(await figure.textContent()).toBe(`${metric!.toFixed(3)} s`);

    const answer = await expectChartMatchesApi(page, 'job-delay', { job_id: 'late' }, ['p50', 'p99', 'max']);
    const largest = Math.max(...answer.buckets.map((b: { max: number | null }) => b.max ?? 0));
    expect(largest).toBe(metric);
    // The smaller delay is a p50 (alone in its bucket, or the median of the two): the chart tells them apart.
    const p50s = answer.buckets
      .filter((b: { runs: number }) => b.runs > 0)
      .map((b: { p50: number }) => b.p50);
    expect(Math.abs(Math.min(...p50s) * 1000 - delays[0]!)).toBeLessThanOrEqual(2);
    await expect.poll(() => linePixels(page, 'job-delay'), { timeout: SLOW }).toBeGreaterThan(0);

    await page.getByTestId('job-delay').getByText('The numbers').click();
    await screenshot(page, '10-job-delay');
    await page.close();
  });

  test('the Limits page shows each limit with the runs it holds back, as GET /v1/limits and /metrics do', async () => {
    // The first run takes paced-api's one token; the second is due and held until the next, 1000 s on.
    for (const _ of [1, 2]) {
      const t = await h.call(keys.operator!, 'POST', '/v1/jobs/paced/runs');
      expect(t.status, t.text).toBe(201);
    }
    const limit = await eventually(
      'paced-api holds one run back',
      async () => (await h.call(keys.reader!, 'GET', '/v1/limits/paced-api')).json,
      (l) => l.held === 1,
    );
    expect(limit).toMatchObject({ rate: 0.001, burst: 1, max_concurrency: null, in_use: 0 });
    await eventually(
      '/metrics reports the run paced-api holds back',
      async () => gauge(await scrape(), 'tock_limit_held_runs', 'key', 'paced-api'),
      (v) => v === 1,
    );

    const page = await h.signIn(keys.reader!);
    await page.getByRole('link', { name: 'Limits' }).click();
    await page.getByRole('heading', { name: 'Limits' }).waitFor();
    const cell = (key: string, field: string) =>
      page.locator(`tr[data-limit="${key}"] td[data-field="${field}"]`);
    await expect.poll(() => cell('paced-api', 'held').textContent(), { timeout: SLOW }).toBe('1');
    expect(await cell('paced-api', 'rate').textContent()).toBe('0.001');
    expect(await cell('paced-api', 'burst').textContent()).toBe('1');
    expect(Number(await cell('paced-api', 'tokens').textContent())).toBeLessThan(1);
    expect(await cell('paced-api', 'max_concurrency').textContent()).toBe('—');
    expect(await cell('paced-api', 'in_use').textContent()).toBe('0');
    expect(await cell('db-pool', 'max_concurrency').textContent()).toBe('3');
    expect(await cell('db-pool', 'held').textContent()).toBe('0');
    expect(await cell('db-pool', 'rate').textContent()).toBe('—');
    const list = (await h.call(keys.reader!, 'GET', '/v1/limits')).json.limits as { key: string }[];
    expect(
      await page.locator('tr[data-limit]').evaluateAll((rows) => rows.map((r) => r.dataset.limit)),
    ).toEqual(list.map((l) => l.key));
    await screenshot(page, '11-limits');
    // The job's page names the limits it passes, with a way to their state.
    await page.goto(`${h.url}/#/jobs/paced`);
    await expect
      .poll(() => page.getByTestId('job-limits').textContent(), { timeout: SLOW })
      .toMatch(/^paced-api /);
    await page.getByTestId('job-limits').getByRole('link').click();
    await page.getByRole('heading', { name: 'Limits' }).waitFor();
    await page.close();
  });

  test("the Cluster page's chart is the tenant's GET /v1/delay, every pool or the one chosen", async () => {
    const page = await h.signIn(keys.operator!);
    await page.getByRole('link', { name: 'Cluster' }).click();
    await page.getByText("Your tenant's remote workers").waitFor({ timeout: SLOW });
    await expectChartMatchesApi(page, 'cluster-delay', {}, ['p50', 'p99']);
    await expect.poll(() => linePixels(page, 'cluster-delay'), { timeout: SLOW }).toBeGreaterThan(0);
    await page.getByTestId('cluster-delay').getByText('The numbers').click();
    await screenshot(page, '12-cluster-delay');

    // A pool with no runs: the chart of that pool alone has none.
    await page.getByRole('textbox', { name: 'Pool' }).fill('nobody');
    await page.getByRole('button', { name: 'Show' }).click();
    await page
      .getByText('Scheduling delay of pool nobody, the last hour', { exact: true })
      .waitFor({ timeout: SLOW });
    await page.getByTestId('cluster-delay').getByText('no run ended in this range').waitFor();
    await page.close();
  });

  test('no tab had an uncaught error or a Content-Security-Policy violation', () => {
    expect(h.browser.problems).toEqual([]);
  });
});
