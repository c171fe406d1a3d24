/**
 * Runs now: the tenant's running and pending runs (`GET /v1/runs?state=running|pending`, newest
 * first, the first page of each), each pending one with what holds it (the list's `waiting_for`),
 * with a cancel for a key that may operate. Polled while the tab is visible.
 */
import { useState } from 'preact/hooks';
import { api, withQuery } from '../api.js';
import { usePoll } from '../poll.js';
import { RunsTable } from '../runs-table.js';
import type { Session } from '../session.js';
import type { RunList } from '../types.js';
import { LoadError, Notice, type Report } from '../ui.js';

export const NOW_PAGE = 50;

export function NowPage({ session }: { session: Session }) {
  const [report, setReport] = useState<Report | null>(null);
  const runs = usePoll(async () => {
    const [running, pending] = await Promise.all([
      api<RunList>(withQuery('/v1/runs', { state: 'running', limit: NOW_PAGE })),
      api<RunList>(withQuery('/v1/runs', { state: 'pending', limit: NOW_PAGE })),
    ]);
    return { running, pending };
  }, []);
  const now = Date.now();
  const canOperate = session.can('operate');
  const more = (l: RunList) => (l.next_cursor ? ` (the newest ${NOW_PAGE})` : '');
  return (
    <>
      <h1>Runs now</h1>
      <Notice report={report} />
      <LoadError error={runs.error} />
      {runs.data && (
        <>
          <h2>Running</h2>
          <RunsTable
            caption={`Running${more(runs.data.running)}`}
            runs={runs.data.running.runs}
            now={now}
            showJob
            canOperate={canOperate}
            report={setReport}
            changed={runs.refresh}
          />
          <h2>Pending</h2>
          <RunsTable
            caption={`Pending${more(runs.data.pending)}`}
            runs={runs.data.pending.runs}
            now={now}
            showJob
            showWaiting
            canOperate={canOperate}
            report={setReport}
            changed={runs.refresh}
          />
        </>
      )}
    </>
  );
}
