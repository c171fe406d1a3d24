/**
 * The command executor with real child processes: exit codes onto success, retry or dead letter,
 * the output tail, the environment, argv passed without a shell, and — the point of the process
 * group — timeouts, aborts and normal exits leaving no process of the run behind.
 */
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, realpath, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { PermanentError, ValidationError } from '../../../src/core/index.js';
import { type ExecExecutorConfig, execExecutor } from '../../../src/worker/executors/exec.js';
import { OUTPUT_TAIL_BYTES } from '../../../src/worker/executors/output.js';
import type { RunContext } from '../../../src/worker/worker.js';

let dir: string;
beforeAll(async () => {
  dir = await realpath(await mkdtemp(path.join(tmpdir(), 'tock-exec-')));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const SLOT = new Date('2026-03-08T07:00:00.000Z');

function ctx(overrides: Partial<RunContext> = {}): RunContext {
  return {
    runId: 'run-7',
    tenantId: 'acme',
    jobId: 'nightly-backup',
    scheduledFor: SLOT,
    attempt: 3,
    payload: { full: true, label: 'it\'s "quoted"' },
    signal: new AbortController().signal,
    logger: pino({ level: 'silent' }),
    extendLease: async () => new Date(SLOT.getTime() + 30_000),
    progress: () => {},
    log: () => {},
    ...overrides,
  };
}

const sh = (script: string, config: Omit<ExecExecutorConfig, 'argv'> = {}, ...args: string[]) =>
  execExecutor({ argv: ['sh', '-c', script, 'sh', ...args], ...config }, { killGraceMs: 500 });

async function failure(promise: unknown): Promise<Error> {
  try {
    await promise;
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected the handler to fail');
}

/** Test guard, not scheduling: polls until `check` holds or fails loudly after `timeoutMs`. */
async function eventually(what: string, check: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw err;
  }
}

/** Waits until `pid` is gone: ESRCH (a killed orphan is reaped by init, which may take a moment). */
async function gone(pid: number): Promise<void> {
  await eventually(`process ${pid} is gone`, () => !alive(pid));
}

/** The pid a script wrote to `file`, once it is there. */
async function pidFrom(file: string): Promise<number> {
  const read = () => (existsSync(file) ? readFileSync(file, 'utf8') : '');
  await eventually(`${file} holds a pid`, () => /^\d+\n$/.test(read()));
  return Number(read().trim());
}

describe('execExecutor', () => {
  test('exit 0 succeeds with stdout and stderr in one text, in the order they reached the worker', async () => {
    const handler = sh('echo one; sleep 0.05; echo two >&2; sleep 0.05; echo three');
    expect(await handler(ctx())).toEqual({ output: 'one\ntwo\nthree\n' });
  });

  test('exit 75 (EX_TEMPFAIL) retries', async () => {
    const err = await failure(sh('echo "database busy" >&2; exit 75')(ctx()));
    expect(err).not.toBeInstanceOf(PermanentError);
    expect(err.message).toBe('sh exited with code 75 (retry)\n--- output ---\ndatabase busy\n');
    // The worker keeps an error's `output` on the attempt, as it does a success's.
    expect((err as { output?: string }).output).toBe('database busy\n');
  });

  test('another non-zero code retries by default, and is permanent when listed or with `others`', async () => {
    const script = 'echo "bad input"; exit 3';
    const byDefault = await failure(sh(script)(ctx()));
    expect(byDefault).not.toBeInstanceOf(PermanentError);
    expect(byDefault.message.split('\n')[0]).toBe('sh exited with code 3');

    const listed = await failure(sh(script, { permanent_exit_codes: [2, 3] })(ctx()));
    expect(listed).toBeInstanceOf(PermanentError);
    expect(listed.message).toBe('sh exited with code 3 (permanent)\n--- output ---\nbad input\n');
    expect((listed as PermanentError).details).toEqual({ exit_code: 3 });

    const notListed = await failure(sh('exit 4', { permanent_exit_codes: [2, 3] })(ctx()));
    expect(notListed).not.toBeInstanceOf(PermanentError);

    const others = await failure(sh(script, { permanent_exit_codes: 'others' })(ctx()));
    expect(others).toBeInstanceOf(PermanentError);
    const stillRetries = await failure(sh('exit 75', { permanent_exit_codes: 'others' })(ctx()));
    expect(stillRetries).not.toBeInstanceOf(PermanentError);
    const customRetry = await failure(
      sh('exit 9', { retry_exit_codes: [9], permanent_exit_codes: 'others' })(ctx()),
    );
    expect(customRetry).not.toBeInstanceOf(PermanentError);
    expect(customRetry.message).toBe('sh exited with code 9 (retry)');
  });

  test('keeps only the last 64 KiB of the output', async () => {
    const tail = `${'b'.repeat(OUTPUT_TAIL_BYTES - 3)}END`;
    const write = `process.stdout.write('a'.repeat(200000)); process.stdout.write('${tail}')`;
    const ok = execExecutor({ argv: [process.execPath, '-e', write] });
    const { output } = (await ok(ctx())) as { output: string };
    expect(output.length).toBe(OUTPUT_TAIL_BYTES);
    expect(output === tail).toBe(true); // not toBe: a mismatch would print 64 KiB twice

    const failing = execExecutor({ argv: [process.execPath, '-e', `${write}; process.exitCode = 1`] });
    const err = await failure(failing(ctx()));
    expect(Buffer.byteLength(err.message)).toBeLessThanOrEqual(OUTPUT_TAIL_BYTES);
    expect(err.message.split('\n')[0]).toBe(`${process.execPath} exited with code 1`);
    expect(/--- output, last \d+ of 265536 bytes ---\nb+END$/.test(err.message)).toBe(true);
  });

  test('a timeout kills the whole process group, grandchildren included', async () => {
    const pidfile = path.join(dir, 'timeout.pid');
    const started = performance.now();
    const err = await failure(sh('sleep 30 & echo $! > "$1"; wait', { timeout: 500 }, pidfile)(ctx()));
    expect(performance.now() - started).toBeLessThan(5000);
    expect(err).not.toBeInstanceOf(PermanentError);
    expect(err.message).toBe('sh timed out after 500 ms; its process group was killed');
    await gone(await pidFrom(pidfile));
  });

  test('a group that ignores SIGTERM gets SIGKILL after the grace', async () => {
    const pidfile = path.join(dir, 'stubborn.pid');
    const err = await failure(
      sh('trap "" TERM; sleep 30 & echo $! > "$1"; echo started; wait', { timeout: 500 }, pidfile)(ctx()),
    );
    expect(err.message).toBe(
      'sh timed out after 500 ms; its process group was killed\n--- output ---\nstarted\n',
    );
    await gone(await pidFrom(pidfile));
  });

  test('aborting the run signal kills the process group', async () => {
    const pidfile = path.join(dir, 'abort.pid');
    const controller = new AbortController();
    const pending = failure(
      sh('sleep 30 & echo $! > "$1"; wait', {}, pidfile)(ctx({ signal: controller.signal })),
    );
    const grandchild = await pidFrom(pidfile);
    expect(alive(grandchild)).toBe(true);
    controller.abort(new Error('lease lost on run run-7'));
    const err = await pending;
    expect(err.message).toBe('lease lost on run run-7');
    await gone(grandchild);
  });

  test('an already aborted signal starts nothing', async () => {
    const controller = new AbortController();
    controller.abort(new Error('worker shutdown'));
    const marker = path.join(dir, 'never');
    const err = await failure(sh('touch "$1"', {}, marker)(ctx({ signal: controller.signal })));
    expect(err.message).toBe('worker shutdown');
    expect(existsSync(marker)).toBe(false);
  });

  test('what a command leaves running in its group is stopped when it exits', async () => {
    const pidfile = path.join(dir, 'leftover.pid');
    const started = performance.now();
    expect(await sh('sleep 30 & echo $! > "$1"; echo done', {}, pidfile)(ctx())).toEqual({
      output: 'done\n',
    });
    expect(performance.now() - started).toBeLessThan(5000);
    await gone(await pidFrom(pidfile));
  });

  test('the environment carries the run and the configured variables', async () => {
    const handler = sh(
      'printf "%s\\n" "$TOCK_RUN_ID" "$TOCK_JOB_ID" "$TOCK_SCHEDULED_FOR" "$TOCK_ATTEMPT" "$TOCK_PAYLOAD" "$REGION" "$PATH"',
      {
        env: { REGION: 'eu-west', TOCK_RUN_ID: 'not this' },
      },
    );
    const { output } = (await handler(ctx())) as { output: string };
    expect(output.split('\n')).toEqual([
      'run-7',
      'nightly-backup',
      '2026-03-08T07:00:00.000Z',
      '3',
      '{"full":true,"label":"it\'s \\"quoted\\""}',
      'eu-west',
      process.env.PATH,
      '',
    ]);
  });

  test('argv is passed as it is, with no shell to interpret it', async () => {
    const args = ['$(echo hi)', '`id`', '*', '; echo pwned', '"quoted"', '', 'a b'];
    const handler = execExecutor({ argv: ['printf', '[%s]\\n', ...args] });
    const { output } = (await handler(ctx())) as { output: string };
    expect(output).toBe(args.map((a) => `[${a}]\n`).join(''));
  });

  test('runs in cwd', async () => {
    expect(await execExecutor({ argv: ['pwd'], cwd: dir })(ctx())).toEqual({ output: `${dir}\n` });
  });

  test('a command that cannot start retries, naming it', async () => {
    const err = await failure(execExecutor({ argv: [path.join(dir, 'no-such-program')] })(ctx()));
    expect(err).not.toBeInstanceOf(PermanentError);
    expect(err.message).toMatch(/^cannot start .*no-such-program: spawn .* ENOENT$/);
  });

  test('a command killed by a signal retries', async () => {
    const err = await failure(sh('echo about to die; kill -9 $$')(ctx()));
    expect(err).not.toBeInstanceOf(PermanentError);
    expect(err.message).toBe('sh was killed by SIGKILL\n--- output ---\nabout to die\n');
  });
});

describe('execExecutor configuration', () => {
  const field = (config: ExecExecutorConfig) => {
    try {
      execExecutor(config);
    } catch (err) {
      expect(err).toBeInstanceOf(ValidationError);
      return (err as ValidationError).details.field;
    }
    return null;
  };

  test('refuses a bad configuration, naming the field', () => {
    expect(field({ argv: [] })).toBe('argv');
    expect(field({ argv: [''] })).toBe('argv[0]');
    expect(field({ argv: ['ls', 3 as unknown as string] })).toBe('argv[1]');
    expect(field({ argv: ['ls'], cwd: path.join(dir, 'missing') })).toBe('cwd');
    expect(field({ argv: ['ls'], timeout: 1.5 })).toBe('timeout');
    expect(field({ argv: ['ls'], env: { 'A=B': 'x' } })).toBe('env.A=B');
    expect(field({ argv: ['ls'], retry_exit_codes: [0] })).toBe('retry_exit_codes[0]');
    expect(field({ argv: ['ls'], permanent_exit_codes: [256] })).toBe('permanent_exit_codes[0]');
    expect(field({ argv: ['ls'], permanent_exit_codes: [75] })).toBe('permanent_exit_codes');
    expect(field({ argv: ['ls'], permanent_exit_codes: 'all' as 'others' })).toBe('permanent_exit_codes');
    expect(field({ argv: ['ls'] })).toBeNull();
  });
});
