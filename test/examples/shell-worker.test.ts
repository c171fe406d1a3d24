/**
 * examples/workers/shell/worker.sh (bash, curl, jq) against a real `tock server` with API keys: it
 * runs a claimed batch and records outputs, a permanent failure (exit 100) is dead-lettered at once
 * and another exit retried, SIGTERM finishes the running handler and releases the rest of the batch
 * (no attempt spent) and it exits 0, a handler longer than its lease is kept alive by the
 * heartbeats, it rides out a server killed and started again mid-run, and a refused key stops it
 * with exit code 2.
 */
import path from 'node:path';
import { describe, expect, test } from 'vitest';
import { createKey, EXAMPLES, exampleSetup, WorkerProcess } from './harness.js';

const WORKER = path.join(EXAMPLES, 'shell', 'worker.sh');

const s = exampleSetup();

function startWorker(env: Record<string, string> = {}, key = s.workerKey): WorkerProcess {
  const w = new WorkerProcess('bash', [WORKER], {
    TOCK_URL: s.server.url,
    TOCK_KEY: key,
    TOCK_WAIT_MS: '2000',
    ...env,
  });
  s.workers.push(w);
  return w;
}

describe('the shell example worker', () => {
  test('runs a claimed batch: outputs kept, exit 100 dead at once, another exit retried', async () => {
    const echo = await s.op.trigger('sh-echo', 'echo', { greeting: 'hello' });
    const failing = await s.op.trigger('sh-fail', 'fail', { message: 'bad input' }, { max_attempts: 5 });
    const flaky = await s.op.trigger(
      'sh-flaky',
      'flaky',
      {},
      { backoff_base_seconds: 1.1, backoff_cap_seconds: 1 },
    );
    // All three are claimable before the worker starts: its first claim takes them as one batch.
    const w = startWorker({ TOCK_BATCH: '10' });

    const e = await s.op.runIn(echo, 'succeeded');
    expect(JSON.parse(e.attempts[0].output)).toEqual({ greeting: 'hello' });
    expect(e.attempts[0].worker_id).toMatch(/^sh-/);

    const dead = await s.op.runIn(failing, 'dead');
    expect(dead.attempts).toHaveLength(1);
    expect(dead.attempts[0].error).toBe('exit 100: bad input');
    const dlq = await s.op.ok('GET', '/v1/runs?state=dead');
    expect(dlq.runs.map((r: { run_id: string }) => r.run_id)).toContain(failing);

    const retried = await s.op.runIn(flaky, 'succeeded');
    expect(retried.attempts.map((a: { outcome: string }) => a.outcome)).toEqual(['failed', 'succeeded']);
    expect(retried.attempts[0].error).toBe('exit 1: flaky on attempt 1');
    expect(retried.attempts[1].output).toBe('succeeded on attempt 2\n');

    await w.waitFor(`run failed; dead-lettered run_id=${failing}`);
    // One claim took the three, and one request reported them.
    expect(w.output).toContain('sending 3 results in one request');

    w.child.kill('SIGTERM');
    expect(await w.exitCode(15_000)).toBe(0);
    expect(w.output).toContain('worker stopped');
    // The results went through the batched route, not the per-run fallback.
    expect(w.output).not.toContain('completing one run per request');
  });

  test('heartbeats keep a handler longer than its lease; SIGTERM finishes it, releases the rest; exit 0', async () => {
    // A 3 s lease: a 5 s handler outlives it, and lives on only through the heartbeats. Both runs
    // are claimable before the worker starts: its first claim takes them as one batch.
    const job = { lease_seconds: 3 };
    const runs = [
      await s.op.trigger('sh-long-1', 'sleep', { seconds: 5 }, job),
      await s.op.trigger('sh-long-2', 'sleep', { seconds: 5 }, job),
    ];
    const w = startWorker({ TOCK_BATCH: '2', TOCK_GRACE: '10' });
    await w.waitFor('run started');
    const [first, second] = w.output.includes(`run started run_id=${runs[0]}`) ? runs : [runs[1]!, runs[0]!];
    const started = await s.op.ok('GET', `/v1/runs/${first}`);
    const signalled = Date.now();
    w.child.kill('SIGTERM');
    expect(await w.exitCode(20_000)).toBe(0);
    expect(Date.now() - signalled).toBeLessThan(12_000);

    // The running handler finished under its first lease, renewed past the 3 s it was claimed for.
    const f = await s.op.runIn(first!, 'succeeded');
    expect(f.attempts).toHaveLength(1);
    expect(f.attempts[0].output).toBe('slept 5s\n');
    expect(Date.parse(f.attempts[0].finished_at)).toBeGreaterThan(Date.parse(started.lease_expires_at));
    // The other run of the batch was never started: released, no attempt spent.
    const r = await s.op.runIn(second!, 'pending');
    expect(
      r.attempts.map((a: { outcome: string }) => a.outcome),
      JSON.stringify(r),
    ).toEqual(['released']);
    expect(w.output).toContain(`run released run_id=${second}`);
    expect(w.output).not.toContain(`run started run_id=${second}`);
    // No worker takes it in this test: cancel it so that the next tests start clean.
    await s.op.ok('POST', `/v1/runs/${second}/cancel`);
  });

  test('a wrong key and a revoked key stop it with exit code 2', async () => {
    const wrong = startWorker({}, 'tock_not-a-key');
    expect(await wrong.exitCode(10_000)).toBe(2);
    expect(wrong.output).toContain('the server refused the key (401');

    const revokable = await createKey(s.db, 'worker');
    const w = startWorker({ TOCK_WAIT_MS: '500' }, revokable.secret);
    await w.waitFor('worker started');
    const runId = await s.op.trigger('sh-before-revoke', 'echo', 'still mine');
    await s.op.runIn(runId, 'succeeded');
    await s.op.ok('DELETE', `/v1/keys/${revokable.keyId}`);
    expect(await w.exitCode(10_000)).toBe(2);
    expect(w.output).toContain('the server refused the key (401');
  });

  test('rides out a server killed and started again mid-run: the run completes under its lease', async () => {
    const w = startWorker();
    // A lease longer than the server's 6 s: the restart (a new process, its migrations checked, on a
    // loaded CI machine up to several seconds) must fit in it, or the reaper rightly runs it again.
    const runId = await s.op.trigger('sh-across-restart', 'sleep', { seconds: 2 }, { lease_seconds: 30 });
    await w.waitFor(`run started run_id=${runId}`);
    await s.server.kill();
    await w.waitFor('failed (curl exit 7', 10_000); // connection refused: retried
    await s.server.restart();

    const run = await s.op.runIn(runId, 'succeeded');
    expect(run.attempts).toHaveLength(1);
    expect(run.attempts[0].output).toBe('slept 2s\n');
    const after = await s.op.trigger('sh-after-restart', 'echo', 'again');
    expect((await s.op.runIn(after, 'succeeded')).attempts[0].output).toBe('again\n');

    w.child.kill('SIGTERM');
    expect(await w.exitCode(15_000)).toBe(0);
  });
});
