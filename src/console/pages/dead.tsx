/**
 * Dead letters: the tenant's runs in state `dead` (`GET /v1/runs?state=dead`), newest first, each
 * with its last error, a link to inspect it, and (for a key that may operate) a replay. Polled
 * while the tab is visible.
 */
import { useState } from 'preact/hooks';
import { api, withQuery } from '../api.js';
import { usePoll } from '../poll.js';
import { RunsTable } from '../runs-table.js';
import type { Session } from '../session.js';
import type { RunList } from '../types.js';
import { LoadError, Notice, Pager, type Report, usePager } from '../ui.js';

export const DEAD_PAGE = 50;

export function DeadPage({ session }: { session: Session }) {
  const [report, setReport] = useState<Report | null>(null);
  const pager = usePager();
  const dead = usePoll(
    () => api<RunList>(withQuery('/v1/runs', { state: 'dead', limit: DEAD_PAGE, cursor: pager.cursor })),
    [pager.cursor],
  );
  return (
    <>
      <h1>Dead letters</h1>
      <p class="muted">Runs that used all their attempts or failed permanently. Replay queues one again.</p>
      <Notice report={report} />
      <LoadError error={dead.error} />
      {dead.data && (
        <RunsTable
          caption="Dead runs, newest first"
          runs={dead.data.runs}
          now={Date.now()}
          showJob
          canOperate={session.can('operate')}
          report={setReport}
          changed={dead.refresh}
        />
      )}
      <Pager pager={pager} nextCursor={dead.data?.next_cursor} what="dead runs" />
    </>
  );
}
