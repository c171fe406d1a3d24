/**
 * The jobs of the tenant, a page at a time (`GET /v1/jobs`, cursor pages): schedule, state, next
 * slot, and the newest run with its age (`GET /v1/jobs/{id}/runs?limit=1` for each job shown).
 * The list API has no search, so the filter narrows the page loaded (by id, handler or schedule,
 * and by state). Polled while the tab is visible.
 */
import { useState } from 'preact/hooks';
import { ApiError, api, seg, withQuery } from '../api.js';
import { runInstant } from '../format.js';
import { JobActions } from '../job-actions.js';
import { usePoll } from '../poll.js';
import { jobHref } from '../routes.js';
import type { Session } from '../session.js';
import type { Job, JobList, Run, RunList } from '../types.js';
import { IdLink, LoadError, Notice, Pager, type Report, StateBadge, usePager, When } from '../ui.js';

/** Jobs a page; each costs one more request for its newest run. */
export const JOBS_PAGE = 25;
/** Requests for the newest runs in flight at once. */
const PARALLEL = 5;

interface Row {
  job: Job;
  last: Run | null;
}

async function loadPage(cursor: string | null): Promise<{ rows: Row[]; next: string | null }> {
  const page = await api<JobList>(withQuery('/v1/jobs', { limit: JOBS_PAGE, cursor }));
  const rows: Row[] = page.jobs.map((job) => ({ job, last: null }));
  for (let i = 0; i < rows.length; i += PARALLEL) {
    await Promise.all(
      rows.slice(i, i + PARALLEL).map(async (row) => {
        try {
          const path = withQuery(`/v1/jobs/${seg(row.job.job_id)}/runs`, { limit: 1 });
          row.last = (await api<RunList>(path)).runs[0] ?? null;
        } catch (err) {
          // A job deleted since the list was read has no runs to show; anything else fails the load.
          if (!(err instanceof ApiError && err.status === 404)) throw err;
        }
      }),
    );
  }
  return { rows, next: page.next_cursor };
}

export function JobsPage({ session }: { session: Session }) {
  const pager = usePager();
  const polled = usePoll(() => loadPage(pager.cursor), [pager.cursor]);
  const [filter, setFilter] = useState('');
  const [stateFilter, setStateFilter] = useState('all');
  const [report, setReport] = useState<Report | null>(null);
  const canOperate = session.can('operate');
  const text = filter.trim().toLowerCase();
  const rows = (polled.data?.rows ?? []).filter(
    ({ job }) =>
      (stateFilter === 'all' || job.state === stateFilter) &&
      (!text || [job.job_id, job.handler, job.schedule].some((s) => s.toLowerCase().includes(text))),
  );

  return (
    <>
      <h1>Jobs</h1>
      <Notice report={report} />
      <LoadError error={polled.error} />
      <div class="filters">
        <label>
          Filter this page
          <input
            type="search"
            value={filter}
            placeholder="id, handler or schedule"
            onInput={(e) => setFilter((e.target as HTMLInputElement).value)}
          />
        </label>
        <label>
          State
          <select value={stateFilter} onChange={(e) => setStateFilter((e.target as HTMLSelectElement).value)}>
            <option value="all">all</option>
            <option value="active">active</option>
            <option value="paused">paused</option>
            <option value="finished">finished</option>
          </select>
        </label>
      </div>
      {polled.data === null ? (
        !polled.error && <p class="muted">Loading jobs…</p>
      ) : rows.length === 0 ? (
        <p class="muted">{polled.data.rows.length === 0 ? 'No jobs yet.' : 'No job on this page matches.'}</p>
      ) : (
        <JobsTable
          rows={rows}
          caption={`Jobs of tenant ${session.who.tenant_id}, page ${pager.page}`}
          canOperate={canOperate}
          report={setReport}
          changed={polled.refresh}
        />
      )}
      <Pager
        pager={pager}
        nextCursor={polled.data?.next}
        what="jobs"
        labels={['First', 'Previous', 'Next']}
      />
    </>
  );
}

interface JobsTableProps {
  rows: Row[];
  caption: string;
  canOperate: boolean;
  report: (r: Report) => void;
  changed: () => void;
}

function JobsTable({ rows, caption, canOperate, report, changed }: JobsTableProps) {
  const now = Date.now();
  return (
    <div class="table-wrap">
      <table>
        <caption>{caption}</caption>
        <thead>
          <tr>
            <th scope="col">Job</th>
            <th scope="col">Schedule</th>
            <th scope="col">Handler</th>
            <th scope="col">State</th>
            <th scope="col">Next slot</th>
            <th scope="col">Last run</th>
            {canOperate && <th scope="col">Actions</th>}
          </tr>
        </thead>
        <tbody>
          {rows.map(({ job, last }) => (
            <tr key={job.job_id} data-job={job.job_id}>
              <td>
                <IdLink href={jobHref(job.job_id)} id={job.job_id} />
              </td>
              <td>
                <code>{job.schedule}</code> <span class="muted">{job.timezone}</span>
              </td>
              <td>{job.handler}</td>
              <td>
                <StateBadge state={job.state} />
              </td>
              <td data-testid="next-slot">
                <When iso={job.next_run_at} now={now} empty="none" />
              </td>
              <td data-testid="last-run">
                {last ? (
                  <>
                    <StateBadge state={last.state} /> <When iso={runInstant(last)} now={now} />
                  </>
                ) : (
                  <span class="muted">no run yet</span>
                )}
              </td>
              {canOperate && (
                <td>
                  <JobActions job={job} report={report} changed={changed} />
                </td>
              )}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
