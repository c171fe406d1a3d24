/**
 * examples/workers/python/worker.py (standard library only) against a real `tock server` with API
 * keys: it runs triggered runs and records their outputs, a permanent failure is dead-lettered at
 * once and a retryable one retried, SIGTERM drains it (a handler within the grace finishes, one past
 * it is released without spending an attempt) and it exits 0, a run whose lease was revoked is
 * dropped, one past its timeout fails, it rides out a server killed and
 * started again mid-run, and a refused key (wrong, revoked, or without the `work` permission) stops
 * it with exit code 2.
 */
import path from 'node:path';
import { describe, expect, test } from 'vitest';
import { createKey, EXAMPLES, exampleSetup, WorkerProcess } from './harness.js';

const PYTHON = process.env.PYTHON ?? 'python3';
const WORKER = path.join(EXAMPLES, 'python', 'worker.py');

const s = exampleSetup();

function startWorker(args: string[] = [], key = s.workerKey): WorkerProcess {
  const w = new WorkerProcess(PYTHON, [WORKER, '--url', s.server.url, '--wait-ms', '2000', ...args], {
    TOCK_KEY: key,
    TOCK_LOG_FORMAT: 'json',
  });
  s.workers.push(w);
  return w;
}

/** The worker's JSON log lines about `runId`. */
function about(w: WorkerProcess, runId: string): string[] {
  return w.lines.filter((l) => l.includes(runId)).map((l) => JSON.parse(l).msg);
}

