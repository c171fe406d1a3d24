/**
 * The command executor: a handler that runs one configured command per run. The command is fixed
 * in the worker's configuration (a job names a handler, never a command) and is started without a
 * shell, from an argv list, so nothing in a payload or an argument is ever interpreted.
 *
 * The command leads its own process group, and the group is what gets stopped: on a timeout, when
 * the run's signal aborts (lease lost, worker shutdown) and also after the command exits, every
 * process still in the group gets SIGTERM, then SIGKILL after a short grace (at once if the worker
 * exits before the grace ends). A run's processes do not outlive it, so a retry never races the
 * leftovers of the attempt before it. (A process that starts a session of its own with `setsid`
 * leaves the group and escapes this; so does everything if the worker is killed with SIGKILL.)
 * (`process-group.ts` does the stopping.)
 *
 * Exit codes: 0 succeeds; the `retry_exit_codes` (default 75, `EX_TEMPFAIL` in sysexits.h)
 * retry; the `permanent_exit_codes` dead-letter the run at once (`others`: every other non-zero
 * code). A code in neither list retries, as a thrown error does.
 *
 * Output: the command's stdout and stderr are two pipes, read separately and appended to one text
 * in the order their chunks reach the worker; the last 64 KiB is kept. Each stream keeps its own
 * order, but the two are not exactly in the order the command wrote them: writes to stdout and
 * stderr close together in time may appear swapped. (A command that needs one exact order can
 * write everything to one stream, e.g. `sh -c '… 2>&1'`.)
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { statSync } from 'node:fs';
import { PermanentError, ValidationError } from '../../core/index.js';
import type { Handler, RunContext } from '../worker.js';
import { executorError, failureMessage, OutputTail } from './output.js';
import { stopGroup, trackGroup } from './process-group.js';

/** Default time a command may run, ms. */
export const DEFAULT_EXEC_TIMEOUT_MS = 300_000;
/** `EX_TEMPFAIL` (sysexits.h): "try again later". The default retry exit code. */
export const EX_TEMPFAIL = 75;
/** Default wait between SIGTERM and SIGKILL for a process group, ms. */
export const DEFAULT_KILL_GRACE_MS = 2000;
const MAX_TIMEOUT_MS = 24 * 3600 * 1000;

export interface ExecExecutorConfig {
  /** The program and its arguments, passed as they are (no shell). */
  argv: string[];
  /** Working directory. Default: the worker's. It must exist when the configuration is loaded. */
  cwd?: string;
  /** Variables added to the worker's environment (the `TOCK_*` ones below always win). */
  env?: Record<string, string>;
  /** Most time the command may run before its process group is killed, ms. Default 300000 (5 min). */
  timeout?: number;
  /** Exit codes that mean "retry". Default `[75]` (`EX_TEMPFAIL`). */
  retry_exit_codes?: number[];
  /**
   * Exit codes that dead-letter the run at once; `'others'` makes every non-zero code outside
   * `retry_exit_codes` permanent. Default: none (an unlisted non-zero code retries).
   */
  permanent_exit_codes?: number[] | 'others';
}

export interface ExecExecutorOptions {
  /** Wait between SIGTERM and SIGKILL when stopping the command's process group, ms. Default 2000. */
  killGraceMs?: number;
}

function invalid(field: string, reason: string): ValidationError {
  return new ValidationError(`${field} ${reason}`, { field });
}

function exitCodes(value: unknown, field: string): number[] {
  if (!Array.isArray(value)) throw invalid(field, 'must be a list of exit codes');
  for (const [i, code] of value.entries()) {
    if (typeof code !== 'number' || !Number.isInteger(code) || code < 1 || code > 255)
      throw invalid(`${field}[${i}]`, 'must be an exit code from 1 to 255');
  }
  return value as number[];
}

function abortError(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new Error('aborted');
}

/** A configuration once validated: what every run of the handler uses. */
interface ExecPlan {
  program: string;
  argv: string[];
  cwd: string | undefined;
  env: Record<string, string>;
  timeoutMs: number;
  retryCodes: Set<number>;
  permanentCodes: Set<number> | 'others';
  graceMs: number;
}

