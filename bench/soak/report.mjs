// The soak's output: its rows as CSV, the checks of issue 21 on them and on the handlers' logs, the
// markdown table and notes of the run, and the picture of the series (bench/soak/chart.mjs).
import { fmt, markdownTable } from '../lib.mjs';
import { smallMultiples } from './chart.mjs';
import { TABLES, WORKERS } from './samples.mjs';

/** The processes, server first: `server`, `worker0`, …, and how a table or a picture names each. */
const PROCESSES = ['server', ...Array.from({ length: WORKERS }, (_, i) => `worker${i}`)];
const PROCESS_LABELS = ['server', ...Array.from({ length: WORKERS }, (_, i) => `worker ${i}`)];
/** A figure's column for each process: `perProcess('rss')` → rss_server_mib, rss_worker0_mib, … */
const perProcess = (figure, unit = 'mib') => PROCESSES.map((p) => `${figure}_${p}_${unit}`);

/** Least-squares slope of `ys` over `xs` (per unit of x), or null under 3 points. */
function slope(xs, ys) {
  const pts = xs.map((x, i) => [x, ys[i]]).filter(([, y]) => y !== null && Number.isFinite(y));
  if (pts.length < 3) return null;
  const mx = pts.reduce((a, [x]) => a + x, 0) / pts.length;
  const my = pts.reduce((a, [, y]) => a + y, 0) / pts.length;
  let num = 0;
  let den = 0;
  for (const [x, y] of pts) {
    num += (x - mx) * (y - my);
    den += (x - mx) ** 2;
  }
  return den === 0 ? null : { slope: num / den, mean: my };
}

/** A figure only the workers report: `workerColumns('anon')` → anon_worker0_mib, … */
const workerColumns = (figure) => PROCESSES.slice(1).map((p) => `${figure}_${p}_mib`);

export const COLUMNS = [
  'elapsed_s',
  'runs_per_s',
  'steady_per_s',
  'herd_runs',
  'long_runs',
  'failed_attempts',
  'steady_p50_ms',
  'steady_p99_ms',
  'herd_p99_ms',
  'ticks',
  'tick_mean_ms',
  'tick_p99_ms',
  'claims',
  'claim_mean_ms',
  'claim_p99_ms',
  'heartbeat_mean_ms',
  ...TABLES.map((t) => `${t}_mib`),
  'total_mib',
  ...TABLES.map((t) => `${t}_dead`),
  'dead_total',
  ...perProcess('rss'),
  ...perProcess('heap'),
  ...perProcess('heap_total'),
  ...perProcess('young'),
  ...perProcess('external'),
  ...perProcess('rss_less_young'),
  ...workerColumns('v8_resident'),
  ...workerColumns('rss_less_v8'),
  ...workerColumns('malloced'),
  ...workerColumns('anon'),
  ...workerColumns('file'),
  ...perProcess('lag', 'p99_ms'),
  'long_running',
  'vacuumed',
];

export const csvCell = (v) =>
  v === null || v === undefined ? '' : typeof v === 'number' ? String(Math.round(v * 1000) / 1000) : v;

export const mean = (xs) => {
  const ys = xs.filter((x) => x !== null && Number.isFinite(x));
  return ys.length === 0 ? null : ys.reduce((a, b) => a + b, 0) / ys.length;
};

/** The checks of the issue on a soak's result, each with the figure it reads and whether it holds. */
export function checksOf(s, r) {
  const rows = r.rows;
  const endS = s.minutes * 60;
  const p99First = r.segments.first.summary().p99;
  const p99Last = r.segments.last.summary().p99;
  const ratio = p99First && p99Last !== null ? p99Last / p99First : null;
  const rowAt = (sec) => rows.findLast((x) => x.elapsed_s <= sec) ?? rows[0];
  const mid = rowAt(endS / 2)?.total_mib ?? null;
  const end = rows.at(-1)?.total_mib ?? null;
  const growth = mid && end !== null ? (end - mid) / mid : null;
  const lastHalf = rows.filter((x) => x.elapsed_s > endS / 2);
  /** A column's least-squares trend over the last half, per hour, relative to its mean. */
  const trend = (key) => {
    const fit = slope(
      lastHalf.map((x) => x.elapsed_s / 3600),
      lastHalf.map((x) => x[key]),
    );
    return { key, perHour: fit && fit.slope / fit.mean, mean: fit?.mean ?? null };
  };
  /** The trends of a figure of each process: `rss`, `heap`, `heap_total`. */
  const trends = (figure) => perProcess(figure).map(trend);
  const rss = trends('rss');
  return {
    latency: { p99First, p99Last, ratio, holds: ratio !== null && ratio <= 1.5 },
    size: { mid, end, growth, holds: growth !== null && growth < 0.1 },
    rss: rss.map((x) => ({ ...x, holds: x.perHour !== null && x.perHour < 0.1 })),
    heap: trends('heap'),
    heapTotal: trends('heap_total'),
    young: trends('young'),
    external: trends('external'),
    rssLessYoung: trends('rss_less_young'),
    v8Resident: workerColumns('v8_resident').map(trend),
    rssLessV8: workerColumns('rss_less_v8').map(trend),
    malloced: workerColumns('malloced').map(trend),
    anon: workerColumns('anon').map(trend),
    file: workerColumns('file').map(trend),
    history: { ...r.check, holds: r.check.missing === 0 && r.check.doubled === 0 },
  };
}

