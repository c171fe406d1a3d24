/**
 * How many claimed runs a worker may hold beyond its concurrency, waiting for a slot, when its
 * `prefetch` is `auto`: about {@link AUTO_PREFETCH_HORIZON_MS} of its own current work. Held runs
 * let one claim take many runs instead of one slot's worth (fewer, larger claims), but each waits
 * for a slot while another worker could run it, and a worker that dies strands it until its lease
 * expires. Sized by the pace at which the worker's handlers start, a held run waits about the
 * horizon for its slot: fast handlers get large claims, slow ones (or an idle or new worker, with
 * no pace yet) claim only their free slots, as with no prefetch.
 */

/** Most runs one claim asks for. */
export const MAX_CLAIM_RUNS = 1000;

/**
 * How many full claims' worth of runs an `auto` prefetch lets a worker have at once, running and
 * held: two (2000 runs on the database, whose claims take up to {@link MAX_CLAIM_RUNS}; 1000 over
 * HTTP, whose claims take up to {@link MAX_HTTP_CLAIM_RUNS}). A worker claims again while the runs it
 * holds start, and a claim's answer takes time in proportion to its runs (about 10 ms for 1,000 in
 * the throughput benchmark): a worker that could hold only what one claim brings ran out of held
 * runs while the next was being answered, its slots idle, and its claims, asking only for the runs
 * started since the last one, stayed small (near 600 there). Room for two claims' worth keeps a
 * full one in flight while the last one's runs start.
 */
export const AUTO_PREFETCH_CLAIMS = 2;

/** Most runs one claim over HTTP takes (`POST /v1/leases`, its `max`). */
export const MAX_HTTP_CLAIM_RUNS = 500;

/** Most leases one heartbeat over HTTP renews (`POST /v1/workers/{id}/heartbeat`, its `leases`). */
export const MAX_HTTP_HEARTBEAT_LEASES = 1000;

/** The work an `auto` prefetch holds beyond concurrency, ms of the worker's current pace. */
export const AUTO_PREFETCH_HORIZON_MS = 100;

export interface AutoPrefetchInput {
  /** Handler starts per second over the recent past (the worker's pace). */
  startsPerSecond: number;
  /** The worker's concurrency (1–1000). */
  concurrency: number;
  /** The work to hold, ms of the pace. Default {@link AUTO_PREFETCH_HORIZON_MS}. */
  horizonMs?: number;
  /** The most runs one claim of the worker's source takes. Default {@link MAX_CLAIM_RUNS}. */
  claimRuns?: number;
}

/**
 * Runs to hold beyond `concurrency`: the starts expected within the horizon at the current pace,
 * `floor(startsPerSecond × horizonMs / 1000)`, from 0 to {@link AUTO_PREFETCH_CLAIMS} full claims less
 * `concurrency` (2000 − concurrency on the database). A pace that is not a finite positive number
 * holds nothing.
 */
export function autoPrefetch({
  startsPerSecond,
  concurrency,
  horizonMs = AUTO_PREFETCH_HORIZON_MS,
  claimRuns = MAX_CLAIM_RUNS,
}: AutoPrefetchInput): number {
  const room = Math.max(0, AUTO_PREFETCH_CLAIMS * claimRuns - concurrency);
  if (!Number.isFinite(startsPerSecond) || startsPerSecond <= 0) return 0;
  if (!Number.isFinite(horizonMs) || horizonMs <= 0) return 0;
  return Math.min(room, Math.floor((startsPerSecond * horizonMs) / 1000));
}
