/**
 * Every request and answer body of the HTTP API as a TypeBox schema: one definition per shape,
 * used by Fastify to validate requests, to serialise answers, for the handlers' TypeScript types,
 * and for the OpenAPI document. Bodies are strict: unknown fields and wrong types are refused,
 * nothing is coerced.
 */
import { type Static, Type } from 'typebox';
import {
  API_KEY_FIELDS,
  ATTEMPT_FIELDS,
  ID_PATTERN,
  JOB_FIELDS,
  LEASED_RUN_FIELDS,
  MAX_HTTP_CLAIM_RUNS,
  RUN_FIELDS,
} from '../core/index.js';
import { type AnswerProperties, answerProperties, bodyProperties } from './field-schemas.js';
import { MAX_LONG_POLL_MS } from './limits.js';
import { ResultOutcome, resultList } from './result-schemas.js';

/** Most (pool, priority) pairs `GET /v1/status` lists in its backlog, the deepest first. */
export const MAX_READY_QUEUES = 100;

export const Id = (description: string) => Type.String({ pattern: ID_PATTERN, maxLength: 200, description });
export const Instant = (description: string) => Type.String({ format: 'date-time', description });
const Nullable = <T extends Parameters<typeof Type.Union>[0][number]>(t: T) => Type.Union([t, Type.Null()]);
const Json = Type.Unknown({ description: 'any JSON value' });

export const ErrorBody = Type.Object(
  {
    error: Type.Object({
      code: Type.String({ description: 'stable machine-readable code, e.g. validation_error' }),
      message: Type.String(),
      run_id: Type.Optional(
        Type.String({ description: 'for a slot conflict: the run the slot already has' }),
      ),
    }),
  },
  {},
);

/** `PUT /v1/jobs/{job_id}`: a job definition (the id is in the path), from `JOB_FIELDS`. */
export const JobBody = Type.Object(bodyProperties(JOB_FIELDS, ['jobId']), { additionalProperties: false });
export type JobBody = Static<typeof JobBody>;

/** The definition as an answer shows it, with `misfire_after_seconds` beside the job's own threshold. */
function jobDefinitionAnswer() {
  const entries = Object.entries(answerProperties(JOB_FIELDS));
  const at = entries.findIndex(([name]) => name === 'misfire_threshold_seconds') + 1;
  const misfireAfter = Type.Integer({
    description: 'the misfire policy applies once the next slot is more than this many seconds late',
  });
  return Object.fromEntries([
    ...entries.slice(0, at),
    ['misfire_after_seconds', misfireAfter],
    ...entries.slice(at),
  ]) as AnswerProperties<typeof JOB_FIELDS> & { misfire_after_seconds: typeof misfireAfter };
}

export const Job = Type.Object(
  {
    ...jobDefinitionAnswer(),
    enabled: Type.Boolean(),
    state: Type.Union([Type.Literal('active'), Type.Literal('paused'), Type.Literal('finished')], {
      description:
        'active: slots to come; paused: no slot until resumed (resuming starts from the next slot after then); finished: no slot left (a one-shot that fired, or a schedule that can no longer be evaluated)',
    }),
    next_run_at: Nullable(
      Instant('next slot not yet materialised; null while paused and once no slot is left (finished)'),
    ),
    version: Type.Integer(),
    created_at: Instant('created'),
    updated_at: Instant('last changed'),
  },
  {},
);

export const UpsertedJob = Type.Object({
  ...Job.properties,
  change: Type.Union([Type.Literal('created'), Type.Literal('updated'), Type.Literal('unchanged')]),
});

/** `PUT /v1/jobs`: many jobs at once, each a job body with its `job_id`. */
export const BulkJobsBody = Type.Object(
  {
    jobs: Type.Array(Type.Object(bodyProperties(JOB_FIELDS), { additionalProperties: false }), {
      minItems: 1,
      maxItems: 1000,
    }),
  },
  { additionalProperties: false },
);

