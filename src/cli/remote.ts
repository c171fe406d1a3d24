/**
 * The operator commands that speak the HTTP API: `tock jobs …`, `tock runs …`, `tock dlq …` and
 * `tock keys …`. Each finds its server by `--url`/`TOCK_URL` and authenticates with
 * `--key`/`TOCK_KEY`; `--json` prints the API's answer as it is, as one JSON document, instead of
 * the aligned tables meant for people. Options are checked before any request is made, so a bad
 * flag never reaches the server. The one command that does not use the API is
 * `tock keys create --tenant`, which writes the first key of a tenant straight to the database.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { type Command, InvalidArgumentError, Option } from 'commander';
import type * as Api from '../client/index.js';
import { type TockClient as Client, TockApiError, TockClient } from '../client/index.js';
import {
  jobInputToApi,
  parseInstant,
  ROLES,
  type Role,
  RUN_STATES,
  SystemClock,
  TockError,
  validateId,
} from '../core/index.js';
import type { LogFormat } from '../runtime/logger.js';
import { databaseOptions, duration, durationOrZero, positiveInt } from './options.js';
import { counted, formatBlock, formatFields, formatTable, truncate } from './table.js';

const DEFAULT_URL = 'http://127.0.0.1:8080';
/** Most characters of an error message shown in a table; `tock runs show` prints it whole, with its stack. */
const ERROR_COLUMN = 60;
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,200}$/;
const MAX_PAGE = 500;

// -- option parsers (run before any request) --------------------------------------------------------

function nonNegativeInt(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(n)) throw new InvalidArgumentError('expected an integer');
  return n;
}

function decimal(value: string): number {
  if (!/^\d+(\.\d+)?$/.test(value)) throw new InvalidArgumentError('expected a number, e.g. 2 or 1.5');
  return Number(value);
}

function pageSize(value: string): number {
  const n = positiveInt(value);
  if (n > MAX_PAGE) throw new InvalidArgumentError(`expected 1 to ${MAX_PAGE}`);
  return n;
}

/** A duration in whole seconds (`90s`, `5m`); `0` only where zero means "none". */
function seconds(allowZero: boolean) {
  return (value: string): number => {
    const ms = allowZero ? durationOrZero(value) : duration(value);
    if (ms % 1000 !== 0) throw new InvalidArgumentError(`"${value}" is not a whole number of seconds`);
    return ms / 1000;
  };
}

function json(value: string): unknown {
  try {
    return JSON.parse(value);
  } catch (err) {
    throw new InvalidArgumentError(`not JSON: ${err instanceof Error ? err.message : String(err)}`);
  }
}

function instant(value: string): string {
  try {
    return new Date(parseInstant(value, 'the instant')).toISOString();
  } catch (err) {
    throw new InvalidArgumentError(err instanceof Error ? err.message : String(err));
  }
}

function idempotencyKey(value: string): string {
  if (!IDEMPOTENCY_KEY.test(value)) throw new InvalidArgumentError('expected 1-200 visible ASCII characters');
  return value;
}

function checkJobId(jobId: string): string {
  try {
    return validateId(jobId, 'job_id');
  } catch (err) {
    throw new InvalidArgumentError(err instanceof Error ? err.message : String(err));
  }
}

// -- shared plumbing --------------------------------------------------------------------------------

interface RemoteOptions {
  url: string;
  key?: string;
  json: boolean;
  timeout: number;
}

/** `--url`, `--key`, `--json` and `--timeout`, on every command that speaks the API. */
function remoteOptions(cmd: Command): Command {
  return cmd
    .addOption(new Option('--url <url>', 'base URL of the Tock server').env('TOCK_URL').default(DEFAULT_URL))
    .addOption(new Option('--key <key>', 'API key (sent as a bearer token)').env('TOCK_KEY'))
    .addOption(
      new Option('--json', "print the API's JSON answer as one document, not a table").default(false),
    )
    .addOption(
      new Option('--timeout <duration>', 'give up on a request after this long')
        .env('TOCK_TIMEOUT')
        .default(30_000, '30s')
        .argParser(duration),
    );
}

function clientOf(o: RemoteOptions): Client {
  return new TockClient({ url: o.url, key: o.key, timeoutMs: o.timeout });
}

function write(text: string): void {
  process.stdout.write(text);
}

function printJson(doc: unknown): void {
  write(`${JSON.stringify(doc, null, 2)}\n`);
}