describe('the Python example worker', () => {
  test('runs triggered runs: outputs kept, a permanent failure dead at once, a retryable one retried', async () => {
    const w = startWorker(['--concurrency', '4']);
    await w.waitFor('worker started');
    const echoes = await Promise.all(
      [1, 2, 3].map((i) => s.op.trigger(`py-echo-${i}`, 'echo', { greeting: 'hello', i })),
    );
    const failing = await s.op.trigger('py-fail', 'fail', { message: 'bad input' }, { max_attempts: 5 });
    const flaky = await s.op.trigger(
      'py-flaky',
      'flaky',
      { succeed_on: 2, retry_after_ms: 100 },
      { max_attempts: 3, backoff_base_seconds: 1.1, backoff_cap_seconds: 1 },
    );

    for (const [i, runId] of echoes.entries()) {
      const run = await s.op.runIn(runId, 'succeeded');
      expect(run.attempts).toHaveLength(1);
      expect(JSON.parse(run.attempts[0].output)).toEqual({ greeting: 'hello', i: i + 1 });
      expect(run.attempts[0].worker_id).toMatch(/^py-/);
    }

    // retryable: false dead-letters at once, whatever max_attempts says; the dead-letter view lists it.
    const dead = await s.op.runIn(failing, 'dead');
    expect(dead.attempts).toHaveLength(1);
    expect(dead.attempts[0].error).toBe('PermanentError: bad input');
    expect(dead.attempts[0].error_stack).toContain('raise PermanentError');
    const dlq = await s.op.ok('GET', '/v1/runs?state=dead');
    expect(dlq.runs.map((r: { run_id: string }) => r.run_id)).toContain(failing);

    const retried = await s.op.runIn(flaky, 'succeeded');
    expect(retried.attempts.map((a: { outcome: string }) => a.outcome)).toEqual(['failed', 'succeeded']);
    expect(retried.attempts[0].error).toBe('RetryableError: flaky on attempt 1');
    expect(retried.attempts[1].output).toBe('succeeded on attempt 2');

    await w.waitFor(`"run_id": "${failing}"`);
    expect(about(w, failing)).toContain('run failed; dead-lettered');

    w.child.kill('SIGTERM');
    expect(await w.exitCode(10_000)).toBe(0);
    expect(w.output).toContain('worker stopped');
    // The results went through the batched route, not the per-run fallback.
    expect(w.output).not.toContain('completing one run per request');
  });

  test('SIGTERM: a handler within the grace finishes, one past it is released (no attempt spent); exit 0', async () => {
    const w = startWorker(['--concurrency', '2', '--grace', '2']);
    await w.waitFor('worker started');
    const quick = await s.op.trigger('py-quick', 'sleep', { seconds: 1 });
    const long = await s.op.trigger('py-long', 'sleep', { seconds: 60 });
    await s.op.runIn(quick, 'running');
    await s.op.runIn(long, 'running');
    await w.waitFor(`"run_id": "${long}"`);
    const signalled = Date.now();
    w.child.kill('SIGTERM');
    expect(await w.exitCode(10_000)).toBe(0);
    // The grace (2 s) and a release, not a lease expiring.
    expect(Date.now() - signalled).toBeLessThan(6_000);

    const q = await s.op.runIn(quick, 'succeeded');
    expect(q.attempts[0].output).toBe('slept 1s');
    const l = await s.op.runIn(long, 'pending');
    expect(l.attempt).toBe(1);
    expect(l.attempts.map((a: { outcome: string }) => a.outcome)).toEqual(['released']);
    expect(about(w, long)).toContain('run released');
    expect(w.output).toContain('worker stopped');
    // Nothing else claims it in this test: cancel it so that later tests start clean.
    await s.op.ok('POST', `/v1/runs/${long}/cancel`);
  });

  test('a run whose lease is revoked (cancelled) is dropped at the next heartbeat; its handler is told to stop', async () => {
    const w = startWorker(['--concurrency', '2']);
    await w.waitFor('worker started');
    const runId = await s.op.trigger('py-cancelled', 'sleep', { seconds: 60 });
    await s.op.runIn(runId, 'running');
    await s.op.ok('POST', `/v1/runs/${runId}/cancel`);
    // A third of the 6 s lease: the heartbeat after the cancel reports it lost.
    await w.waitFor(`"msg": "run dropped: lease lost", "run_id": "${runId}"`, 10_000);
    // The sleep handler saw `cancelled` and returned; its result is dropped, not sent.
    await w.waitFor(`"msg": "result dropped: the run is no longer ours", "run_id": "${runId}"`, 5_000);
    expect((await s.op.ok('GET', `/v1/runs/${runId}`)).state).toBe('cancelled');
    // The worker has room again and goes on.
    const next = await s.op.trigger('py-after-cancel', 'echo', 'next');
    expect((await s.op.runIn(next, 'succeeded')).attempts[0].output).toBe('next');
  });

  test('a handler past its timeout_seconds fails the attempt (retryable); its late result is ignored', async () => {
    const w = startWorker(['--concurrency', '2']);
    await w.waitFor('worker started');
    const runId = await s.op.trigger(
      'py-too-slow',
      'sleep',
      { seconds: 60 },
      { timeout_seconds: 1, max_attempts: 1 },
    );
    // Retryable, but its only attempt is spent: dead.
    const run = await s.op.runIn(runId, 'dead', 10_000);
    expect(run.attempts).toHaveLength(1);
    expect(run.attempts[0].error).toBe('TimeoutError: the handler ran past 1s');
    // The handler saw `cancelled` and returned; what it returned is not sent.
    await w.waitFor(`"msg": "result dropped: the run is no longer ours", "run_id": "${runId}"`, 5_000);
  });

  test('a wrong key, a key without the work permission, and a revoked key stop it with exit code 2', async () => {
    const wrong = startWorker([], 'tock_not-a-key');
    expect(await wrong.exitCode(10_000)).toBe(2);
    expect(wrong.output).toContain('the server refused the key (401');

    const reader = startWorker([], (await createKey(s.db, 'reader')).secret);
    expect(await reader.exitCode(10_000)).toBe(2);
    expect(reader.output).toContain('the server refused the key (403');

    const revokable = await createKey(s.db, 'worker');
    const w = startWorker(['--wait-ms', '500'], revokable.secret);
    const runId = await s.op.trigger('py-before-revoke', 'echo', 'still mine');
    await s.op.runIn(runId, 'succeeded');
    await s.op.ok('DELETE', `/v1/keys/${revokable.keyId}`);
    expect(await w.exitCode(10_000)).toBe(2);
    expect(w.output).toContain('the server refused the key (401');
  });

  test('rides out a server killed and started again mid-run: the run completes under its lease', async () => {
    const w = startWorker(['--concurrency', '2']);
    await w.waitFor('worker started');
    // A lease longer than the server's 6 s: the restart (a new process, its migrations checked, on a
    // loaded CI machine up to several seconds) must fit in it, or the reaper rightly runs it again.
    const runId = await s.op.trigger('py-across-restart', 'sleep', { seconds: 3 }, { lease_seconds: 30 });
    await s.op.runIn(runId, 'running');
    await s.server.kill();
    // Down for a while: the worker's heartbeat and claim fail meanwhile, and are retried.
    await w.waitFor('request failed; retrying', 10_000);
    await s.server.restart();

    const run = await s.op.runIn(runId, 'succeeded');
    expect(run.attempts).toHaveLength(1);
    expect(run.attempts[0].output).toBe('slept 3s');
    // And it goes on claiming from the new server process.
    const after = await s.op.trigger('py-after-restart', 'echo', 'again');
    expect((await s.op.runIn(after, 'succeeded')).attempts[0].output).toBe('again');

    w.child.kill('SIGTERM');
    expect(await w.exitCode(10_000)).toBe(0);
  });
});