const yes = (ok) => (ok ? 'yes' : 'NO');
/** A trend as `+1.2 %/h of 200 MiB`. */
const perHour = (x) =>
  x.perHour === null
    ? '–'
    : `${x.perHour >= 0 ? '+' : ''}${fmt(x.perHour * 100, 1)} %/h of ${fmt(x.mean, 0)} MiB`;
const PROCESS_NAMES = {
  rss_server_mib: 'tock server',
  rss_worker0_mib: 'worker 0',
  rss_worker1_mib: 'worker 1',
};

/** Table rows of trends: `[what, trends]` pairs, the trends of the processes `who` names. */
const trendRows = (who, pairs) =>
  pairs.map(([what, list]) => [
    `${what}, trend over the last half: ${who}`,
    list.map(perHour).join(', '),
    '',
  ]);

/** The soak's table: the checks first, then its figures over the whole soak. */
export function tableOf(s, r, c) {
  const rows = r.rows;
  const seg = s.minutes === 60 ? '10 min' : `${fmt((s.minutes * 60) / 6)} s`;
  const all = r.segments.all.summary();
  const herdWorst = r.herds.reduce((a, h) => Math.max(a, h.allStartedMs), 0);
  const max = (key) => Math.max(...rows.map((x) => x[key] ?? 0));
  const lines = [
    [
      `steady start − due p99: last ${seg} ÷ first ${seg}`,
      `${fmt(c.latency.p99Last, 1)} ÷ ${fmt(c.latency.p99First, 1)} ms = ${fmt(c.latency.ratio, 2)}`,
      `≤ 1.5: ${yes(c.latency.holds)}`,
    ],
    [
      'table + index size, growth over the last half',
      `${fmt(c.size.mid, 1)} → ${fmt(c.size.end, 1)} MiB (${c.size.growth === null ? '–' : `${c.size.growth >= 0 ? '+' : ''}${fmt(c.size.growth * 100, 1)} %`})`,
      `< 10 %: ${yes(c.size.holds)}`,
    ],
    ...c.rss.map((x) => [
      `RSS trend over the last half, ${PROCESS_NAMES[x.key]}`,
      perHour(x),
      `< 10 %/h: ${yes(x.holds)}`,
    ]),
    [
      'runs lost / run twice (handlers’ logs)',
      `${fmt(c.history.missing)} / ${fmt(c.history.doubled)} of ${fmt(c.history.expected)} slots checked`,
      `0 / 0: ${yes(c.history.holds)}`,
    ],
    [
      'runs/s finished (mean of rows; steady)',
      `${fmt(mean(rows.map((x) => x.runs_per_s)))} (${fmt(mean(rows.map((x) => x.steady_per_s)))})`,
      '',
    ],
    [
      'steady start − due p50 / p99 / max, whole soak',
      `${fmt(all.p50, 1)} / ${fmt(all.p99, 1)} / ${fmt(all.max, 0)} ms`,
      '',
    ],
    [
      `herds (${fmt(s.herd.jobs)} runs on one slot)`,
      r.herds.length === 0
        ? 'none in the soak'
        : `${r.herds.length}; the last run started ${fmt(herdWorst)} ms after its slot at worst; start − due p99 ${fmt(Math.max(...r.herds.map((h) => h.p99)))} ms at worst`,
      '',
    ],
    [
      'tick: mean of rows / worst p99 (bucket bound)',
      `${fmt(mean(rows.map((x) => x.tick_mean_ms)), 1)} / ${fmt(max('tick_p99_ms'), 0)} ms`,
      '',
    ],
    [
      'claim call: mean of rows / worst p99',
      `${fmt(mean(rows.map((x) => x.claim_mean_ms)), 1)} / ${fmt(max('claim_p99_ms'), 1)} ms`,
      '',
    ],
    ['heartbeat call: mean of rows', `${fmt(mean(rows.map((x) => x.heartbeat_mean_ms)), 1)} ms`, ''],
    ['long runs running (mean of rows)', fmt(mean(rows.map((x) => x.long_running))), ''],
    [
      'size at the end (runs, attempts, run_queue, run_claims, attempt_progress)',
      `${TABLES.map((t) => fmt(rows.at(-1)?.[`${t}_mib`], 1)).join(', ')} MiB`,
      '',
    ],
    [
      'dead rows: most in a row / at the end',
      `${fmt(max('dead_total'))} / ${fmt(rows.at(-1)?.dead_total)}`,
      '',
    ],
    [
      'RSS at the end: server, worker 0, worker 1',
      `${perProcess('rss')
        .map((k) => fmt(rows.at(-1)?.[k]))
        .join(', ')} MiB`,
      '',
    ],
    ...trendRows('server, worker 0, worker 1', [
      ['JS heap used', c.heap],
      ['JS heap reserved (heapTotal)', c.heapTotal],
      ['young generation (workers: resident; server: reserved)', c.young],
      ['RSS less the young generation', c.rssLessYoung],
      ['external memory (Buffers and other ArrayBuffers, outside the JS heap)', c.external],
    ]),
    ...trendRows('worker 0, worker 1', [
      ['resident pages of all V8 spaces', c.v8Resident],
      ['RSS less V8’s resident pages', c.rssLessV8],
      ['V8’s own malloc heap (malloced_memory)', c.malloced],
      ['anonymous resident memory (RssAnon)', c.anon],
      ['file-backed resident memory (RssFile)', c.file],
    ]),
    [
      'event-loop delay p99, worst row: server, worker 0, worker 1',
      `${perProcess('lag', 'p99_ms')
        .map((k) => fmt(max(k), 1))
        .join(', ')} ms`,
      '',
    ],
    [
      'handler calls: failed on purpose / succeeded on a retry / long runs aborted at the stop',
      `${fmt(r.totals.fail)} / ${fmt(r.totals.retriedOk)} / ${fmt(r.totals.abort)}`,
      '',
    ],
  ];
  return markdownTable([`soak, ${fmt(s.minutes)} min`, 'figure', 'holds'], lines);
}

