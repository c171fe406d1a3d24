/**
 * Shard leases: how several scheduler nodes share the job space. Each node, every `renewMs`,
 * renews the shards it holds, gives back those above its fair share and takes free or expired
 * ones up to it (one `shardStep` of the store). The tick loop asks `fence()` for the shards to
 * tick: only leases that have not run out on this node's clock, each with its epoch, which the
 * tick's transaction checks and locks in the database. A shard missing from a renewal is dropped
 * at once; a renewal that fails leaves the leases to run out on their own, and ticking for them
 * stops when they do. When a held lease of another node will run out before the next renewal,
 * the step after it is scheduled for that instant, so a dead node's shards are taken at once.
 */
import { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import { type Clock, Periodic } from '../core/index.js';
import type { ShardLease, ShardStep, Store } from '../store/index.js';

/** What the shard manager needs of the store. */
export type ShardStore = Pick<Store, 'shardStep' | 'leaveNode'>;

export interface ShardManagerOptions {
  store: ShardStore;
  clock: Clock;
  logger: Logger;
  /** Unique per process start. */
  nodeId: string;
  /** Length of a shard lease, ms. Default 10000. */
  leaseMs?: number;
  /** Time between steps, ms. Default a quarter of the lease. */
  renewMs?: number;
  /** Consulted before each step: a reason not to trust the clock skips it (the leases run out). */
  refusal?: () => string | null;
  /** This node's clock offset from the database, recorded for `tock status`. */
  clockState?: () => { offsetMs: number; uncertaintyMs: number };
  /** Anything else recorded with the node for `tock status` (e.g. its backlog). */
  info?: () => Record<string, unknown>;
}

export interface ShardManagerEvents {
  /** The set of shards held changed. */
  change: [step: ShardStep & { lost: number[] }];
  step: [step: ShardStep];
  error: [err: unknown];
}

/** Time between steps while this node holds less than its fair share, ms. */
const CONVERGE_MS = 200;

export class ShardManager extends EventEmitter<ShardManagerEvents> {
  readonly nodeId: string;
  readonly leaseMs: number;
  readonly renewMs: number;
  private held = new Map<number, ShardLease>();
  private readonly periodic: Periodic;
  private last: ShardStep | null = null;

  constructor(private readonly o: ShardManagerOptions) {
    super();
    this.nodeId = o.nodeId;
    this.leaseMs = o.leaseMs ?? 10_000;
    this.renewMs = o.renewMs ?? Math.max(50, Math.floor(this.leaseMs / 4));
    if (!(this.renewMs < this.leaseMs))
      throw new RangeError('shard renewal must be shorter than the shard lease');
    this.periodic = new Periodic({
      clock: o.clock,
      intervalMs: this.renewMs,
      step: async () => {
        const why = o.refusal?.();
        if (why) return false;
        return this.stepOnce();
      },
      onError: (err, failures) => {
        o.logger.error({ err, failures }, 'shard lease renewal failed; leases run out unless renewed');
        if (this.listenerCount('error') > 0) this.emit('error', err); // logged already; unheard, it must not throw
      },
    });
  }

  /** The shards safe to tick now, with their epochs: leases not yet run out on this node's clock. */
  fence(): { nodeId: string; shards: { shardId: number; epoch: number }[] } {
    const now = this.o.clock.nowMs();
    const shards: { shardId: number; epoch: number }[] = [];
    for (const l of this.held.values()) {
      if (l.expiresAt.getTime() > now) shards.push({ shardId: l.shardId, epoch: l.epoch });
    }
    return { nodeId: this.nodeId, shards };
  }

  /** Shard ids held (leases not run out), ascending. */
  owned(): number[] {
    return this.fence()
      .shards.map((s) => s.shardId)
      .sort((a, b) => a - b);
  }

  /**
   * Stops ticking shards a tick found this node no longer holds (until a step takes them again),
   * and says so as a step that finds them gone would: the next step does not see them as lost.
   */
  forget(shardIds: readonly number[]): void {
    const lost = shardIds.filter((id) => this.held.delete(id));
    if (lost.length > 0) this.warnLost(lost);
  }

  private warnLost(lost: readonly number[]): void {
    this.o.logger.warn(
      { shards: idRanges(lost) },
      'shard leases lost (another node holds them now); stopped ticking them',
    );
  }

  /** What the last step found (live nodes, fair share), or null before the first. */
  get lastStep(): ShardStep | null {
    return this.last;
  }

  /**
   * One step. Returns how long to wait before the next: the renewal interval, or less when a
   * lease of another node runs out sooner (it may be this node's to take).
   */
  async stepOnce(): Promise<number> {
    const now = this.o.clock.nowMs();
    const step = await this.o.store.shardStep({
      nodeId: this.nodeId,
      now,
      leaseMs: this.leaseMs,
      clock: this.o.clockState?.(),
      info: this.o.info?.(),
    });
    this.last = step;
    const before = new Set(this.held.keys());
    this.held = new Map(step.owned.map((l) => [l.shardId, l]));
    const lost = [...before]
      .filter((id) => !this.held.has(id) && !step.released.includes(id))
      .sort((a, b) => a - b);
    if (lost.length > 0) this.warnLost(lost);
    if (step.taken.length > 0 || step.released.length > 0 || lost.length > 0) {
      this.o.logger.info(
        {
          // Ranges (`0-63`), not one id each: a node that starts alone takes every shard.
          taken: idRanges(step.taken),
          released: idRanges(step.released),
          lost: idRanges(lost),
          holding: step.owned.length,
          shards: step.shardCount,
          fair_share: step.fairShare,
          live_nodes: step.liveNodes,
        },
        'shard ownership changed',
      );
      this.emit('change', { ...step, lost });
    }
    this.emit('step', step);
    let wait = this.renewMs;
    // Below the fair share (a node joined or left and shards are changing hands): look again soon,
    // so shards another node just gave back do not stay untended for a whole renewal interval.
    if (step.owned.length < step.fairShare) wait = Math.min(wait, CONVERGE_MS);
    const next = step.nextForeignExpiry?.getTime();
    if (next !== undefined && next > now) wait = Math.min(wait, next - this.o.clock.nowMs() + 1);
    return wait;
  }

  start(): void {
    this.periodic.start();
  }

  /** Stops renewing and, unless `keep`, gives every shard back so other nodes take them at once. */
  async stop(o: { keep?: boolean } = {}): Promise<void> {
    await this.periodic.stop();
    if (o.keep) return;
    this.held.clear();
    try {
      const { released } = await this.o.store.leaveNode({ nodeId: this.nodeId });
      if (released.length > 0) this.o.logger.info({ shards: released.length }, 'shards given back');
    } catch (err) {
      this.o.logger.warn({ err }, 'could not give shards back; they are free when their leases run out');
    }
  }
}

/** Shard ids as sorted ranges for a log line: `[0, 1, 2, 3, 7, 9, 10]` → `0-3,7,9-10`; none → ``. */
function idRanges(ids: readonly number[]): string {
  const sorted = [...ids].sort((a, b) => a - b);
  const parts: string[] = [];
  for (let i = 0; i < sorted.length; ) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === (sorted[j] as number) + 1) j++;
    parts.push(i === j ? `${sorted[i]}` : `${sorted[i]}-${sorted[j]}`);
    i = j + 1;
  }
  return parts.join(',');
}
