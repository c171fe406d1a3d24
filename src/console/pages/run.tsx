/**
 * One run (`GET /v1/runs/{id}`): its slot and state, why a pending run waits (`waiting_for`), its
 * progress, and each attempt with its worker, outcome, error message and stack, output and log
 * lines. A key that may operate can cancel a pending or running run and replay a dead one. Polled
 * while the tab is visible, so a running attempt's progress and logs move.
 */
import { useState } from 'preact/hooks';
import { api, seg } from '../api.js';
import { json } from '../format.js';
import { usePoll } from '../poll.js';
import { jobHref } from '../routes.js';
import { RunActions } from '../runs-table.js';
import type { Session } from '../session.js';
import type { Attempt, RunWithAttempts } from '../types.js';
import { LoadError, Notice, type Report, StateBadge, When } from '../ui.js';

function AttemptView({ a, now }: { a: Attempt; now: number }) {
  return (
    <section class="attempt" aria-labelledby={`attempt-${a.attempt}`}>
      <h3 id={`attempt-${a.attempt}`}>
        Attempt {a.attempt} {a.outcome ? <StateBadge state={a.outcome} /> : <StateBadge state="running" />}
      </h3>
      <dl class="facts">
        <dt>Worker</dt>
        <dd class="id">{a.worker_id}</dd>
        <dt>Started</dt>
        <dd>
          <When iso={a.started_at} now={now} />
        </dd>
        <dt>Finished</dt>
        <dd>
          <When iso={a.finished_at} now={now} />
        </dd>
        {a.progress !== null && (
          <>
            <dt>Progress</dt>
            <dd>
              {a.progress}
              {a.progress_message && ` — ${a.progress_message}`}
            </dd>
          </>
        )}
      </dl>
      {a.error && (
        <>
          <h4>Error</h4>
          <p class="error-text">{a.error}</p>
        </>
      )}
      {a.error_stack && (
        <details>
          <summary>Stack</summary>
          <pre>{a.error_stack}</pre>
        </details>
      )}
      {a.output && (
        <>
          <h4>Output</h4>
          <pre class="output">{a.output}</pre>
        </>
      )}
      {a.logs.length > 0 && (
        <>
          <h4>
            Logs{a.logs_dropped > 0 && <span class="muted"> ({a.logs_dropped} earlier lines dropped)</span>}
          </h4>
          <pre class="output">{a.logs.join('\n')}</pre>
        </>
      )}
    </section>
  );
}

export function RunPage({ session, runId }: { session: Session; runId: string }) {
  const [report, setReport] = useState<Report | null>(null);
  const run = usePoll(() => api<RunWithAttempts>(`/v1/runs/${seg(runId)}`), [runId]);
  const now = Date.now();
  const r = run.data;
  return (
    <>
      <p class="crumbs">
        {r ? (
          <>
            <a href="#/jobs">Jobs</a> / <a href={jobHref(r.job_id)}>{r.job_id}</a> /
          </>
        ) : (
          <a href="#/jobs">Jobs</a>
        )}
      </p>
      <h1>
        Run <span class="id">{runId}</span>
      </h1>
      <Notice report={report} />
      <LoadError error={run.error} />
      {r && (
        <>
          <div class="actions">
            <RunActions
              run={r}
              canOperate={session.can('operate')}
              report={setReport}
              changed={run.refresh}
            />
          </div>
          <RunFacts r={r} now={now} />
          <details>
            <summary>Payload (JSON)</summary>
            <pre>{json(r.payload)}</pre>
          </details>
          <h2>Attempts</h2>
          {r.attempts.length === 0 ? (
            <p class="muted">No attempt yet.</p>
          ) : (
            [...r.attempts].reverse().map((a) => <AttemptView key={a.attempt} a={a} now={now} />)
          )}
        </>
      )}
    </>
  );
}

function RunFacts({ r, now }: { r: RunWithAttempts; now: number }) {
  return (
    <dl class="facts">
      <dt>State</dt>
      <dd data-testid="run-state">
        <StateBadge state={r.state} />
      </dd>
      {r.waiting_for && (
        <>
          <dt>Waiting for</dt>
          <dd>{r.waiting_for}</dd>
        </>
      )}
      <dt>Slot</dt>
      <dd>
        <When iso={r.scheduled_for} now={now} />
      </dd>
      <dt>Attempt</dt>
      <dd>
        {r.attempt} of at most {r.max_attempts}
      </dd>
      <dt>Handler</dt>
      <dd>
        {r.handler}{' '}
        <span class="muted">
          in pool {r.pool}, priority {r.priority}
        </span>
      </dd>
      <dt>Claimable from</dt>
      <dd>
        <When iso={r.available_at} now={now} />
      </dd>
      {r.state === 'running' && r.lease_owner && (
        <>
          <dt>Leased by</dt>
          <dd>
            <span class="id">{r.lease_owner}</span> until <When iso={r.lease_expires_at} now={now} />
          </dd>
        </>
      )}
      {r.progress !== null && (
        <>
          <dt>Progress</dt>
          <dd>
            {r.progress}
            {r.progress_message && ` — ${r.progress_message}`}
          </dd>
        </>
      )}
      <dt>Finished</dt>
      <dd>
        <When iso={r.finished_at} now={now} />
      </dd>
    </dl>
  );
}
