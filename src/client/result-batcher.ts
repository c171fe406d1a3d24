/**
 * Results on their way to a Tock server. Those handed in within a short linger (a worker's batch of
 * completions, the failures written beside it, and the results of the next few ms: at 1,000 runs/s
 * a request per result would be a request per ms) go in one request, split only
 * by the request's bounds: {@link MAX_BATCH} results, and about {@link MAX_BATCH_CHARS} of text so
 * that the body stays under the server's 1 MiB. Each caller gets its own result's outcome; a request
 * that fails fails every result it carried, and the caller decides whether to send them again.
 */
import type { Clock } from '../core/index.js';
import type { ResultOptions } from './results.js';
import type { ResultOutcome } from './types.js';

/** The most results in one request (the API's maximum). */
export const MAX_BATCH = 500;
/**
 * The most text (outputs, errors, stacks, in UTF-16 units) in one request. A character takes up to
 * 3 bytes in UTF-8, so a request stays under the server's 1 MiB body limit however the text is
 * written, unless most of it must be escaped.
 */
export const MAX_BATCH_CHARS = 300_000;

interface Queued {
  result: ResultOptions;
  resolve: (outcome: ResultOutcome) => void;
  reject: (err: unknown) => void;
}

const charsOf = (r: ResultOptions) =>
  (r.output?.length ?? 0) + (r.error?.length ?? 0) + (r.errorStack?.length ?? 0) + 200;

/** `items` in runs of at most MAX_BATCH results and MAX_BATCH_CHARS characters (a larger one alone). */
export function chunksOf<T extends { result: ResultOptions }>(items: readonly T[]): T[][] {
  const chunks: T[][] = [];
  let chunk: T[] = [];
  let chars = 0;
  for (const item of items) {
    const size = charsOf(item.result);
    if (chunk.length > 0 && (chunk.length >= MAX_BATCH || chars + size > MAX_BATCH_CHARS)) {
      chunks.push(chunk);
      chunk = [];
      chars = 0;
    }
    chunk.push(item);
    chars += size;
  }
  if (chunk.length > 0) chunks.push(chunk);
  return chunks;
}

export class ResultBatcher {
  private queue: Queued[] = [];
  private scheduled = false;
  /** Aborted when the queue is sent before the linger ends (it filled a request). */
  private linger: AbortController | null = null;

  /**
   * `send` writes one request's results and answers their outcomes, in order. A result waits up to
   * `lingerMs` on `clock` for others to join its request (0: only those of the same turn).
   */
  constructor(
    private readonly send: (results: ResultOptions[]) => Promise<ResultOutcome[]>,
    private readonly o: { clock: Clock; lingerMs: number },
  ) {}

  /** Sends `result` with the others handed in within the linger; resolves with its outcome. */
  submit(result: ResultOptions): Promise<ResultOutcome> {
    return new Promise((resolve, reject) => {
      this.queue.push({ result, resolve, reject });
      if (this.queue.length >= MAX_BATCH) return this.flush();
      if (this.scheduled) return;
      this.scheduled = true;
      if (this.o.lingerMs <= 0) {
        setImmediate(() => this.flush());
        return;
      }
      const linger = new AbortController();
      this.linger = linger;
      this.o.clock.sleep(this.o.lingerMs, linger.signal).then(
        () => this.flush(),
        () => undefined,
      );
    });
  }

  private flush(): void {
    this.scheduled = false;
    this.linger?.abort();
    this.linger = null;
    const items = this.queue;
    this.queue = [];
    for (const chunk of chunksOf(items)) void this.sendChunk(chunk);
  }

  private async sendChunk(items: Queued[]): Promise<void> {
    let outcomes: ResultOutcome[];
    try {
      outcomes = await this.send(items.map((i) => i.result));
    } catch (err) {
      for (const i of items) i.reject(err);
      return;
    }
    items.forEach((item, n) => {
      const outcome = outcomes[n];
      if (outcome && outcome.run_id === item.result.runId) item.resolve(outcome);
      else item.reject(new Error(`the server answered no outcome for run ${item.result.runId}`));
    });
  }
}
