/**
 * The tenant's limits (`GET /v1/limits`, 100 a page by key): each with its rate and burst, the
 * tokens a claim could take now, its concurrency cap and the slots in use, and the runs it holds
 * back: queued runs due now that wait on it while it is exhausted (what `tock_limit_held_runs`
 * counts on `/metrics`). Read-only: limits are written with `tock limits` or `PUT /v1/limits/{key}`.
 */
import { api, withQuery } from '../api.js';
import { usePoll } from '../poll.js';
import type { LimitList } from '../types.js';
import { LoadError, Pager, usePager, When } from '../ui.js';

/** Limits a page. */
export const LIMITS_PAGE = 100;

const none = <span class="muted">—</span>;

export function LimitsPage() {
  const pager = usePager();
  const limits = usePoll(
    () => api<LimitList>(withQuery('/v1/limits', { limit: LIMITS_PAGE, cursor: pager.cursor })),
    [pager.cursor],
  );
  const now = Date.now();
  const list = limits.data?.limits;
  return (
    <>
      <h1>Limits</h1>
      <p class="muted">
        Rate limits and concurrency caps that jobs list in <code>limits</code>, and the tenant's own (
        <code>tenant:…</code>). Written with <code>tock limits put</code>; a job's own cap shows on the job.
      </p>
      <LoadError error={limits.error} />
      {list && list.length === 0 && <p>No limits yet.</p>}
      {list && list.length > 0 && (
        <div class="table-wrap">
          <table>
            <caption>Limits by key, page {pager.page}</caption>
            <thead>
              <tr>
                <th scope="col">Key</th>
                <th scope="col">Rate (per s)</th>
                <th scope="col">Burst</th>
                <th scope="col">Tokens now</th>
                <th scope="col">Max concurrency</th>
                <th scope="col">Slots in use</th>
                <th scope="col">Runs held</th>
                <th scope="col">Changed</th>
              </tr>
            </thead>
            <tbody>
              {list.map((l) => (
                <tr key={l.key} data-limit={l.key}>
                  <td class="id">{l.key}</td>
                  <td data-field="rate">{l.rate ?? none}</td>
                  <td data-field="burst">{l.burst ?? none}</td>
                  <td data-field="tokens">{l.tokens === null ? none : Math.floor(l.tokens * 100) / 100}</td>
                  <td data-field="max_concurrency">{l.max_concurrency ?? none}</td>
                  <td data-field="in_use">{l.in_use}</td>
                  <td data-field="held">
                    {l.held > 0 ? <strong>{l.held_capped ? `${l.held}+` : l.held}</strong> : 0}
                  </td>
                  <td>
                    <When iso={l.updated_at} now={now} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <Pager
        pager={pager}
        nextCursor={limits.data?.next_cursor}
        what="limits"
        labels={['First', 'Previous', 'Next']}
      />
    </>
  );
}