/** `404 not_found: job "x" does not exist`, with a hint when a key is missing. */
function apiMessage(err: TockApiError, keyGiven: boolean): string {
  const hint = err.status === 401 && !keyGiven ? ' (no key given: pass --key or set TOCK_KEY)' : '';
  return `${err.status} ${err.code}: ${err.message}${hint}`;
}

/**
 * Wraps a command's action: API errors become one readable message (bin/tock.js prints it as
 * `tock: <message>` and exits 1).
 */
function remote<A extends unknown[]>(fn: (...args: A) => Promise<void>): (...args: A) => Promise<void> {
  return async (...args: A) => {
    try {
      await fn(...args);
    } catch (err) {
      if (err instanceof TockApiError) {
        const cmd = args[args.length - 1] as Command;
        throw new Error(apiMessage(err, Boolean(cmd.opts().key)));
      }
      throw err;
    }
  };
}

/** Fetches one page, or with `all` every page from `cursor` on, following `next_cursor`. */
async function pages<T>(
  all: boolean,
  cursor: string | undefined,
  fetchPage: (cursor: string | undefined) => Promise<{ items: T[]; next_cursor: string | null }>,
): Promise<{ items: T[]; next_cursor: string | null }> {
  const items: T[] = [];
  let next = cursor;
  for (;;) {
    const page = await fetchPage(next);
    items.push(...page.items);
    if (!all || page.next_cursor === null) return { items, next_cursor: page.next_cursor };
    next = page.next_cursor;
  }
}

function moreHint(command: string, nextCursor: string | null): void {
  if (nextCursor !== null) process.stderr.write(`more: ${command} --cursor ${nextCursor} (or --all)\n`);
}

const pageOptions = (cmd: Command, what: string) =>
  cmd
    .addOption(
      new Option('--limit <n>', `${what} per request, 1-${MAX_PAGE}`).default(50).argParser(pageSize),
    )
    .addOption(new Option('--cursor <cursor>', 'start at this next_cursor of an earlier page'))
    .addOption(new Option('--all', 'follow next_cursor to the last page').default(false));

// -- output for people ------------------------------------------------------------------------------

/** The answer's `state`; from a server that predates it, `enabled` and `next_run_at`. */
function jobState(j: Api.Job): string {
  if (j.state !== undefined) return j.state;
  if (!j.enabled) return 'paused';
  return j.next_run_at === null ? 'finished' : 'active';
}

/** `fire_once, once a slot is over 60s late (the scheduler's threshold)`: the policy and when it applies. */
function misfireText(j: Api.Job): string {
  const policy = j.misfire === 'catch_up' ? `catch_up (limit ${j.catch_up_limit})` : j.misfire;
  if (j.misfire_after_seconds === undefined) return policy;
  const whose = j.misfire_threshold_seconds === null ? " (the scheduler's threshold)" : '';
  return `${policy}, applies once a slot is over ${j.misfire_after_seconds}s late${whose}`;
}

function jobFields(j: Api.Job): string {
  return formatFields([
    ['job_id', j.job_id],
    ['state', jobState(j)],
    ['schedule', j.schedule],
    ['timezone', j.timezone],
    ['handler', j.handler],
    ['payload', j.payload],
    ['pool', j.pool],
    ['priority', j.priority],
    ['max_attempts', j.max_attempts],
    ['backoff', `base ${j.backoff_base_seconds}s, cap ${j.backoff_cap_seconds}s`],
    ['misfire', misfireText(j)],
    ['lease', j.lease_seconds === null ? 'server default' : `${j.lease_seconds}s`],
    ['timeout', j.timeout_seconds === null ? 'none' : `${j.timeout_seconds}s`],
    ['jitter', `${j.jitter_seconds}s`],
    ['next_run_at', j.next_run_at],
    ['version', j.version],
    ['created_at', j.created_at],
    ['updated_at', j.updated_at],
  ]);
}

function jobTable(jobs: readonly Api.Job[]): string {
  if (jobs.length === 0) return 'no jobs\n';
  return formatTable(
    ['JOB', 'SCHEDULE', 'TIMEZONE', 'HANDLER', 'POOL', 'PRIORITY', 'STATE', 'NEXT RUN'],
    jobs.map((j) => [
      j.job_id,
      j.schedule,
      j.timezone,
      j.handler,
      j.pool,
      j.priority,
      jobState(j),
      j.next_run_at,
    ]),
  );
}