export const BulkJobsAnswer = Type.Object({
  jobs: Type.Array(
    Type.Object({
      job_id: Type.String(),
      change: Type.Union([Type.Literal('created'), Type.Literal('updated'), Type.Literal('unchanged')]),
    }),
  ),
  created: Type.Integer(),
  updated: Type.Integer(),
  unchanged: Type.Integer(),
});

export const JobList = Type.Object({ jobs: Type.Array(Job), next_cursor: Nullable(Type.String()) }, {});

export const Attempt = Type.Object(answerProperties(ATTEMPT_FIELDS));

export const Run = Type.Object(answerProperties(RUN_FIELDS), {});

export const RunWithAttempts = Type.Object({
  ...Run.properties,
  waiting_for: Nullable(
    Type.String({
      description:
        "what holds a pending run that is due: a limit without tokens or slots, its job's overlap or max_concurrency, no live worker for its handler; null otherwise",
    }),
  ),
  progress: Nullable(
    Type.Number({
      description: "the latest attempt's progress (ctx.progress); its log lines are on the attempt",
    }),
  ),
  progress_message: Nullable(Type.String({ description: "that progress report's message" })),
  attempts: Type.Array(Attempt),
});

/** A run in a list: in a list of pending runs (`state=pending`), also what holds it. */
export const ListedRun = Type.Object({
  ...Run.properties,
  waiting_for: Type.Optional(
    Nullable(
      Type.String({
        description:
          'only in a list of state=pending: what holds the run, as on GET /v1/runs/{run_id} (computed for the whole page at once); null: nothing, or not due yet',
      }),
    ),
  ),
});

export const RunList = Type.Object({ runs: Type.Array(ListedRun), next_cursor: Nullable(Type.String()) }, {});

/** The heartbeat bodies, with what handlers reported (`RunHeartbeatBody`, `WorkerHeartbeatBody`). */
export * from './heartbeat-schemas.js';
/** The bodies that report results under leases, one run's or a batch's, and their answers. */
export * from './result-schemas.js';
/** The bodies that create runs on demand (`TriggerBody`, `BackfillBody`) and a backfill's answer. */
export * from './trigger-schemas.js';

export const LeaseRequest = Type.Object(
  {
    worker_id: Id('unique per worker process'),
    pool: Type.Optional(Id('default "default"')),
    handlers: Type.Optional(
      Type.Array(Id('handler name'), { minItems: 1, maxItems: 100, uniqueItems: true }),
    ),
    max: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_HTTP_CLAIM_RUNS, description: 'default 1' })),
    wait_ms: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: MAX_LONG_POLL_MS,
        description: 'long-poll up to this long; default 0',
      }),
    ),
    ahead_ms: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: 10000,
        description:
          'also claim runs that become claimable within this many ms (start each at its available_at); default 0',
      }),
    ),
    claim_id: Type.Optional(
      Type.String({
        pattern: '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$',
        description:
          'a uuid the worker makes per claim and sends again when it retries that claim (to any server): while that claim is live, the answer is its runs and leases again, and nothing more is claimed; default none',
      }),
    ),
    results: Type.Optional(
      resultList(
        'results of earlier runs (1 to 500), written before the claim as POST /v1/runs/complete writes them, their outcomes in the answer; a claim with results does not long-poll',
      ),
    ),
  },
  { additionalProperties: false },
);

export const LeasedRun = Type.Object(answerProperties(LEASED_RUN_FIELDS));

/** The server's clock when it answered: a worker converts lease expiries to its own clock with it. */
const ServerTime = Instant("the server's clock when it answered");

export const LeaseAnswer = Type.Object({
  runs: Type.Array(LeasedRun),
  results: Type.Optional(
    Type.Array(ResultOutcome, { description: "the request's results' outcomes, in order" }),
  ),
  server_time: ServerTime,
});

export const ReleaseBody = Type.Object(
  {
    lease_token: Type.String({ minLength: 1, maxLength: 100 }),
    reason: Type.Optional(Type.String({ maxLength: 1000, description: 'default "worker shutdown"' })),
    started_at: Type.Optional(
      Instant(
        "when the run's handler started, if it did (server clock; kept within the later of the claim and available_at, and now)",
      ),
    ),
  },
  { additionalProperties: false },
);

