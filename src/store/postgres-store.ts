/**
 * The PostgreSQL implementation of `Store`: a thin facade over one module per table family
 * (`jobs`, `tick`, `claims`, `runs`, `cancel`, `backfill`, `run-reads`, `shards`, `nodes`, `limits`, `keys`,
 * `idempotency`, `notify`, `table-stats`), which own the statements. It holds the pool, the settings and two caches (parsed
 * schedules, the shard count). Tock's invariants are kept in the database: one run per (tenant,
 * job, slot) by a unique index; every write a worker makes is fenced by its lease token and a live
 * lease; the reaper's write is guarded by the token it read; time always comes in as a parameter,
 * never from `now()`. It is also the library's edge for job definitions: `upsertJobs` takes them
 * unvalidated too.
 */
import type pg from 'pg';
import {
  checkAgingStep,
  DEFAULT_AGING_STEP_MS,
  DEFAULT_MISFIRE_THRESHOLD_MS,
  type DelayWindow,
  isValidatedJob,
  type JobInput,
  type LeaseRef,
  type NextAvailableParams,
  parseSchedule,
  type Random,
  type Role,
  type RunState,
  type Schedule,
  ValidationError,
  type ValidJob,
  validateJobs,
} from '../core/index.js';
import type { RunArchive } from './archive.js';
import * as backfill from './backfill.js';
import * as cancel from './cancel.js';
import { checkInstant } from './checks.js';
import * as claims from './claims.js';
import { inTransaction } from './db.js';
import * as deadLetters from './dead-letters.js';
import * as delay from './delay.js';
import * as idempotency from './idempotency.js';
import * as jobs from './jobs.js';
import * as keys from './keys.js';
import * as limits from './limits.js';
import * as nodes from './nodes.js';
import * as notifications from './notifications.js';
import * as notify from './notify.js';
import * as R from './queries/runs.js';
import * as retention from './retention.js';
import * as reads from './run-reads.js';
import * as runs from './runs.js';
import * as shards from './shards.js';
import type { Store } from './store.js';
import { tableStats } from './table-stats.js';
import { checkTick, tick } from './tick.js';
import type {
  DeadFilter,
  Job,
  JobChange,
  JobFilter,
  Page,
  Run,
  RunWithAttempts,
  TickResult,
} from './types.js';

export { MAX_BULK_JOBS } from '../core/index.js';
export { MAX_CLAIM_AHEAD_MS } from './claims.js';
export { MAX_NODE_PAGE } from './nodes.js';

export interface PostgresStoreOptions {
  /** Lease length for runs whose job sets none, ms. Default 30000. */
  leaseMs?: number;
  /**
   * Waiting this long raises a run's effective priority by one, ms: the step of every `sort_key`
   * this store writes (materialised, triggered, retried, reaped and replayed runs). 1000 (1 s) to
   * 86400000 (1 day); anything else is a `ValidationError`. Give every node of a database the same
   * step: keys written with different steps are compared as one scale. Default 60000.
   */
  agingStepMs?: number;
  /** A job whose `next_run_at` is older than this is behind and its misfire policy applies, ms. Default 60000. */
  misfireThresholdMs?: number;
  /** Uniform [0, 1) source for backoff jitter. Default `Math.random`. */
  random?: Random;
  /**
   * Where pruned runs are written before they are deleted (`--prune-archive`): the pruner's
   * batches and `pruneTenant` write each run there first. Default: none, runs are deleted only.
   */
  archive?: RunArchive;
}

/** Most schedules kept parsed; the cache starts over past it. */
const SCHEDULE_CACHE_SIZE = 10_000;

/** A definition an edge validated (`validateJob` made it), not one merely shaped like it. */
const isValid = (job: JobInput | ValidJob): job is ValidJob => isValidatedJob(job);