const errorCell = (e: string | null) => (e === null ? null : truncate(e.replace(/\s+/g, ' '), ERROR_COLUMN));

function runTable(runs: readonly Api.Run[], empty: string): string {
  if (runs.length === 0) return `${empty}\n`;
  return formatTable(
    ['RUN', 'JOB', 'SCHEDULED FOR', 'STATE', 'ATTEMPT', 'FINISHED', 'LAST ERROR'],
    runs.map((r) => [
      r.run_id,
      r.job_id,
      r.scheduled_for,
      r.state,
      `${r.attempt}/${r.max_attempts}`,
      r.finished_at,
      errorCell(r.last_error),
    ]),
  );
}

function runFields(r: Api.Run): string {
  return formatFields([
    ['run_id', r.run_id],
    ['job_id', r.job_id],
    ['state', r.state],
    ['scheduled_for', r.scheduled_for],
    ['attempt', `${r.attempt} of ${r.max_attempts}`],
    ['handler', r.handler],
    ['payload', r.payload],
    ['pool', r.pool],
    ['priority', r.priority],
    ['available_at', r.available_at],
    ['lease_owner', r.lease_owner],
    ['lease_expires_at', r.lease_expires_at],
    ['created_at', r.created_at],
    ['claimed_at', r.claimed_at],
    ['started_at', r.started_at],
    ['finished_at', r.finished_at],
    ['last_error', errorCell(r.last_error)],
  ]);
}

function attemptTable(attempts: readonly Api.Attempt[]): string {
  if (attempts.length === 0) return 'no attempts yet\n';
  return formatTable(
    ['ATTEMPT', 'WORKER', 'STARTED', 'FINISHED', 'OUTCOME', 'ERROR'],
    attempts.map((a) => [a.attempt, a.worker_id, a.started_at, a.finished_at, a.outcome, errorCell(a.error)]),
  );
}

/**
 * What the attempts table cannot hold, attempt by attempt: the error's message whole (when it
 * spans lines or was cut in the table), its stack and the handler's output, each on lines of its
 * own. Attempts with none of them are left out.
 */
function attemptDetails(attempts: readonly Api.Attempt[]): string {
  const parts: string[] = [];
  for (const a of attempts) {
    const error = a.error ?? '';
    const body =
      (errorCell(error) === error ? '' : formatBlock('ERROR', error)) +
      formatBlock('STACK', a.error_stack) +
      formatBlock('OUTPUT', a.output);
    if (body !== '') parts.push(`\nattempt ${a.attempt} (${a.outcome ?? 'running'}):\n${body}`);
  }
  return parts.join('');
}

function keyTable(keys: readonly Api.ApiKey[]): string {
  if (keys.length === 0) return 'no keys\n';
  return formatTable(
    ['KEY', 'ROLE', 'NAME', 'CREATED', 'REVOKED'],
    keys.map((k) => [k.key_id, k.role, k.name === '' ? null : k.name, k.created_at, k.revoked_at]),
  );
}

function changeSummary(answers: readonly Api.UpsertedJob[]): string {
  const count = (c: Api.UpsertChange) => answers.filter((a) => a.change === c).length;
  const n = answers.length;
  return `${counted(n, 'job')}: ${count('created')} created, ${count('updated')} updated, ${count('unchanged')} unchanged\n`;
}

function changeTable(answers: readonly Api.UpsertedJob[]): string {
  return formatTable(
    ['JOB', 'CHANGE', 'NEXT RUN'],
    answers.map((a) => [a.job_id, a.change, a.next_run_at]),
  );
}

/** A new key's details, then the secret alone on the last line. */
function printCreatedKey(k: Api.CreatedKey, asJson: boolean): void {
  if (asJson) {
    printJson(k);
    return;
  }
  process.stderr.write('the key is shown once: store it now\n');
  write(
    formatFields([
      ['key_id', k.key_id],
      ['tenant_id', k.tenant_id],
      ['role', k.role],
      ['name', k.name === '' ? null : k.name],
      ['created_at', k.created_at],
    ]),
  );
  write(`${k.key}\n`);
}

// -- commands ---------------------------------------------------------------------------------------