/** The SVG of the rows: small multiples of the series. */
export function pictureOf(s, rows) {
  const col = (key) => rows.map((x) => x[key]);
  /** One series per process of a figure, named `server`, `worker 0`, … (then `suffix`). */
  const processSeries = (figure, unit = 'mib', suffix = '') =>
    perProcess(figure, unit).map((key, i) => ({ name: `${PROCESS_LABELS[i]}${suffix}`, values: col(key) }));
  return smallMultiples({
    title: `Tock soak, ${fmt(s.minutes)} min: a row every 10 s`,
    xs: col('elapsed_s'),
    panels: [
      {
        title: 'runs finished',
        unit: '/s',
        series: [
          { name: 'all', values: col('runs_per_s') },
          { name: 'steady', values: col('steady_per_s') },
        ],
      },
      {
        title: 'steady start − due',
        unit: 'ms',
        series: [
          { name: 'p50', values: col('steady_p50_ms') },
          { name: 'p99', values: col('steady_p99_ms') },
        ],
      },
      {
        title: 'tick and claim',
        unit: 'ms, mean',
        series: [
          { name: 'tick', values: col('tick_mean_ms') },
          { name: 'claim call', values: col('claim_mean_ms') },
        ],
      },
      {
        title: 'table + index size',
        unit: 'MiB',
        series: [
          { name: 'total', values: col('total_mib') },
          { name: 'runs', values: col('runs_mib') },
          { name: 'attempts', values: col('attempts_mib') },
        ],
      },
      {
        title: 'dead rows',
        unit: 'n_dead_tup',
        series: [
          { name: 'total', values: col('dead_total') },
          { name: 'runs', values: col('runs_dead') },
          { name: 'run_queue', values: col('run_queue_dead') },
        ],
      },
      {
        title: 'RSS',
        unit: 'MiB',
        series: processSeries('rss'),
      },
      {
        title: 'JS heap: used, reserved',
        unit: 'MiB',
        series: [...processSeries('heap'), ...processSeries('heap_total', 'mib', ', reserved')],
      },
      {
        title: 'young generation; RSS less it',
        unit: 'MiB',
        series: [...processSeries('young'), ...processSeries('rss_less_young', 'mib', ', RSS less young')],
      },
      {
        title: 'workers: RSS less all V8 spaces; V8 malloc',
        unit: 'MiB',
        series: workerColumns('rss_less_v8')
          .map((key, i) => ({ name: `worker ${i}`, values: col(key) }))
          .concat(
            workerColumns('malloced').map((key, i) => ({ name: `worker ${i}, V8 malloc`, values: col(key) })),
          ),
      },
      {
        title: 'event-loop delay p99',
        unit: 'ms',
        series: processSeries('lag', 'p99_ms'),
      },
      {
        title: 'long runs running',
        unit: 'leases',
        series: [{ name: 'running', values: col('long_running') }],
      },
    ],
  });
}

