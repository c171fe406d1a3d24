// What the soak samples every 10 s besides the handlers' logs: the server's /metrics (tick
// histogram, RSS, event-loop delay), the size and dead rows of Tock's five busiest tables, and the
// worker processes' own reports (bench/soak/worker.mjs), merged between two rows.

/** The tables whose size and dead rows each row records. */
export const TABLES = ['runs', 'attempts', 'run_queue', 'run_claims', 'attempt_progress'];
/** Worker processes of the soak. */
export const WORKERS = 2;

/** The figures of a server's /metrics this soak samples. */
export async function scrape(url) {
  const res = await fetch(url, { signal: AbortSignal.timeout(5000) });
  if (!res.ok) throw new Error(`${url}: ${res.status}`);
  const out = {
    buckets: new Map(),
    sum: 0,
    count: 0,
    rss: null,
    heapUsed: null,
    heapTotal: null,
    young: null,
    external: null,
    lagP99: null,
  };
  for (const line of (await res.text()).split('\n')) {
    const m = /^(\w+)(?:\{([^}]*)\})? (\S+)$/.exec(line);
    if (!m) continue;
    const [, name, labels, value] = m;
    if (name === 'tock_tick_duration_seconds_bucket')
      out.buckets.set(/le="([^"]+)"/.exec(labels)[1], Number(value));
    else if (name === 'tock_tick_duration_seconds_sum') out.sum = Number(value);
    else if (name === 'tock_tick_duration_seconds_count') out.count = Number(value);
    else if (name === 'tock_process_resident_memory_bytes') out.rss = Number(value);
    else if (name === 'tock_nodejs_heap_size_used_bytes') out.heapUsed = Number(value);
    else if (name === 'tock_nodejs_heap_size_total_bytes') out.heapTotal = Number(value);
    else if (name === 'tock_nodejs_eventloop_lag_p99_seconds') out.lagP99 = Number(value);
    else if (name === 'tock_nodejs_external_memory_bytes') out.external = Number(value);
    else if (name === 'tock_nodejs_heap_space_size_total_bytes' && labels === 'space="new"')
      out.young = Number(value);
  }
  return out;
}

/** Ticks between two scrapes: count, mean ms, and the p99 as the upper bound of its bucket (ms). */
export function tickWindow(a, b) {
  const count = b.count - a.count;
  if (count <= 0) return { count: 0, meanMs: null, p99Ms: null };
  const bounds = [...b.buckets.keys()].sort((x, y) => Number(x) - Number(y));
  const le = bounds.find((k) => b.buckets.get(k) - (a.buckets.get(k) ?? 0) >= 0.99 * count);
  return {
    count,
    meanMs: ((b.sum - a.sum) / count) * 1000,
    p99Ms: le === undefined || le === '+Inf' ? null : Number(le) * 1000,
  };
}

/** Size (table + indexes + TOAST), dead and live rows, and autovacuum scale factor of each table. */
export async function tableStats(db) {
  const { rows } = await db.query(
    `SELECT c.relname AS name, pg_total_relation_size(c.oid)::float8 AS bytes,
       s.n_dead_tup::float8 AS dead, s.n_live_tup::float8 AS live,
       coalesce((SELECT split_part(o, '=', 2)::float8 FROM unnest(c.reloptions) o
                 WHERE o LIKE 'autovacuum_vacuum_scale_factor=%'),
                current_setting('autovacuum_vacuum_scale_factor')::float8) AS scale,
       current_setting('autovacuum_vacuum_threshold')::float8 AS threshold,
       s.autovacuum_count::float8 AS autovacuums
     FROM pg_class c JOIN pg_stat_user_tables s ON s.relid = c.oid
     WHERE c.relname = ANY($1)`,
    [TABLES],
  );
  return Object.fromEntries(rows.map((r) => [r.name, r]));
}

/** The worker processes' JSON lines since the last call, merged: one summary per worker. */
export function mergeReports(reports) {
  if (reports.length === 0) return null;
  const last = reports.at(-1);
  const calls = (key) => {
    const xs = reports.map((r) => r[key]).filter((c) => c.count > 0);
    const count = xs.reduce((a, c) => a + c.count, 0);
    if (count === 0) return { count: 0, mean: null, p99: null };
    return {
      count,
      mean: xs.reduce((a, c) => a + c.mean * c.count, 0) / count,
      p99: Math.max(...xs.map((c) => c.p99)),
    };
  };
  return {
    rss: last.rss,
    heapUsed: last.heapUsed,
    heapTotal: last.heapTotal,
    young: last.young,
    external: last.external,
    v8Resident: last.v8Resident ?? null,
    malloced: last.malloced ?? null,
    anon: last.anon ?? null,
    file: last.file ?? null,
    lagP99Ms: Math.max(...reports.map((r) => r.lagP99Ms)),
    claim: calls('claim'),
    heartbeat: calls('heartbeat'),
    running: last.running,
    dropped: last.dropped,
    leaseLost: last.leaseLost,
    errors: last.errors,
  };
}