/** The job-definition flags of `tock jobs put`, and the body field each one sets. */
const DEFINITION_FLAGS = {
  schedule: 'schedule',
  handler: 'handler',
  timezone: 'timezone',
  payload: 'payload',
  priority: 'priority',
  maxAttempts: 'max_attempts',
  misfire: 'misfire',
  catchUpLimit: 'catch_up_limit',
  pool: 'pool',
  lease: 'lease_seconds',
  jitter: 'jitter_seconds',
  runTimeout: 'timeout_seconds',
  misfireThreshold: 'misfire_threshold_seconds',
  backoffBase: 'backoff_base_seconds',
  backoffCap: 'backoff_cap_seconds',
} as const;

function registerJobs(program: Command): void {
  const jobs = program
    .command('jobs')
    .description('define, inspect, pause and trigger jobs (over the HTTP API)');

  remoteOptions(
    jobs
      .command('put')
      .description(
        'create or replace a job from flags (unset fields take their defaults), or apply every job of a YAML/JSON file; prints whether each was created, updated or unchanged',
      )
      .argument('[job_id]', 'the job to create or replace (not with --file)')
      .addOption(
        new Option(
          '-f, --file <file>',
          'YAML or JSON file of jobs ({jobs: [...]}, snake_case); every entry is validated before any is applied',
        ),
      )
      .addOption(
        new Option(
          '--schedule <expr>',
          'cron (5 or 6 fields), a macro, "@every <duration>" or "@at <instant>"',
        ),
      )
      .addOption(new Option('--handler <name>', 'handler a worker runs'))
      .addOption(
        new Option('--timezone <zone>', 'IANA timezone the cron expression is read in (default UTC)'),
      )
      .addOption(new Option('--payload <json>', 'JSON given to the handler (default {})').argParser(json))
      .addOption(new Option('--priority <n>', '0-100, higher first (default 0)').argParser(nonNegativeInt))
      .addOption(
        new Option(
          '--max-attempts <n>',
          'attempts before a run is dead-lettered, 1-100 (default 3)',
        ).argParser(positiveInt),
      )
      .addOption(
        new Option(
          '--misfire <policy>',
          'what to do with slots missed while down (default fire_once)',
        ).choices(['skip', 'fire_once', 'catch_up']),
      )
      .addOption(
        new Option(
          '--catch-up-limit <n>',
          'most missed slots catch_up backfills, 1-1000 (default 10)',
        ).argParser(positiveInt),
      )
      .addOption(new Option('--pool <name>', 'worker pool that runs it (default "default")'))
      .addOption(
        new Option(
          '--lease <duration>',
          "lease of this job's runs, whole seconds (default: the server's)",
        ).argParser(seconds(false)),
      )
      .addOption(
        new Option(
          '--run-timeout <duration>',
          'abort a run that takes longer than this and retry it, whole seconds, 1s-24h (default: no limit)',
        ).argParser(seconds(false)),
      )
      .addOption(
        new Option(
          '--misfire-threshold <duration>',
          "the misfire policy applies once a slot is more than this late, whole seconds, 0-24h (default: the scheduler's, 60s)",
        ).argParser(seconds(true)),
      )
      .addOption(
        new Option(
          '--jitter <duration>',
          'spread runs up to this long after their slot, whole seconds (default 0)',
        ).argParser(seconds(true)),
      )
      .addOption(
        new Option('--backoff-base <n>', 'retry n waits base^n seconds, 1.1-60 (default 2)').argParser(
          decimal,
        ),
      )
      .addOption(
        new Option('--backoff-cap <duration>', 'longest retry wait, whole seconds (default 1h)').argParser(
          seconds(false),
        ),
      ),
  ).action(
    remote(async (jobId: string | undefined, o: RemoteOptions & Record<string, unknown>) => {
      const given = Object.keys(DEFINITION_FLAGS).filter((flag) => o[flag] !== undefined);
      const client = clientOf(o);
      if (o.file !== undefined) {
        if (jobId !== undefined || given.length > 0) {
          throw new Error('give either --file or a job_id with flags, not both');
        }
        await applyFile(client, String(o.file), o);
        return;
      }
      if (jobId === undefined) throw new Error('give a job_id (with --schedule and --handler) or --file');
      checkJobId(jobId);
      if (o.schedule === undefined) throw new Error('--schedule is required');
      if (o.handler === undefined) throw new Error('--handler is required');
      const body: Record<string, unknown> = {};
      for (const [flag, field] of Object.entries(DEFINITION_FLAGS)) {
        if (o[flag] !== undefined) body[field] = o[flag];
      }
      const answer = await client.putJob(jobId, body as unknown as Api.JobBody);
      if (o.json) return printJson(answer);
      write(changeTable([answer]) + changeSummary([answer]));
    }),
  );

  remoteOptions(
    jobs
      .command('get')
      .description('show one job')
      .argument('<job_id>', 'the job')
      .action(
        remote(async (jobId: string, o: RemoteOptions) => {
          const job = await clientOf(o).getJob(checkJobId(jobId));
          if (o.json) return printJson(job);
          write(jobFields(job));
        }),
      ),
  );

  remoteOptions(pageOptions(jobs.command('list').description('list the jobs, by job id'), 'jobs')).action(
    remote(async (o: RemoteOptions & { limit: number; cursor?: string; all: boolean }) => {
      const client = clientOf(o);
      const page = await pages(o.all, o.cursor, async (cursor) => {
        const p = await client.listJobs({ limit: o.limit, cursor });
        return { items: p.jobs, next_cursor: p.next_cursor };
      });
      if (o.json) return printJson({ jobs: page.items, next_cursor: page.next_cursor });
      write(jobTable(page.items));
      moreHint('tock jobs list', page.next_cursor);
    }),
  );

  for (const [name, description, done] of [
    ['pause', 'stop materialising new runs of a job (runs already materialised still run)', 'paused'],
    ['resume', 'schedule a paused job again, from its next slot after now', 'resumed'],
  ] as const) {
    remoteOptions(
      jobs
        .command(name)
        .description(description)
        .argument('<job_id>', 'the job')
        .action(
          remote(async (jobId: string, o: RemoteOptions) => {
            const client = clientOf(o);
            const id = checkJobId(jobId);
            const job = name === 'pause' ? await client.pauseJob(id) : await client.resumeJob(id);
            if (o.json) return printJson(job);
            // A paused job keeps its next_run_at, but nothing is materialised until it resumes.
            write(
              name === 'pause'
                ? `${done} job ${job.job_id}\n`
                : `${done} job ${job.job_id}; next run ${job.next_run_at ?? 'none'}\n`,
            );
          }),
        ),
    );
  }

  remoteOptions(
    jobs
      .command('delete')
      .description('delete a job; its pending runs are cancelled and its history is kept')
      .argument('<job_id>', 'the job')
      .action(
        remote(async (jobId: string, o: RemoteOptions) => {
          await clientOf(o).deleteJob(checkJobId(jobId));
          // The API answers 204 without a body; --json still prints one document.
          if (o.json) return printJson({ job_id: jobId, deleted: true });
          write(`deleted job ${jobId}\n`);
        }),
      ),
  );

  remoteOptions(
    jobs
      .command('trigger')
      .description(
        'create a run of a job now (or for --at); a slot that already has a run is a 409 naming it',
      )
      .argument('<job_id>', 'the job')
      .addOption(
        new Option('--at <instant>', 'the slot, an ISO-8601 instant with offset (default: now)').argParser(
          instant,
        ),
      )
      .addOption(
        new Option(
          '--idempotency-key <key>',
          'repeating the trigger with the same key returns the same run instead of a new one or an error',
        ).argParser(idempotencyKey),
      ),
  ).action(
    remote(async (jobId: string, o: RemoteOptions & { at?: string; idempotencyKey?: string }) => {
      const run = await clientOf(o).triggerRun(checkJobId(jobId), {
        scheduledFor: o.at,
        idempotencyKey: o.idempotencyKey,
      });
      if (o.json) return printJson(run);
      write(
        formatFields([
          ['run_id', run.run_id],
          ['job_id', run.job_id],
          ['state', run.state],
          ['scheduled_for', run.scheduled_for],
          ['available_at', run.available_at],
        ]),
      );
    }),
  );
}

