/**
 * A table of runs (a job's history, the dead letters, the runs now), newest first, each linking to
 * its page, with the actions its state allows for a key that may operate: cancel a pending or
 * running run, replay a dead one.
 */
import { api, seg } from './api.js';
import { runHref } from './routes.js';
import type { Run } from './types.js';
import { ConfirmButton, IdLink, type Report, StateBadge, When } from './ui.js';

export interface RunsTableProps {
  caption: string;
  runs: Run[];
  now: number;
  /** Show the job column (not on a job's own page). */
  showJob?: boolean;
  /** Show what holds each run (`waiting_for`, in a list of pending runs). */
  showWaiting?: boolean;
  canOperate: boolean;
  report: (r: Report) => void;
  /** After an action succeeded: load again. */
  changed: () => void;
}

export function RunActions({
  run,
  canOperate,
  report,
  changed,
}: {
  run: Run;
  canOperate: boolean;
  report: (r: Report) => void;
  changed: () => void;
}) {
  if (!canOperate) return null;
  if (run.state === 'dead')
    return (
      <ConfirmButton
        label="Replay"
        question={`Replay dead run ${run.run_id} of job ${run.job_id}? It is queued again for another attempt.`}
        act={async () => {
          await api(`/v1/runs/${seg(run.run_id)}/replay`, { method: 'POST' });
          changed();
          return `Run ${run.run_id} is queued again.`;
        }}
        report={report}
      />
    );
  if (run.state === 'pending' || run.state === 'running')
    return (
      <ConfirmButton
        label="Cancel run"
        danger
        question={`Cancel ${run.state} run ${run.run_id} of job ${run.job_id}?${run.state === 'running' ? ' Its lease is revoked; the handler is told to stop.' : ''}`}
        act={async () => {
          await api(`/v1/runs/${seg(run.run_id)}/cancel`, { method: 'POST' });
          changed();
          return `Run ${run.run_id} is cancelled.`;
        }}
        report={report}
      />
    );
  return null;
}

export function RunsTable({
  caption,
  runs,
  now,
  showJob,
  showWaiting,
  canOperate,
  report,
  changed,
}: RunsTableProps) {
  if (runs.length === 0) return <p class="muted">{caption}: none.</p>;
  return (
    <div class="table-wrap">
      <table>
        <caption>{caption}</caption>
        <thead>
          <tr>
            <th scope="col">Run</th>
            {showJob && <th scope="col">Job</th>}
            <th scope="col">Slot</th>
            <th scope="col">State</th>
            <th scope="col">Attempt</th>
            <th scope="col">Started</th>
            <th scope="col">Finished</th>
            <th scope="col">Last error</th>
            {showWaiting && <th scope="col">Waiting for</th>}
            {canOperate && <th scope="col">Actions</th>}
          </tr>
        </thead>
        <tbody>
          {runs.map((r) => (
            <tr key={r.run_id}>
              <td>
                <IdLink href={runHref(r.run_id)} id={r.run_id} />
              </td>
              {showJob && <td class="id">{r.job_id}</td>}
              <td>
                <When iso={r.scheduled_for} now={now} />
              </td>
              <td>
                <StateBadge state={r.state} />
              </td>
              <td>
                {r.attempt}/{r.max_attempts}
              </td>
              <td>
                <When iso={r.started_at} now={now} />
              </td>
              <td>
                <When iso={r.finished_at} now={now} />
              </td>
              <td class="error-text">{r.last_error ?? ''}</td>
              {showWaiting && (
                <td data-testid="waiting-for">
                  {r.waiting_for ??
                    (Date.parse(r.available_at) > now ? (
                      <span class="muted">
                        its time, <When iso={r.available_at} now={now} />
                      </span>
                    ) : (
                      <span class="muted">nothing</span>
                    ))}
                </td>
              )}
              {canOperate && (
                <td>
                  <RunActions run={r} canOperate={canOperate} report={report} changed={changed} />
                </td>
              )}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
