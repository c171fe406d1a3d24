/**
 * Dead letters: the tenant's runs in state `dead` (`GET /v1/runs?state=dead`), newest first, each
 * with its last error, a link to inspect it, and (for a key that may operate) a replay. A filter by
 * job (the server's) and by error text (the page loaded) narrows the list; "Replay matching…"
 * counts on the server every dead run the filter picks, on every page, says how many in its
 * confirmation, and replays them (bulk-replay.tsx). Polled while the tab is visible.
 */
import { useState } from 'preact/hooks';
import { api, withQuery } from '../api.js';
import { BulkReplay, type DeadFilter } from '../bulk-replay.js';
import { usePoll } from '../poll.js';
import { RunsTable } from '../runs-table.js';
import type { Session } from '../session.js';
import { useSettled } from '../settled.js';
import type { RunList } from '../types.js';
import { LoadError, Notice, Pager, type Report, usePager } from '../ui.js';

export const DEAD_PAGE = 50;

export function DeadPage({ session }: { session: Session }) {
  const [report, setReport] = useState<Report | null>(null);
  const [typed, setTyped] = useState<DeadFilter>({ job_id: '', error_contains: '' });
  const filter = useSettled(typed);
  const field = (name: keyof DeadFilter) => (e: Event) =>
    setTyped({ ...typed, [name]: (e.target as HTMLInputElement).value.trim() });
  // Bumped after a bulk replay: the list loads again from its first page.
  const [generation, setGeneration] = useState(0);
  return (
    <>
      <h1>Dead letters</h1>
      <p class="muted">Runs that used all their attempts or failed permanently. Replay queues one again.</p>
      <Notice report={report} />
      <div class="filters">
        <label>
          Job
          <input
            type="search"
            name="job_id"
            value={typed.job_id}
            placeholder="any"
            onInput={field('job_id')}
          />
        </label>
        <label>
          Last error holds
          <input
            type="search"
            name="error_contains"
            value={typed.error_contains}
            placeholder="any"
            onInput={field('error_contains')}
          />
        </label>
        {/* The bulk replay counts what the boxes say now, not what the list last loaded. */}
        {session.can('operate') && (
          <div class="filters-action">
            <BulkReplay filter={typed} report={setReport} changed={() => setGeneration(generation + 1)} />
          </div>
        )}
      </div>
      {/* A new filter starts again from its first page. */}
      <DeadList
        key={`${generation}:${JSON.stringify(filter)}`}
        session={session}
        filter={filter}
        report={setReport}
      />
    </>
  );
}

function DeadList({
  session,
  filter,
  report,
}: {
  session: Session;
  filter: DeadFilter;
  report: (r: Report) => void;
}) {
  const pager = usePager();
  const dead = usePoll(
    () =>
      api<RunList>(
        withQuery('/v1/runs', {
          state: 'dead',
          job_id: filter.job_id || null,
          limit: DEAD_PAGE,
          cursor: pager.cursor,
        }),
      ),
    [pager.cursor],
  );
  const text = filter.error_contains.toLowerCase();
  const runs = (dead.data?.runs ?? []).filter(
    (r) => !text || (r.last_error ?? '').toLowerCase().includes(text),
  );
  const canOperate = session.can('operate');
  return (
    <>
      <LoadError error={dead.error} />
      {dead.data && (
        <RunsTable
          caption={
            text ? 'Dead runs of this page whose last error matches, newest first' : 'Dead runs, newest first'
          }
          runs={runs}
          now={Date.now()}
          showJob
          canOperate={canOperate}
          report={report}
          changed={dead.refresh}
        />
      )}
      <Pager pager={pager} nextCursor={dead.data?.next_cursor} what="dead runs" />
    </>
  );
}