async function applyFile(client: Client, file: string, o: RemoteOptions): Promise<void> {
  // The whole file is validated first: a bad entry applies nothing.
  const { readJobsFile } = await import('../runtime/jobs-file.js');
  const inputs = await readJobsFile(file);
  const answers: Api.UpsertedJob[] = [];
  for (const [i, input] of inputs.entries()) {
    try {
      answers.push(
        await client.putJob(input.jobId, jobInputToApi(input, { withId: false }) as unknown as Api.JobBody),
      );
    } catch (err) {
      if (!o.json && answers.length > 0) write(changeTable(answers));
      const reason = err instanceof TockApiError ? apiMessage(err, Boolean(o.key)) : String(err);
      throw new Error(
        `job "${input.jobId}" (entry ${i + 1} of ${inputs.length}): ${reason}; ${answers.length} applied before it`,
      );
    }
  }
  if (o.json) return printJson({ jobs: answers });
  write((answers.length > 0 ? changeTable(answers) : '') + changeSummary(answers));
}

function registerRuns(program: Command): void {
  const runs = program.command('runs').description('inspect runs and their attempts (over the HTTP API)');

  remoteOptions(
    pageOptions(
      runs
        .command('list')
        .description('list runs, newest slot first')
        .addOption(new Option('--job <job_id>', 'only this job'))
        .addOption(new Option('--state <state>', 'only runs in this state').choices(RUN_STATES)),
      'runs',
    ),
  ).action(
    remote(
      async (
        o: RemoteOptions & {
          job?: string;
          state?: Api.RunState;
          limit: number;
          cursor?: string;
          all: boolean;
        },
      ) => {
        const client = clientOf(o);
        if (o.job !== undefined) checkJobId(o.job);
        const page = await pages(o.all, o.cursor, async (cursor) => {
          const p = await client.listRuns({ jobId: o.job, state: o.state, limit: o.limit, cursor });
          return { items: p.runs, next_cursor: p.next_cursor };
        });
        if (o.json) return printJson({ runs: page.items, next_cursor: page.next_cursor });
        write(runTable(page.items, 'no runs'));
        moreHint('tock runs list', page.next_cursor);
      },
    ),
  );

  remoteOptions(
    runs
      .command('show')
      .description("show a run and its attempts, with their errors' stacks and the handlers' output")
      .argument('<run_id>', 'the run'),
  ).action(
    remote(async (runId: string, o: RemoteOptions) => {
      const run = await clientOf(o).getRun(runId);
      if (o.json) return printJson(run);
      write(`${runFields(run)}\nattempts:\n${attemptTable(run.attempts)}${attemptDetails(run.attempts)}`);
    }),
  );
}

