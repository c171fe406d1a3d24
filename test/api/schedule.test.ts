/**
 * `GET /v1/schedule` (issue 22, operator features, item 3): the next slots of an expression with
 * daylight-saving notes, the same as `tock schedule` prints (one core function), bounded, and a 400
 * for a bad expression, zone, count or instant.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { previewLines } from '../../src/core/index.js';
import { setupDatabase, type TestDatabase } from '../setup/database.js';
import { type Api, client, expectError, keysFor, type RoleKeys, snapshot, startApi } from './helpers.js';

let db: TestDatabase;
let api: Api;
let http: ReturnType<typeof client>;
let keys: RoleKeys;

beforeAll(async () => {
  db = await setupDatabase();
  api = await startApi(db);
  http = client(api.base);
  keys = await keysFor(db, 'acme');
});

afterAll(async () => {
  await api?.close();
  await db?.teardown();
});

const get = (query: Record<string, string>) =>
  http('GET', `/v1/schedule?${new URLSearchParams(query)}`, { key: keys.reader });

describe('GET /v1/schedule', () => {
  test('a daily 02:30 in Berlin across spring forward and fall back: notes as tock schedule prints them', async () => {
    const query = {
      expression: '30 2 * * *',
      timezone: 'Europe/Berlin',
      count: '3',
      from: '2026-03-27T12:00:00Z',
    };
    const a = await get(query);
    expect(a.status, a.text).toBe(200);
    expect(a.json.from).toBe('2026-03-27T12:00:00.000Z');
    expect(a.json.ended).toBe(false);
    expect(a.json.slots.map((s: { local: string }) => s.local)).toEqual([
      '2026-03-28T02:30:00+01:00',
      '2026-03-29T03:00:00+02:00',
      '2026-03-30T02:30:00+02:00',
    ]);
    expect(a.json.slots[1].notes).toEqual([
      'DST: clocks go forward +01:00 → +02:00 at 2026-03-29T01:00:00.000Z',
      'the local time was skipped; fires at the transition',
    ]);
    // The same function as the CLI: its lines are these slots and notes.
    const lines = previewLines({
      expression: query.expression,
      timezone: query.timezone,
      count: 3,
      fromMs: Date.parse(query.from),
    });
    expect(lines).toEqual(
      a.json.slots.map(
        (s: { at: string; local: string; notes: string[] }) =>
          `${s.at}  ${s.local}${s.notes.length ? `  # ${s.notes.join('; ')}` : ''}`,
      ),
    );

    const back = await get({ ...query, expression: '30 2 * * *', from: '2026-10-24T12:00:00Z', count: '2' });
    expect(back.json.slots[1].notes[0]).toBe(
      'DST: clocks go back +02:00 → +01:00 at 2026-10-25T01:00:00.000Z',
    );
  });

  test('defaults: UTC, 10 slots, from now; a one-shot ends', async () => {
    const a = await get({ expression: '@every 1h' });
    expect(a.json.timezone).toBe('UTC');
    expect(a.json.slots).toHaveLength(10);
    const once = await get({
      expression: '@at 2026-06-01T00:00:00Z',
      from: '2026-01-01T00:00:00Z',
      count: '5',
    });
    expect(once.json.slots.map((s: { at: string }) => s.at)).toEqual(['2026-06-01T00:00:00.000Z']);
    expect(once.json.ended).toBe(true);
  });

  test('bounded in time: a yearly slot stops 5 years after from (cut), and a far from is a 400', async () => {
    // 100 slots of 29 February were a century of offset tables, computed on the event loop.
    const leap = await get({ expression: '0 0 29 2 *', timezone: 'Europe/Berlin', count: '100' });
    expect(leap.status, leap.text).toBe(200);
    expect(leap.json.cut).toBe(true);
    expect(leap.json.ended).toBe(false);
    expect(leap.json.slots.length).toBeLessThanOrEqual(2);
    const from = Date.parse(leap.json.from);
    for (const s of leap.json.slots as { at: string }[]) {
      expect(Date.parse(s.at) - from).toBeLessThanOrEqual(5 * 366 * 86_400_000);
    }
    const far = await get({ expression: '0 0 1 1 *', from: '2400-01-01T00:00:00Z', count: '100' });
    expect(far.status, far.text).toBe(400);
    expect(far.json.error.message).toMatch(/from must be within 5 years of now/);
    const daily = await get({ expression: '@daily', count: '100' });
    expect(daily.json).toMatchObject({ cut: false, ended: false });
    expect(daily.json.slots).toHaveLength(100);
  });

  test('bad input is a 400, and nothing is written', async () => {
    const before = await snapshot(db.pool);
    for (const query of [
      {},
      { expression: '' },
      { expression: 'every day' },
      { expression: '61 * * * *' },
      { expression: '@daily', timezone: 'Mars/Olympus' },
      { expression: '@daily', count: '0' },
      { expression: '@daily', count: '101' },
      { expression: '@daily', count: 'ten' },
      { expression: '@daily', from: 'tomorrow' },
      { expression: '@daily\u0000' },
      { expression: '@daily', extra: '1' },
    ])
      expectError(await get(query as Record<string, string>), 400, 'validation_error');
    expect(await snapshot(db.pool)).toEqual(before);
  });

  test('needs a key that may read', async () => {
    expectError(await http('GET', '/v1/schedule?expression=%40daily'), 401, 'unauthorized');
    expect((await http('GET', '/v1/schedule?expression=%40daily', { key: keys.operator })).status).toBe(200);
  });
});