function checkArgv(argv: unknown): asserts argv is string[] {
  if (!Array.isArray(argv) || argv.length === 0) throw invalid('argv', 'must be a non-empty list of strings');
  for (const [i, arg] of argv.entries()) {
    if (typeof arg !== 'string') throw invalid(`argv[${i}]`, 'must be a string');
    if (arg.includes('\0')) throw invalid(`argv[${i}]`, 'must not contain a NUL character');
  }
  if (argv[0] === '') throw invalid('argv[0]', 'must name a program');
}

function checkCwd(cwd: unknown): void {
  if (cwd === undefined) return;
  if (typeof cwd !== 'string' || cwd === '') throw invalid('cwd', 'must be a directory path');
  let isDir = false;
  try {
    isDir = statSync(cwd).isDirectory();
  } catch {}
  if (!isDir) throw invalid('cwd', `"${cwd}" is not a directory`);
}

function checkEnv(env: unknown): asserts env is Record<string, string> {
  if (typeof env !== 'object' || env === null || Array.isArray(env))
    throw invalid('env', 'must be a mapping of variable names to strings');
  for (const [name, value] of Object.entries(env)) {
    if (name === '' || name.includes('=') || name.includes('\0'))
      throw invalid(`env.${name}`, 'is not a valid variable name');
    if (typeof value !== 'string') throw invalid(`env.${name}`, 'must be a string');
    if (value.includes('\0')) throw invalid(`env.${name}`, 'must not contain a NUL character');
  }
}

/** Checks a configuration, field by field in this order, and returns what the runs use. */
function execPlan(config: ExecExecutorConfig, options: ExecExecutorOptions): ExecPlan {
  const { argv, cwd } = config;
  checkArgv(argv);
  checkCwd(cwd);
  const env = config.env ?? {};
  checkEnv(env);
  const timeoutMs = config.timeout ?? DEFAULT_EXEC_TIMEOUT_MS;
  if (!Number.isInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > MAX_TIMEOUT_MS)
    throw invalid('timeout', `must be a whole number of milliseconds from 1 to ${MAX_TIMEOUT_MS}`);
  const retryCodes = new Set(exitCodes(config.retry_exit_codes ?? [EX_TEMPFAIL], 'retry_exit_codes'));
  const permanent = config.permanent_exit_codes ?? [];
  const permanentCodes =
    permanent === 'others' ? 'others' : new Set(exitCodes(permanent, 'permanent_exit_codes'));
  if (permanentCodes !== 'others') {
    for (const code of permanentCodes)
      if (retryCodes.has(code))
        throw invalid('permanent_exit_codes', `lists ${code}, which retry_exit_codes also lists`);
  }
  const graceMs = options.killGraceMs ?? DEFAULT_KILL_GRACE_MS;
  return { program: argv[0]!, argv, cwd, env, timeoutMs, retryCodes, permanentCodes, graceMs };
}

/** Validates the configuration now and returns the handler. */
export function execExecutor(config: ExecExecutorConfig, options: ExecExecutorOptions = {}): Handler {
  const plan = execPlan(config, options);
  return (ctx: RunContext) => runCommand(plan, ctx);
}

/** Starts the command in a process group of its own, with the run's identity in its environment. */
function spawnCommand(plan: ExecPlan, ctx: RunContext): ChildProcess {
  return spawn(plan.program, plan.argv.slice(1), {
    detached: true,
    cwd: plan.cwd,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...process.env,
      ...plan.env,
      TOCK_RUN_ID: ctx.runId,
      TOCK_JOB_ID: ctx.jobId,
      TOCK_SCHEDULED_FOR: ctx.scheduledFor.toISOString(),
      TOCK_ATTEMPT: String(ctx.attempt),
      TOCK_PAYLOAD: JSON.stringify(ctx.payload ?? null),
    },
  });
}