function registerDlq(program: Command): void {
  const dlq = program
    .command('dlq')
    .description('the dead-letter list: runs that spent their attempts or failed permanently');

  remoteOptions(
    pageOptions(
      dlq
        .command('list')
        .description('list dead runs, newest slot first')
        .addOption(new Option('--job <job_id>', 'only this job')),
      'runs',
    ),
  ).action(
    remote(async (o: RemoteOptions & { job?: string; limit: number; cursor?: string; all: boolean }) => {
      const client = clientOf(o);
      if (o.job !== undefined) checkJobId(o.job);
      const page = await pages(o.all, o.cursor, async (cursor) => {
        const p = await client.listRuns({ state: 'dead', jobId: o.job, limit: o.limit, cursor });
        return { items: p.runs, next_cursor: p.next_cursor };
      });
      if (o.json) return printJson({ runs: page.items, next_cursor: page.next_cursor });
      write(runTable(page.items, 'no dead runs'));
      moreHint('tock dlq list', page.next_cursor);
    }),
  );

  remoteOptions(
    dlq
      .command('replay')
      .description(
        'requeue a dead run (a fresh set of attempts, numbered on from its last); a run in any other state is a 409',
      )
      .argument('<run_id>', 'the dead run'),
  ).action(
    remote(async (runId: string, o: RemoteOptions) => {
      const run = await clientOf(o).replayRun(runId);
      if (o.json) return printJson(run);
      write(
        `replayed run ${run.run_id} of job ${run.job_id}: ${run.state}, claimable from ${run.available_at}\n`,
      );
    }),
  );
}