export class PostgresStore implements Store {
  readonly leaseMs: number;
  readonly agingStepMs: number;
  readonly misfireThresholdMs: number;
  private readonly random: Random;
  private readonly archive: RunArchive | undefined;
  private readonly schedules = new Map<string, Schedule>();
  /** Which claim statement to make first (see `claims.ClaimMode`). */
  private readonly claimMode: claims.ClaimMode = { gated: false, credits: null };
  /** Rows of `shards`, read once. */
  private shardTotal: number | undefined;

  constructor(
    private readonly pool: pg.Pool,
    options: PostgresStoreOptions = {},
  ) {
    this.leaseMs = options.leaseMs ?? 30_000;
    this.agingStepMs = checkAgingStep(options.agingStepMs ?? DEFAULT_AGING_STEP_MS);
    this.misfireThresholdMs = options.misfireThresholdMs ?? DEFAULT_MISFIRE_THRESHOLD_MS;
    this.random = options.random ?? Math.random;
    this.archive = options.archive;
    if (!Number.isInteger(this.leaseMs) || this.leaseMs < 1000)
      throw new ValidationError('lease must be at least 1s');
  }

  /** The shard count, fixed in the `shards` table when the database was initialised. */
  private readonly shardCount = async (): Promise<number> => {
    this.shardTotal ??= await this.countShards();
    return this.shardTotal;
  };

  private async allShardIds(): Promise<number[]> {
    return Array.from({ length: await this.shardCount() }, (_, i) => i);
  }

  /** Parsed schedules, cached: a tick over many jobs parses each distinct expression once. */
  private readonly parse = (source: string, timezone: string): Schedule => {
    const key = `${timezone}\u0000${source}`;
    let s = this.schedules.get(key);
    if (!s) {
      s = parseSchedule(source, timezone);
      if (this.schedules.size >= SCHEDULE_CACHE_SIZE) this.schedules.clear();
      this.schedules.set(key, s);
    }
    return s;
  };

  // -- jobs -------------------------------------------------------------------------------------

  /**
   * `Store.upsertJobs`, also taking definitions not yet validated (`JobInput`, as a library caller
   * writes them): a list of those is validated here by `validateJobs` (a message about a job begins
   * `jobs[i]: `). A list is one or the other.
   */
  async upsertJobs<WithJobs extends boolean = false>(p: {
    tenantId: string;
    jobs: readonly JobInput[] | readonly ValidJob[];
    now: number;
    withJobs?: WithJobs;
  }): Promise<{ changes: JobChange<WithJobs>[] }> {
    const list: readonly (JobInput | ValidJob)[] = p.jobs;
    const valid = Array.isArray(list) && list.every(isValid) ? list : validateJobs(list as JobInput[]);
    const shardCount = await this.shardCount();
    const settings = { shardCount, misfireThresholdMs: this.misfireThresholdMs };
    const { changes } = await jobs.upsertJobs(this.pool, { ...p, jobs: valid, ...settings });
    return { changes: changes as JobChange<WithJobs>[] };
  }

  getJob(p: { tenantId: string; jobId: string }): Promise<Job> {
    return jobs.getJob(this.pool, { ...p, misfireThresholdMs: this.misfireThresholdMs });
  }

  listJobs(p: {
    tenantId: string;
    limit: number;
    cursor?: string | null;
    filter?: JobFilter;
  }): Promise<Page<Job>> {
    return jobs.listJobs(this.pool, { ...p, misfireThresholdMs: this.misfireThresholdMs });
  }

  pauseJob(p: { tenantId: string; jobId: string; now: number }): Promise<Job> {
    return jobs.pauseJob(this.pool, { ...p, misfireThresholdMs: this.misfireThresholdMs });
  }

  resumeJob(p: { tenantId: string; jobId: string; now: number }): Promise<Job> {
    return jobs.resumeJob(this.pool, {
      ...p,
      parse: this.parse,
      misfireThresholdMs: this.misfireThresholdMs,
    });
  }

  async deleteJob(p: { tenantId: string; jobId: string; now: number }): Promise<{ cancelledRuns: number }> {
    const now = checkInstant(p.now, 'now');
    return inTransaction(this.pool, (client) => jobs.deleteJob(client, { ...p, now }));
  }

  // -- scheduling -------------------------------------------------------------------------------

