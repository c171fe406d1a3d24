/**
 * One job: its definition (`GET /v1/jobs/{id}`), the actions a key that may operate has, and its
 * run history, newest first, a cursor page at a time (`GET /v1/jobs/{id}/runs`); each run links to
 * its page (attempts, output, errors, logs); its scheduling delay over the last hour
 * (`GET /v1/delay?job_id=…`: p50, p99 and max per minute of slots) with the largest delay of the
 * last five minutes, the figure `/metrics` reports as `tock_job_scheduling_delay_seconds`. Polled
 * while the tab is visible: three requests each time.
 */
import { useState } from 'preact/hooks';
import { api, seg, withQuery } from '../api.js';
import { METRICS_JOB_WINDOW_MS, recentMax, seconds } from '../delay.js';
import { DelayChart } from '../delay-chart.js';
import { json } from '../format.js';
import { JobActions } from '../job-actions.js';
import { usePoll } from '../poll.js';
import { RunsTable } from '../runs-table.js';
import { SchedulePreview } from '../schedule-preview.js';
import type { Session } from '../session.js';
import type { DelayAnswer, Job, RunList } from '../types.js';
import { LoadError, Notice, Pager, type Report, StateBadge, usePager, When } from '../ui.js';

/** Runs a page of the history. */
export const HISTORY_PAGE = 20;

export function JobPage({ session, jobId }: { session: Session; jobId: string }) {
  const [report, setReport] = useState<Report | null>(null);
  const [gone, setGone] = useState(false);
  const pager = usePager();
  const job = usePoll(() => api<Job>(`/v1/jobs/${seg(jobId)}`), [jobId]);
  const runs = usePoll(
    () =>
      api<RunList>(withQuery(`/v1/jobs/${seg(jobId)}/runs`, { limit: HISTORY_PAGE, cursor: pager.cursor })),
    [jobId, pager.cursor],
  );
  const canOperate = session.can('operate');
  const now = Date.now();
  const changed = () => {
    job.refresh();
    runs.refresh();
  };
  const j = job.data;

  return (
    <>
      <p class="crumbs">
        <a href="#/jobs">Jobs</a> /
      </p>
      <h1>
        Job <span class="id">{jobId}</span>
      </h1>
      <Notice report={report} />
      {gone ? null : <LoadError error={job.error} />}
      {j && !gone && (
        <>
          {canOperate && (
            <JobActions
              job={j}
              report={setReport}
              changed={changed}
              deleted={() => {
                setGone(true);
                location.hash = '#/jobs';
              }}
            />
          )}
          <Definition j={j} now={now} />
          <SchedulePreview expression={j.schedule} timezone={j.timezone} />
        </>
      )}
      {job.error?.code !== 'not_found' && <JobDelay jobId={jobId} />}
      {job.error?.code !== 'not_found' && (
        <section aria-labelledby="history">
          <h2 id="history">Runs, newest first</h2>
          <LoadError error={runs.error} />
          {runs.data && (
            <RunsTable
              caption={`Runs of ${jobId}, page ${pager.page}`}
              runs={runs.data.runs}
              now={now}
              canOperate={canOperate}
              report={setReport}
              changed={changed}
            />
          )}
          <Pager pager={pager} nextCursor={runs.data?.next_cursor} what="runs" />
        </section>
      )}
    </>
  );
}

function Definition({ j, now }: { j: Job; now: number }) {
  return (
    <section aria-labelledby="definition">
      <h2 id="definition">Definition</h2>
      <dl class="facts">
        <dt>State</dt>
        <dd>
          <StateBadge state={j.state} />
        </dd>
        <dt>Next slot</dt>
        <dd data-testid="next-slot">
          <When iso={j.next_run_at} now={now} empty="none" />
        </dd>
        <dt>Schedule</dt>
        <dd>
          <code>{j.schedule}</code> ({j.timezone})
        </dd>
        <dt>Handler</dt>
        <dd>
          {j.handler} <span class="muted">in pool {j.pool}</span>
        </dd>
        <dt>Attempts</dt>
        <dd>at most {j.max_attempts}</dd>
        <dt>Misfire, overlap</dt>
        <dd>
          {j.misfire}, {j.overlap}
          {j.max_concurrency !== null && `, at most ${j.max_concurrency} at once`}
        </dd>
        <dt>Limits</dt>
        <dd data-testid="job-limits">
          {j.limits.length === 0 ? (
            'none'
          ) : (
            <>
              {j.limits.join(', ')} <a href="#/limits">(their tokens, slots and held runs)</a>
            </>
          )}
        </dd>
        <dt>Version</dt>
        <dd>
          {j.version}, changed <When iso={j.updated_at} now={now} />
        </dd>
      </dl>
      <details>
        <summary>The whole definition (JSON)</summary>
        <pre>{json(j)}</pre>
      </details>
    </section>
  );
}

/** The job's delay chart, with the largest delay of the last METRICS_JOB_WINDOW_MS as /metrics has it. */
function JobDelay({ jobId }: { jobId: string }) {
  const delay = usePoll(() => api<DelayAnswer>(withQuery('/v1/delay', { job_id: jobId })), [jobId]);
  const d = delay.data;
  const recent = d && recentMax(d);
  const minutes = METRICS_JOB_WINDOW_MS / 60_000;
  return (
    <section aria-labelledby="delay">
      <h2 id="delay">Scheduling delay</h2>
      <LoadError error={delay.error} />
      {d && (
        <>
          <p class="recent-max" data-testid="recent-max">
            Largest delay of the runs with a slot in the last {minutes} minutes:{' '}
            <strong data-seconds={recent?.seconds ?? ''}>
              {recent ? seconds(recent.seconds) : 'no run ended'}
            </strong>
            {recent && <span class="muted"> ({recent.runs} runs)</span>}
          </p>
          <p class="muted">
            A run's delay is its start minus when it became due. <code>/metrics</code> reports the same figure
            as <code>tock_job_scheduling_delay_seconds</code> (over the server's{' '}
            <code>--metrics-job-window</code>, {minutes} minutes unless set; it also counts a queued run's
            wait so far).
          </p>
          <DelayChart
            caption={`Delay of ${jobId}'s runs by slot, the last hour`}
            answer={d}
            stats={['p50', 'p99', 'max']}
            testId="job-delay"
          />
        </>
      )}
    </section>
  );
}