/** Runs the command once: its output on success, else the error the worker records. */
function runCommand(plan: ExecPlan, ctx: RunContext): Promise<{ output: string }> {
  return new Promise<{ output: string }>((resolve, reject) => {
    if (ctx.signal.aborted) {
      reject(abortError(ctx.signal));
      return;
    }
    const output = new OutputTail();
    let child: ChildProcess;
    try {
      child = spawnCommand(plan, ctx);
    } catch (err) {
      reject(executorError(new Error(`cannot start ${plan.program}: ${(err as Error).message}`)));
      return;
    }
    if (child.pid !== undefined) trackGroup(child.pid);
    // Two pipes, one text: chunks in the order they arrive here (see the header on ordering).
    child.stdout!.on('data', (chunk: Buffer) => output.write(chunk));
    child.stderr!.on('data', (chunk: Buffer) => output.write(chunk));
    superviseCommand(plan, ctx, child, output, (result) =>
      result instanceof Error ? reject(result) : resolve(result),
    );
  });
}

/** Why the executor stopped the group, if it did; the first reason wins. */
type StopReason = 'timeout' | 'abort';
interface CommandExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/**
 * Watches a started command until its output is complete: stops its group on the timeout or when
 * the run's signal aborts, and after it exits (whatever it left running goes with it). Calls `done`
 * once, with the output or the error.
 */
function superviseCommand(
  plan: ExecPlan,
  ctx: RunContext,
  child: ChildProcess,
  output: OutputTail,
  done: (result: { output: string } | Error) => void,
): void {
  let stopping: StopReason | null = null;
  let exit: CommandExit | null = null;
  let settled = false;
  let drainTimer: NodeJS.Timeout | undefined;
  const stopFor = (reason: StopReason) => () => {
    stopping ??= reason;
    stopGroup(child.pid, plan.graceMs);
  };
  const onAbort = stopFor('abort');
  const timer = setTimeout(stopFor('timeout'), plan.timeoutMs);
  ctx.signal.addEventListener('abort', onAbort, { once: true });

  const settle = () => {
    // Before 'exit' there is nothing to report: a start failure is reported by 'error'.
    if (settled || exit === null) return;
    settled = true;
    clearTimeout(timer);
    clearTimeout(drainTimer);
    ctx.signal.removeEventListener('abort', onAbort);
    done(commandResult(plan, ctx, stopping, exit, output));
  };
  child.on('error', (err) => {
    // Not started (ENOENT, EACCES): no process, no group to stop.
    if (child.pid !== undefined || settled) return;
    settled = true;
    clearTimeout(timer);
    ctx.signal.removeEventListener('abort', onAbort);
    done(executorError(new Error(`cannot start ${plan.program}: ${err.message}`)));
  });
  child.on('exit', (code, signal) => {
    exit = { code, signal };
    clearTimeout(timer);
    // Whatever the command left running in its group goes with it.
    if (stopping === null) stopGroup(child.pid, plan.graceMs);
    // The output is complete once every holder of the pipes is gone ('close'). A process that
    // escaped the group could hold them open forever: stop reading after the kill grace.
    drainTimer = setTimeout(() => {
      child.stdout?.destroy();
      child.stderr?.destroy();
      settle();
    }, plan.graceMs + 1000);
  });
  child.on('close', settle);
}

/** How a finished command's run ends: its output, or the error for the way it stopped. */
function commandResult(
  plan: ExecPlan,
  ctx: RunContext,
  stopping: StopReason | null,
  exit: CommandExit,
  output: OutputTail,
): { output: string } | Error {
  const { program } = plan;
  if (stopping === 'abort') return abortError(ctx.signal);
  if (stopping === 'timeout') {
    const message = `${program} timed out after ${plan.timeoutMs} ms; its process group was killed`;
    return executorError(new Error(failureMessage(message, output)), output);
  }
  if (exit.code === 0) return { output: output.text() };
  if (exit.code === null)
    return executorError(
      new Error(failureMessage(`${program} was killed by ${exit.signal}`, output)),
      output,
    );
  return executorError(exitError(plan, exit.code, output), output);
}

/** The error for a non-zero exit code: a retry, a permanent failure, or (unlisted) a retry. */
function exitError(plan: ExecPlan, code: number, output: OutputTail): Error {
  const summary = `${plan.program} exited with code ${code}`;
  if (plan.retryCodes.has(code)) return new Error(failureMessage(`${summary} (retry)`, output));
  if (plan.permanentCodes === 'others' || plan.permanentCodes.has(code))
    return new PermanentError(failureMessage(`${summary} (permanent)`, output), { exit_code: code });
  return new Error(failureMessage(summary, output));
}
