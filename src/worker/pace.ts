/**
 * The pace meter: how many handlers the worker started per second, recently. Starts are counted in
 * {@link PACE_BUCKETS} buckets of {@link PACE_BUCKET_MS} on the worker's clock (a ring: a bucket
 * is reset when its turn comes again); the pace is the starts of the current bucket and the nine
 * before it, over one second. A pause of a second empties it, so an idle worker's pace is 0, and a
 * worker that just started reads low while it warms up (its held runs then grow with its pace,
 * never ahead of it). It reads only the time it is given, so tests drive it with a `FakeClock`.
 */

/** Width of one bucket of starts, ms. */
export const PACE_BUCKET_MS = 100;
/** Buckets in the window: the pace is over their span, one second. */
export const PACE_BUCKETS = 10;
const WINDOW_MS = PACE_BUCKET_MS * PACE_BUCKETS;

export class PaceMeter {
  private readonly counts = new Array<number>(PACE_BUCKETS).fill(0);
  /** The bucket number (ms / PACE_BUCKET_MS) each slot of the ring counts for. */
  private readonly slots = new Array<number>(PACE_BUCKETS).fill(Number.NEGATIVE_INFINITY);

  /** Counts `n` handler starts at `now` (ms). */
  count(now: number, n = 1): void {
    if (n <= 0) return;
    const bucket = Math.floor(now / PACE_BUCKET_MS);
    const i = ((bucket % PACE_BUCKETS) + PACE_BUCKETS) % PACE_BUCKETS;
    if (this.slots[i] !== bucket) {
      this.slots[i] = bucket;
      this.counts[i] = 0;
    }
    this.counts[i] = (this.counts[i] ?? 0) + n;
  }

  /** Starts per second over the window ending at `now`: the last {@link PACE_BUCKETS} buckets. */
  perSecond(now: number): number {
    const bucket = Math.floor(now / PACE_BUCKET_MS);
    let starts = 0;
    for (let i = 0; i < PACE_BUCKETS; i++) {
      const at = this.slots[i] ?? Number.NEGATIVE_INFINITY;
      if (at <= bucket && at > bucket - PACE_BUCKETS) starts += this.counts[i] ?? 0;
    }
    return (starts * 1000) / WINDOW_MS;
  }
}