function registerKeys(program: Command): void {
  const keys = program.command('keys').description("manage the API keys of the caller's tenant");

  const create = databaseOptions(
    remoteOptions(
      keys
        .command('create')
        .description(
          'create an API key and print it once, alone on the last line. With --tenant it writes to the database directly (DATABASE_URL, or the existing embedded one under --data-dir), says which, and makes the first key of a tenant; without, it asks the server with an admin --key',
        )
        .addOption(
          new Option(
            '--role <role>',
            'what the key may do: admin, operator, worker or reader in its tenant; cluster-admin (an admin that also sees the whole cluster: every node, shards, backlog, /metrics) only with --tenant',
          )
            .choices(ROLES)
            .makeOptionMandatory(),
        )
        .addOption(new Option('--name <name>', 'a label shown in key listings'))
        .addOption(
          new Option(
            '--tenant <tenant>',
            'create the key in this tenant, directly in the database (the --database-url/--data-dir/--schema options apply; --url and --key are not used)',
          ),
        ),
    ),
  );
  create.action(
    remote(
      async (
        o: RemoteOptions & {
          role: Role;
          name?: string;
          tenant?: string;
          databaseUrl?: string;
          dataDir: string;
          schema?: string;
          logFormat: LogFormat;
          logLevel: string;
        },
      ) => {
        if (o.tenant === undefined) {
          const key = await clientOf(o).createKey({ role: o.role, name: o.name });
          return printCreatedKey(key, o.json);
        }
        const tenant = o.tenant;
        // A key written to a database no server uses is a key that answers 401: never make one up.
        const dataDir = path.resolve(o.dataDir);
        if (!o.databaseUrl && !existsSync(path.join(dataDir, 'pg', 'PG_VERSION')))
          throw new Error(
            `no database to write the key to: ${dataDir} holds no embedded database. Set DATABASE_URL (--database-url) to your server's database, or --data-dir (TOCK_DATA_DIR) to the data directory of your tock dev or tock server`,
          );
        const [{ createLogger }, { openDatabase }, { PostgresStore }] = await Promise.all([
          import('../runtime/logger.js'),
          import('../runtime/database.js'),
          import('../store/index.js'),
        ]);
        // Logs go to stderr, so stdout is the key's details and the key; quiet unless asked.
        const level = create.getOptionValueSource('logLevel') === 'default' ? 'warn' : o.logLevel;
        const logger = createLogger(o.logFormat, level, { stderr: true });
        const db = await openDatabase({
          databaseUrl: o.databaseUrl,
          dataDir: o.dataDir,
          schema: o.schema,
          logger,
          poolSize: 2,
        });
        try {
          const store = new PostgresStore(db.pool);
          const { key, secret } = await store
            .createApiKey({ tenantId: tenant, role: o.role, name: o.name, now: new SystemClock().nowMs() })
            .catch((err: unknown) => {
              throw err instanceof TockError ? new Error(err.message) : err;
            });
          const created: Api.CreatedKey = {
            key_id: key.keyId,
            tenant_id: key.tenantId,
            role: key.role,
            name: key.name,
            created_at: key.createdAt.toISOString(),
            revoked_at: key.revokedAt === null ? null : key.revokedAt.toISOString(),
            key: secret,
          };
          // Say which database holds the key: a key in a database no server reads answers 401.
          if (o.json) printJson({ ...created, database: db.where });
          else {
            process.stderr.write(`key created in ${db.where}\n`);
            printCreatedKey(created, false);
          }
        } finally {
          await db.close();
        }
      },
    ),
  );

  remoteOptions(keys.command('list').description("list the tenant's keys (never their secrets)")).action(
    remote(async (o: RemoteOptions) => {
      const list = await clientOf(o).listKeys();
      if (o.json) return printJson(list);
      write(keyTable(list.keys));
    }),
  );

  remoteOptions(
    keys
      .command('revoke')
      .description('revoke a key: requests made with it are refused from now on')
      .argument('<key_id>', 'the key, e.g. key_1a2b3c4d5e6f (not the secret)'),
  ).action(
    remote(async (keyId: string, o: RemoteOptions) => {
      const key = await clientOf(o).revokeKey(keyId);
      if (o.json) return printJson(key);
      write(`revoked key ${key.key_id} (${key.role}${key.name ? `, ${key.name}` : ''})\n`);
    }),
  );
}

/** Adds `jobs`, `runs`, `dlq` and `keys` to the program. */
/** `1.2s ago`, `350ms ago`. */
function ago(ms: number): string {
  if (ms < 1000) return `${Math.max(0, Math.round(ms))}ms ago`;
  if (ms < 120_000) return `${(ms / 1000).toFixed(1)}s ago`;
  return `${Math.round(ms / 60_000)}m ago`;
}

/** `a, b, c` — at most STATUS_LIST_ITEMS names, then how many more. */
function list(values: readonly unknown[]): string {
  const shown = values.slice(0, STATUS_LIST_ITEMS).map(String).join(',');
  return values.length > STATUS_LIST_ITEMS ? `${shown},… (${values.length})` : shown;
}

/** Most handler or tenant names a worker's line of `tock status` shows (`--json` has them all). */
const STATUS_LIST_ITEMS = 5;