export const HeartbeatAnswer = Type.Object({
  lease_expires_at: Instant('the renewed expiry'),
  server_time: ServerTime,
});

export const WorkerHeartbeatAnswer = Type.Object({
  renewed: Type.Array(Type.Object({ run_id: Type.String(), lease_expires_at: Instant('renewed expiry') })),
  lost: Type.Array(Type.String()),
  server_time: ServerTime,
});

/** `PUT /v1/workers/{worker_id}`: a remote worker reports itself (every few seconds) for `tock status`. */
export const WorkerPresenceBody = Type.Object(
  {
    pool: Type.Optional(Id('the pool it claims from; default "default"')),
    handlers: Type.Optional(
      Type.Array(Id('handler name'), {
        minItems: 1,
        maxItems: 100,
        uniqueItems: true,
        description: 'the handlers it runs (1 to 100); unset: any handler of its pool',
      }),
    ),
    concurrency: Type.Optional(
      Type.Integer({ minimum: 1, maximum: 1000, description: 'runs it executes at once' }),
    ),
    in_flight: Type.Optional(
      Type.Integer({ minimum: 0, maximum: 100000, description: 'runs it holds now (running or held)' }),
    ),
    clock_offset_ms: Type.Optional(
      Type.Number({
        minimum: -1e9,
        maximum: 1e9,
        description: "the server's clock minus the worker's, as the worker measured it from server_time",
      }),
    ),
    clock_uncertainty_ms: Type.Optional(Type.Number({ minimum: 0, maximum: 1e9 })),
  },
  { additionalProperties: false },
);

export const WorkerPresenceAnswer = Type.Object({ server_time: ServerTime });

/** An answer without a body (204). */
export const NoContent = Type.Null({ description: 'No Content' });

export const ListQuery = Type.Object(
  {
    limit: Type.Optional(Type.String({ pattern: '^[0-9]{1,3}$', description: '1-500, default 50' })),
    cursor: Type.Optional(Type.String({ maxLength: 500 })),
  },
  { additionalProperties: false },
);

/** `GET /v1/jobs`: a page, and what the jobs must match (every filter given must hold). */
export const JobListQuery = Type.Object(
  {
    ...ListQuery.properties,
    q: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 200,
        description:
          'only jobs whose id starts with this text, matched literally (no wildcards: `%`, `_` and `\\` are themselves); a prefix, so an index serves it on any number of jobs',
      }),
    ),
    state: Type.Optional(
      Type.Union([Type.Literal('active'), Type.Literal('paused'), Type.Literal('finished')], {
        description: 'only jobs in this state',
      }),
    ),
    pool: Type.Optional(Id('only jobs of this pool')),
    handler: Type.Optional(Id('only jobs of this handler')),
  },
  { additionalProperties: false },
);

export const RunListQuery = Type.Object(
  {
    limit: Type.Optional(Type.String({ pattern: '^[0-9]{1,3}$', description: '1-500, default 50' })),
    cursor: Type.Optional(Type.String({ maxLength: 500 })),
    state: Type.Optional(
      Type.Union([
        Type.Literal('pending'),
        Type.Literal('running'),
        Type.Literal('succeeded'),
        Type.Literal('dead'),
        Type.Literal('cancelled'),
        Type.Literal('skipped'),
      ]),
    ),
    job_id: Type.Optional(Id('only this job')),
  },
  { additionalProperties: false },
);

export const JobParams = Type.Object({ job_id: Id('job id') });
export const RunParams = Type.Object({ run_id: Type.String({ minLength: 1, maxLength: 100 }) });
export const WorkerParams = Type.Object({ worker_id: Id('worker id') });
export const KeyParams = Type.Object({ key_id: Type.String({ minLength: 1, maxLength: 100 }) });

export const KeyBody = Type.Object(
  {
    role: Type.Union(
      [Type.Literal('admin'), Type.Literal('operator'), Type.Literal('worker'), Type.Literal('reader')],
      {
        description: "a role of the caller's tenant; cluster-admin keys are made only by `tock keys create`",
      },
    ),
    name: Type.Optional(Type.String({ maxLength: 200 })),
  },
  { additionalProperties: false },
);