/** The run's notes: where its files are, its shape, and how each figure and check is taken. */
export function notesOf(s, r, { csvPath, svgPath, tenant }) {
  return [
    `Rows: ${csvPath}; picture: ${svgPath}.`,
    `Shape: ${s.steady.jobs} jobs @every 1s (jitterSeconds 1; ${s.failPerMille / 10} % of first attempts fail, retried ~1 s later), ` +
      `${fmt(s.herd.jobs)} jobs '${s.herd.schedule}', ${fmt(s.long.jobs)} jobs @every ${s.long.every} (jitterSeconds ${s.long.everyMs / 1000}) sleeping ${s.long.sleepMs / 1000} s. ` +
      `One tock server; ${WORKERS} worker processes, each a Worker × ${s.fastConcurrency} on pool default and a Worker × ${s.longConcurrency} (prefetch 0) on pool long; ` +
      `NODE_OPTIONS of every process: ${s.nodeOptions ? `\`${s.nodeOptions}\`` : 'none'} (--node-options).` +
      (Object.keys(s.worker1Env ?? {}).length > 0
        ? ` Worker 1 alone ran with ${Object.entries(s.worker1Env)
            .map(([k, v]) => `${k}=${v}`)
            .join(' ')} (--worker1-env), worker 0 without.`
        : ''),
    `Retention of tenant ${tenant}: ${JSON.stringify(s.retention)}; ${r.prune ? 'the server prunes every 10 s (--prune-interval 10s)' : 'this build’s tock server has no pruner (--prune-interval): nothing is pruned, so the size cannot be flat'}.`,
    `The server: ${r.server}; its autovacuum is on (the \`vacuumed\` column names the tables it vacuumed since the previous row).`,
    'Runs/s: handler calls that returned, by the end of the call, from the handlers’ own logs. Start − due: handler start − the run’s available_at (slot + jitter offset), database clock, steady runs started in the window. Tick: the server’s tock_tick_duration_seconds, mean and the bound of the bucket holding the p99, between two scrapes. Claim and heartbeat: the time of each claimRuns / heartbeatRuns call of the workers’ store (one statement’s round trip plus the wait for a pooled connection). Size: pg_total_relation_size (heap, indexes, TOAST). Dead rows: pg_stat_user_tables.n_dead_tup. RSS and event-loop delay p99: the server’s /metrics (tock_process_resident_memory_bytes, tock_nodejs_eventloop_lag_p99_seconds), the workers’ own reports (process.memoryUsage().rss, monitorEventLoopDelay over 10 s). JS heap used: the server’s tock_nodejs_heap_size_used_bytes, the workers’ process.memoryUsage().heapUsed (live objects and garbage not yet collected); reserved: tock_nodejs_heap_size_total_bytes, heapTotal (the pages V8 holds for the heap, the young generation’s included). Young generation: the workers’ v8.getHeapSpaceStatistics() new_space physical_space_size (its resident pages), the server’s tock_nodejs_heap_space_size_total_bytes{space="new"} (its reserved size: /metrics has no resident figure); RSS less the young generation subtracts it. External: process.memoryUsage().external, tock_nodejs_external_memory_bytes (memory outside the JS heap that its objects hold, ArrayBuffers and Buffers included). The workers alone: V8’s resident pages, v8.getHeapStatistics().total_physical_size (every space); RSS less them; V8’s malloc heap, malloced_memory; RssAnon and RssFile of /proc/self/status.',
    `Checks: p99 over the steady starts of the first and last sixth of the soak; size growth from the row at half time to the last; RSS: least-squares slope over the last half, per hour, as a share of its mean (a short soak extrapolates a few minutes to an hour); lost and doubled from the handlers’ logs: every slot of the steady jobs from +${fmt((r.span.from - r.span.t0) / 1000)} s to ${fmt((r.span.tEnd - r.span.to) / 1000)} s before the end, and every herd slot of that span at least ${fmt(r.span.herdMargin / 1000)} s before the end (${r.span.herdSlots.length}), succeeded exactly once, and no (job, slot) succeeded twice. Runs in state dead at the end: ${fmt(r.deadInTable)}; worker events (dropped results, lost leases, errors): ${r.workerCounts.map((x) => (x ? `${x.dropped}/${x.leaseLost}/${x.errors}` : '–')).join(', ')}.`,
  ];
}