  async tick(p: Parameters<Store['tick']>[0]): Promise<TickResult> {
    const horizon = checkTick(p);
    return inTransaction(this.pool, async (client) => {
      // Without a shard list, every shard: the due scan walks the (shard_id, next_run_at) index either way.
      const shardIds = p.shards ? [...p.shards] : await this.allShardIds();
      const settings = { misfireThresholdMs: this.misfireThresholdMs, agingStepMs: this.agingStepMs };
      return tick(client, { ...p, ...settings, horizon, shardIds, parse: this.parse });
    });
  }

  triggerRun(p: Parameters<Store['triggerRun']>[0]): Promise<Run> {
    const settings = { agingStepMs: this.agingStepMs, misfireThresholdMs: this.misfireThresholdMs };
    return runs.triggerRun(this.pool, { ...p, ...settings });
  }

  backfillRuns(p: Parameters<Store['backfillRuns']>[0]) {
    const settings = { agingStepMs: this.agingStepMs, misfireThresholdMs: this.misfireThresholdMs };
    return backfill.backfillRuns(this.pool, { ...p, ...settings, parse: this.parse });
  }

  // -- leased execution -------------------------------------------------------------------------

  claimRuns(p: claims.ClaimParams) {
    return claims.claimRuns(this.pool, { ...p, leaseMs: this.leaseMs, mode: this.claimMode });
  }

  releaseClaim(p: Parameters<Store['releaseClaim']>[0]) {
    return claims.releaseClaim(this.pool, p);
  }

  heartbeatRuns(p: Parameters<Store['heartbeatRuns']>[0]) {
    return claims.heartbeatRuns(this.pool, p);
  }

  completeRuns(p: Parameters<Store['completeRuns']>[0]) {
    return runs.completeRuns(this.pool, p);
  }

  failRun(p: Parameters<Store['failRun']>[0]) {
    return runs.failRun(this.pool, { ...p, agingStepMs: this.agingStepMs, random: this.random });
  }

  releaseRuns(p: Parameters<Store['releaseRuns']>[0]) {
    return runs.releaseRuns(this.pool, p);
  }

  reapExpired(p: { now: number; batchSize: number }) {
    return runs.reapExpired(this.pool, { ...p, agingStepMs: this.agingStepMs, random: this.random });
  }

  // -- operator views ---------------------------------------------------------------------------

  async replayRun(p: { tenantId: string; runId: string; now: number }): Promise<Run> {
    const run = await this.getRun(p);
    return runs.replayRun(this.pool, { ...p, run, agingStepMs: this.agingStepMs });
  }

  countDeadRuns(p: { tenantId: string; filter: DeadFilter }) {
    return deadLetters.countDeadRuns(this.pool, p);
  }

  replayDeadRuns(p: {
    tenantId: string;
    filter: DeadFilter;
    limit: number;
    cursor?: string | null;
    now: number;
  }) {
    return deadLetters.replayDeadRuns(this.pool, { ...p, agingStepMs: this.agingStepMs });
  }

  cancelRun(p: { tenantId: string; runId: string; now: number }): Promise<RunWithAttempts> {
    return cancel.cancelRun(this.pool, p);
  }

  getRun(p: { tenantId: string; runId: string }): Promise<RunWithAttempts> {
    return reads.getRun(this.pool, p);
  }

  tenantRunIds(p: { tenantId: string; runIds: readonly string[] }): Promise<Set<string>> {
    return reads.tenantRunIds(this.pool, p);
  }

  liveRunIds(p: { tenantId: string; leases: readonly LeaseRef[]; now: number }): Promise<Set<string>> {
    return reads.liveRunIds(this.pool, p);
  }

  waitingFor(p: { tenantId: string; runId: string; now: number }): Promise<string | null> {
    return reads.waitingFor(this.pool, p);
  }

  waitingForMany(p: {
    tenantId: string;
    runIds: readonly string[];
    now: number;
  }): Promise<Map<string, string>> {
    return reads.waitingForMany(this.pool, p);
  }

