/**
 * The jobs of the tenant, a page at a time (`GET /v1/jobs`, cursor pages): schedule, state, next
 * slot, and the newest run with its age (`GET /v1/jobs/{id}/runs?limit=1` for each job shown).
 * The search is the server's (`q`: the id starts with it; `state`, `pool`, `handler`), so it finds
 * a job on any page; typing waits for a pause before it asks. Polled while the tab is visible.
 */
import { useState } from 'preact/hooks';
import { ApiError, api, seg, withQuery } from '../api.js';
import { runInstant } from '../format.js';
import { JobActions } from '../job-actions.js';
import { usePoll } from '../poll.js';
import { jobHref } from '../routes.js';
import { ScheduleTry } from '../schedule-preview.js';
import type { Session } from '../session.js';
import { useSettled } from '../settled.js';
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

/** The server-side filters of the list; an empty field is no filter. */
interface Filters {
  q: string;
  state: string;
  pool: string;
  handler: string;
}

const NO_FILTERS: Filters = { q: '', state: '', pool: '', handler: '' };

async function loadPage(cursor: string | null, f: Filters): Promise<{ rows: Row[]; next: string | null }> {
  const query = {
    limit: JOBS_PAGE,
    cursor,
    q: f.q || null,
    state: f.state || null,
    pool: f.pool || null,
    handler: f.handler || null,
  };
  const page = await api<JobList>(withQuery('/v1/jobs', query));
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
  const [typed, setTyped] = useState<Filters>(NO_FILTERS);
  const filters = useSettled(typed);
  const field = (name: keyof Filters) => (e: Event) =>
    setTyped({ ...typed, [name]: (e.target as HTMLInputElement | HTMLSelectElement).value.trim() });
  const searching = Object.values(filters).some((v) => v !== '');

  return (
    <>
      <h1>Jobs</h1>
      <div class="filters">
        <label>
          Job id starts with
          <input type="search" name="q" value={typed.q} placeholder="e.g. billing." onInput={field('q')} />
        </label>
        <label>
          State
          <select name="state" value={typed.state} onChange={field('state')}>
            <option value="">all</option>
            <option value="active">active</option>
            <option value="paused">paused</option>
            <option value="finished">finished</option>
          </select>
        </label>
        <label>
          Pool
          <input type="search" name="pool" value={typed.pool} placeholder="any" onInput={field('pool')} />
        </label>
        <label>
          Handler
          <input
            type="search"
            name="handler"
            value={typed.handler}
            placeholder="any"
            onInput={field('handler')}
          />
        </label>
      </div>
      <ScheduleTry />
      {/* A new search starts again from its first page. */}
      <JobsList key={JSON.stringify(filters)} session={session} filters={filters} searching={searching} />
    </>
  );
}

function JobsList({
  session,
  filters,
  searching,
}: {
  session: Session;
  filters: Filters;
  searching: boolean;
}) {
  const pager = usePager();
  const polled = usePoll(() => loadPage(pager.cursor, filters), [pager.cursor]);
  const [report, setReport] = useState<Report | null>(null);
  const rows = polled.data?.rows ?? [];
  return (
    <>
      <Notice report={report} />
      <LoadError error={polled.error} />
      {polled.data === null ? (
        !polled.error && <p class="muted">Loading jobs…</p>
      ) : rows.length === 0 ? (
        <p class="muted">{searching ? 'No job matches.' : 'No jobs yet.'}</p>
      ) : (
        <JobsTable
          rows={rows}
          caption={`${searching ? 'Matching jobs' : 'Jobs'} of tenant ${session.who.tenant_id}, page ${pager.page}`}
          canOperate={session.can('operate')}
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
