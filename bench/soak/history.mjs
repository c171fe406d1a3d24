// The soak's record of what ran, read from the handlers' own logs (bench/soak/worker.mjs writes
// one line per handler call). `HandlerLog` tails the workers' files while the soak runs, hands each
// new call to the sampler, and keeps what the offline check needs: how many times each (job, slot)
// succeeded. `lostAndDoubled` is that check: no (job, slot) succeeded twice, and every slot of the
// steady jobs (and of the herd) inside the checked span succeeded once. It does not read `runs`:
// retention deletes them.
import { open } from 'node:fs/promises';

/** One handler call of a log line, or null for a line that is not one. */
function parseCall(line) {
  const f = line.split(',');
  if (f.length !== 8) return null;
  return {
    runId: f[0],
    jobId: f[1],
    slot: Number(f[2]),
    attempt: Number(f[3]),
    outcome: f[4],
    due: f[5] === '' ? null : Number(f[5]),
    start: Number(f[6]),
    end: Number(f[7]),
  };
}

/** A job's kind and number from its id (`steady-12`, `herd-3`, `long-7`). */
export function jobKind(jobId) {
  const dash = jobId.lastIndexOf('-');
  return { kind: jobId.slice(0, dash), n: Number(jobId.slice(dash + 1)) };
}

const KIND_BASE = { steady: 0, herd: 1_000_000, long: 2_000_000 };

export class HandlerLog {
  /** `files`: the workers' log files; `originMs`: slots are counted in seconds from it. */
  constructor(files, originMs) {
    this.files = files.map((path) => ({ path, offset: 0, rest: '' }));
    this.originS = Math.floor(originMs / 1000) - 3600;
    /** Successes by (job, slot): key = job number × 2^22 + slot second from the origin. */
    this.succeeded = new Map();
    this.calls = 0;
    this.bad = 0;
  }

  key(jobId, slot) {
    const { kind, n } = jobKind(jobId);
    return ((KIND_BASE[kind] ?? 3_000_000) + n) * 2 ** 22 + (Math.floor(slot / 1000) - this.originS);
  }

  /** Reads what the workers appended since the last call; calls `onCall` with each new call. */
  async read(onCall) {
    for (const f of this.files) {
      let handle;
      try {
        handle = await open(f.path, 'r');
      } catch {
        continue; // not written yet
      }
      try {
        const chunks = [];
        const buf = Buffer.alloc(1 << 20);
        for (;;) {
          const { bytesRead } = await handle.read(buf, 0, buf.length, f.offset);
          if (bytesRead === 0) break;
          f.offset += bytesRead;
          chunks.push(buf.toString('utf8', 0, bytesRead));
        }
        const text = f.rest + chunks.join('');
        const cut = text.lastIndexOf('\n');
        f.rest = text.slice(cut + 1);
        if (cut < 0) continue;
        for (const line of text.slice(0, cut).split('\n')) {
          const call = parseCall(line);
          if (call === null) {
            this.bad += 1;
            continue;
          }
          this.calls += 1;
          if (call.outcome === 'ok') {
            const k = this.key(call.jobId, call.slot);
            this.succeeded.set(k, (this.succeeded.get(k) ?? 0) + 1);
          }
          onCall(call);
        }
      } finally {
        await handle.close();
      }
    }
  }

  /**
   * The offline check. `steadyJobs` jobs `steady-<i>` run every second: each of their slots in
   * [fromMs, toMs] must have succeeded once. `herd`: { jobs, slots } — each herd job once per slot.
   * Returns the doubled (any job) and the missing, with a few examples of each.
   */
  lostAndDoubled({ steadyJobs, fromMs, toMs, herd }) {
    const doubled = [];
    for (const [k, n] of this.succeeded) if (n > 1) doubled.push(k);
    const missing = [];
    const firstS = Math.ceil(fromMs / 1000);
    const lastS = Math.floor(toMs / 1000);
    let expected = 0;
    for (let i = 0; i < steadyJobs; i++) {
      for (let s = firstS; s <= lastS; s++) {
        expected += 1;
        if (!this.succeeded.has(this.key(`steady-${i}`, s * 1000))) missing.push(`steady-${i}@${s * 1000}`);
      }
    }
    for (const slot of herd.slots) {
      for (let i = 0; i < herd.jobs; i++) {
        expected += 1;
        if (!this.succeeded.has(this.key(`herd-${i}`, slot))) missing.push(`herd-${i}@${slot}`);
      }
    }
    const name = (k) => {
      const job = Math.floor(k / 2 ** 22);
      const kind = Object.entries(KIND_BASE).findLast(([, base]) => job >= base);
      const slot = (k % 2 ** 22) + this.originS;
      return `${kind[0]}-${job - kind[1]}@${new Date(slot * 1000).toISOString()}`;
    };
    return {
      expected,
      doubled: doubled.length,
      missing: missing.length,
      doubledExamples: doubled.slice(0, 5).map(name),
      missingExamples: missing.slice(0, 5).map((m) => {
        const [job, ms] = m.split('@');
        return `${job}@${new Date(Number(ms)).toISOString()}`;
      }),
    };
  }
}