  listRuns(p: { tenantId: string; jobId?: string; state?: RunState; limit: number; cursor?: string | null }) {
    return reads.listRuns(this.pool, p);
  }

  countRuns(p: { tenantId?: string }) {
    return reads.countRuns(this.pool, p);
  }

  sampleRunCounts(p: { exactBelow?: number } = {}) {
    return reads.sampleRunCounts(this.pool, p);
  }

  readyDepth(p: { now: number }) {
    return reads.readyDepth(this.pool, p);
  }

  unservedRuns(p: { now: number; tenantId?: string | null; limit: number }) {
    return reads.unservedRuns(this.pool, p);
  }

  tableStats() {
    return tableStats(this.pool);
  }

  delaySeries(p: { tenantId: string; window: DelayWindow; pool?: string; jobId?: string }) {
    return delay.delaySeries(this.pool, p);
  }

  recentJobDelays(p: delay.RecentParams) {
    return delay.recentJobDelays(this.pool, p);
  }

  recentMisfires(p: delay.RecentParams) {
    return delay.recentMisfires(this.pool, p);
  }
  jobLastSuccesses(p: Parameters<Store['jobLastSuccesses']>[0]) {
    return delay.jobLastSuccesses(this.pool, p);
  }

  /** When a worker that found nothing to claim should look again: the pool's next `available_at`, or null. */
  nextAvailableAt(p: NextAvailableParams) {
    return reads.nextAvailableAt(this.pool, p);
  }

  // -- limits ----------------------------------------------------------------------------------

  putLimit(p: Parameters<Store['putLimit']>[0]) {
    return limits.putLimit(this.pool, p);
  }

  getLimit(p: Parameters<Store['getLimit']>[0]) {
    return limits.getLimit(this.pool, p);
  }

  listLimits(p: Parameters<Store['listLimits']>[0]) {
    return limits.listLimits(this.pool, p);
  }

  deleteLimit(p: Parameters<Store['deleteLimit']>[0]) {
    return limits.deleteLimit(this.pool, p);
  }

  limitGauges(p: Parameters<Store['limitGauges']>[0]) {
    return limits.limitGauges(this.pool, p);
  }

  // -- API keys and idempotency -----------------------------------------------------------------

  createApiKey(p: { tenantId: string; role: Role; name?: string; now: number }) {
    return keys.createApiKey(this.pool, p);
  }

  authenticate(secret: string) {
    return keys.authenticate(this.pool, { secret });
  }

  listApiKeys(p: { tenantId: string }) {
    return keys.listApiKeys(this.pool, p);
  }

  revokeApiKey(p: { tenantId: string; keyId: string; now: number; by: Role | 'database' }) {
    return keys.revokeApiKey(this.pool, p);
  }

  hasApiKeys() {
    return keys.hasApiKeys(this.pool);
  }

  takeIdempotent(p: Parameters<Store['takeIdempotent']>[0]) {
    return idempotency.takeIdempotent(this.pool, p);
  }

  finishIdempotent(p: Parameters<Store['finishIdempotent']>[0]) {
    return idempotency.finishIdempotent(this.pool, p);
  }

  releaseIdempotent(p: { tenantId: string; scope: string; key: string }) {
    return idempotency.releaseIdempotent(this.pool, p);
  }

  async getTenantRetention(p: { tenantId: string }) {
    return (await retention.retentionOfTenant(this.pool, p.tenantId)).retention;
  }

  putTenantRetention(p: Parameters<Store['putTenantRetention']>[0]) {
    return retention.putTenantRetention(this.pool, p);
  }

  async shortestRetention(p: { tenantId: string }) {
    return (await retention.retentionOfTenant(this.pool, p.tenantId)).shortestMs;
  }

  tenantsWithRuns(p: { after: string | null; limit: number }) {
    return retention.tenantsWithRuns(this.pool, p);
  }

  pruneBatch(p: Parameters<Store['pruneBatch']>[0]) {
    return retention.pruneBatch(this.pool, p, this.archive);
  }