export const ApiKey = Type.Object(answerProperties(API_KEY_FIELDS));

export const CreatedKey = Type.Object({
  ...ApiKey.properties,
  key: Type.String({ description: 'the secret, shown once' }),
});
export const KeyList = Type.Object({ keys: Type.Array(ApiKey) });

export const StatusQuery = Type.Object(
  {
    limit: Type.Optional(
      Type.String({ pattern: '^[0-9]{1,3}$', description: 'nodes per page, 1-500, default 100' }),
    ),
    cursor: Type.Optional(Type.String({ maxLength: 500 })),
  },
  { additionalProperties: false },
);

export const StatusNode = Type.Object({
  node_id: Type.String({ description: "a remote worker's is `<tenant>/<worker_id>`" }),
  role: Type.String({ description: 'scheduler or worker' }),
  tenant_id: Nullable(
    Type.String({
      description: "a remote worker's tenant; null for a cluster node (scheduler, worker on the database)",
    }),
  ),
  started_at: Instant('when the process started'),
  last_seen_at: Instant('its last heartbeat'),
  live: Type.Boolean({ description: 'seen within its own liveness window' }),
  clock_offset_ms: Nullable(Type.Number({ description: "its clock's offset from the database's" })),
  clock_uncertainty_ms: Nullable(Type.Number()),
  shards: Type.Integer({ description: 'shard leases it holds (live leases only)' }),
  info: Type.Record(Type.String(), Json, { description: 'what it reports: pid, pool, backlog, …' }),
});

export const StatusAnswer = Type.Object({
  server_time: ServerTime,
  scope: Type.Union([Type.Literal('cluster'), Type.Literal('tenant')], {
    description:
      "cluster (a cluster-admin key): every node, the shards and the backlog. tenant: the caller's tenant's remote workers only",
  }),
  nodes: Type.Array(StatusNode, { description: 'one page, by role then newest first' }),
  next_cursor: Nullable(Type.String({ description: 'the next page of nodes; null on the last' })),
  shards: Type.Optional(
    Type.Object(
      {
        count: Type.Integer(),
        owned: Type.Integer({ description: 'shards under a live lease' }),
        unowned: Type.Integer({ description: 'shards no live lease covers: nobody ticks them now' }),
        by_owner: Type.Record(Type.String(), Type.Array(Type.Integer())),
      },
      { description: 'scope cluster only' },
    ),
  ),
  unserved: Type.Object(
    {
      runs: Type.Integer({
        description: 'claimable runs no live worker serves (their pool, handler and tenant)',
      }),
      groups: Type.Integer({
        description: 'their (tenant, pool, handler) groups; `items` lists the first few',
      }),
      items: Type.Array(
        Type.Object({
          tenant_id: Type.String(),
          pool: Type.String(),
          handler: Type.String(),
          runs: Type.Integer(),
          since: Instant('the longest waiting has been claimable since'),
        }),
        { description: 'longest waiting first' },
      ),
    },
    {
      description:
        "runs waiting for a handler nobody serves: no live worker has their pool, their handler and their tenant (scope tenant: the caller's runs)",
    },
  ),
  backlog: Type.Optional(
    Type.Object(
      {
        due_jobs: Type.Integer({ description: 'jobs due whose runs are not materialised yet' }),
        ready_runs: Type.Integer({ description: 'runs claimable now, waiting for a worker' }),
        queues: Type.Array(
          Type.Object({
            pool: Type.String(),
            priority: Type.Integer({ description: 'the priority class (0-100)' }),
            ready: Type.Integer({ description: 'runs of this pool and priority claimable now' }),
          }),
          {
            description: `the ready runs by pool and priority class, the deepest first, at most ${MAX_READY_QUEUES}`,
          },
        ),
        queues_more: Type.Integer({ description: 'pool and priority pairs with ready runs past the list' }),
      },
      { description: 'scope cluster only' },
    ),
  ),
});