/** Nodes per request of `tock status` (the API's largest page). */
const STATUS_PAGE = 500;

/** The status answer as an operator reads it: a summary, then one line per node. */
export function formatStatus(s: Api.StatusAnswer): string {
  const t = Date.parse(s.server_time);
  const offset = (n: Api.StatusNode) =>
    n.clock_offset_ms === null
      ? '-'
      : `${n.clock_offset_ms >= 0 ? '+' : ''}${n.clock_offset_ms.toFixed(1)}ms ±${(n.clock_uncertainty_ms ?? 0).toFixed(1)}ms`;
  const detail = (n: Api.StatusNode) => {
    const i = n.info;
    if (n.role === 'scheduler') return `backlog ${i.backlog ?? '-'}${i.url ? `, api ${i.url}` : ''}`;
    if (n.role === 'worker') {
      const handlers = Array.isArray(i.handlers) ? list(i.handlers) : 'any';
      const tenants = Array.isArray(i.tenants) ? `, tenants ${list(i.tenants)}` : '';
      return `pool ${i.pool ?? '-'}, ${i.in_flight ?? '-'}/${i.concurrency ?? '-'} running, handlers ${handlers}${tenants}`;
    }
    return '';
  };
  const rows = s.nodes.map((n) => [
    n.node_id,
    n.role,
    n.live ? 'yes' : 'NO',
    ago(t - Date.parse(n.last_seen_at)),
    offset(n),
    n.role === 'scheduler' ? n.shards : '',
    detail(n),
  ]);
  const summary =
    s.shards && s.backlog
      ? [
          `shards   ${s.shards.count}: ${s.shards.owned} under a live lease, ${s.shards.unowned} not${s.shards.unowned > 0 ? ' (nobody ticks those now)' : ''}`,
          `backlog  ${counted(s.backlog.due_jobs, 'job')} due and not materialised, ${counted(s.backlog.ready_runs, 'run')} waiting for a worker`,
        ]
      : ["scope    this tenant's remote workers (a cluster-admin key shows the cluster)"];
  const unserved: string[] = [];
  if (s.unserved && s.unserved.runs > 0) {
    const u = s.unserved;
    unserved.push(
      '',
      `unserved ${counted(u.runs, 'run')} wait${u.runs === 1 ? 's' : ''} for a handler no live worker serves (start a worker with that pool and handler${s.scope === 'cluster' ? ', for that tenant' : ''}):`,
      formatTable(
        ['TENANT', 'POOL', 'HANDLER', 'RUNS', 'WAITING'],
        u.items.map((g) => [
          g.tenant_id,
          g.pool,
          g.handler,
          g.runs,
          ago(t - Date.parse(g.since)).replace(/ ago$/, ''),
        ]),
      ).trimEnd(),
    );
    const more = u.groups - u.items.length;
    if (more > 0) unserved.push(`… and ${counted(more, 'more group')} of runs`);
  }
  const lines = [
    ...summary,
    ...unserved,
    '',
    s.nodes.length === 0
      ? 'no nodes have registered'
      : formatTable(['NODE', 'ROLE', 'LIVE', 'LAST SEEN', 'CLOCK OFFSET', 'SHARDS', 'DETAIL'], rows),
  ];
  return `${lines.join('\n').trimEnd()}\n`;
}

function registerStatus(program: Command): void {
  remoteOptions(
    program
      .command('status')
      .description(
        "the cluster (with a cluster-admin key): scheduler and worker nodes with their last heartbeat and clock offset, shard ownership, and the backlog; with another operator or admin key, the tenant's remote workers",
      ),
  ).action(
    remote(async (o: RemoteOptions) => {
      // Every page of nodes, in one answer: a tenant has at most 1000 remote workers.
      const client = clientOf(o);
      const status = await client.status({ limit: STATUS_PAGE });
      let next = status.next_cursor;
      while (next !== null) {
        const page = await client.status({ limit: STATUS_PAGE, cursor: next });
        status.nodes.push(...page.nodes);
        next = page.next_cursor;
      }
      status.next_cursor = null;
      if (o.json) return printJson(status);
      write(formatStatus(status));
    }),
  );
}

export function registerRemoteCommands(program: Command): void {
  registerStatus(program);
  registerJobs(program);
  registerRuns(program);
  registerDlq(program);
  registerKeys(program);
}