  pruneTenant(p: Parameters<Store['pruneTenant']>[0]) {
    return retention.pruneTenant(this.pool, p, this.archive);
  }

  takeMaintenanceLease(p: Parameters<Store['takeMaintenanceLease']>[0]) {
    return retention.takeMaintenanceLease(this.pool, p);
  }

  releaseMaintenanceLease(p: { name: string; owner: string }) {
    return retention.releaseMaintenanceLease(this.pool, p);
  }

  // Webhook notifications (notifications.ts).
  putNotification(p: Parameters<Store['putNotification']>[0]) {
    return inTransaction(this.pool, (client) => notifications.putNotification(client, p));
  }
  getNotification(p: Parameters<Store['getNotification']>[0]) {
    return notifications.getNotification(this.pool, p);
  }
  listNotifications(p: Parameters<Store['listNotifications']>[0]) {
    return notifications.listNotifications(this.pool, p);
  }
  deleteNotification(p: Parameters<Store['deleteNotification']>[0]) {
    return notifications.deleteNotification(this.pool, p);
  }
  listDeliveries(p: Parameters<Store['listDeliveries']>[0]) {
    return notifications.listDeliveries(this.pool, p);
  }
  scanLateRuns(p: Parameters<Store['scanLateRuns']>[0]) {
    return inTransaction(this.pool, (client) => notifications.scanLateRuns(client, p));
  }
  claimDeliveries(p: Parameters<Store['claimDeliveries']>[0]) {
    return notifications.claimDeliveries(this.pool, p);
  }
  finishDelivery(p: Parameters<Store['finishDelivery']>[0]) {
    return notifications.finishDelivery(this.pool, p);
  }
  pruneDeliveries(p: Parameters<Store['pruneDeliveries']>[0]) {
    return notifications.pruneDeliveries(this.pool, p);
  }

  pruneIdempotency(p: { now: number; ttlMs: number; batchSize: number }) {
    return idempotency.pruneIdempotency(this.pool, p);
  }

  listen(onWake: () => void, onListening?: (up: boolean) => void) {
    return notify.listen(this.pool, { onWake, onListening });
  }

  // -- nodes and shards -----------------------------------------------------------------------

  countShards() {
    return shards.countShards(this.pool);
  }

  touchNode(p: Parameters<Store['touchNode']>[0]) {
    return nodes.touchNode(this.pool, p);
  }

  shardStep(p: Parameters<Store['shardStep']>[0]) {
    return shards.shardStep(this.pool, { ...p, shardCount: this.shardCount });
  }

  leaveNode(p: { nodeId: string }): Promise<{ released: number[] }> {
    return inTransaction(this.pool, async (client) =>
      shards.leaveNode(client, { ...p, shardIds: await this.allShardIds() }),
    );
  }

  async touchRemoteWorker(p: Parameters<Store['touchRemoteWorker']>[0]) {
    const checked = nodes.checkRemoteTouch(p);
    return inTransaction(this.pool, (client) => nodes.touchRemoteWorker(client, checked));
  }

  leaveRemoteWorker(p: { tenantId: string; workerId: string }) {
    return nodes.leaveRemoteWorker(this.pool, p);
  }

  pruneNodes(p: { before: number; remoteBefore?: number }) {
    return nodes.pruneNodes(this.pool, p);
  }

  listNodes(p: { tenantId?: string | null; limit: number; cursor?: string | null }) {
    return nodes.listNodes(this.pool, p);
  }

  listShards() {
    return shards.listShards(this.pool);
  }

  async dueBacklog(p: { now: number; shards?: readonly number[] }): Promise<Map<number, number>> {
    const shardIds = p.shards ? [...p.shards] : await this.allShardIds();
    return shards.dueBacklog(this.pool, { now: p.now, shardIds });
  }

  async sampleClock(localNowMs: () => number) {
    const sentMs = localNowMs();
    const { rows } = await this.pool.query(R.clockRead);
    const receivedMs = localNowMs();
    return { sentMs, referenceMs: Number(rows[0].ms), receivedMs };
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}
