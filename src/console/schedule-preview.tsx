/**
 * The next slots of a schedule with what daylight saving does to them (`GET /v1/schedule`, the
 * same core function as `tock schedule`): on a job's page for its own schedule, and on the Jobs
 * page for an expression being written (`ScheduleTry`). Computed by the server from the
 * expression alone: loaded again only when the expression or zone changes, never polled.
 */
import { useEffect, useState } from 'preact/hooks';
import { ApiError, api, withQuery } from './api.js';
import { useSettled } from './settled.js';
import { LoadError } from './ui.js';

/** Slots a preview shows. */
export const PREVIEW_SLOTS = 5;

interface ScheduleAnswer {
  slots: { at: string; local: string; notes: string[] }[];
  ended: boolean;
  cut: boolean;
}

export function SchedulePreview({ expression, timezone }: { expression: string; timezone: string }) {
  const [answer, setAnswer] = useState<ScheduleAnswer | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  useEffect(() => {
    let stale = false;
    setAnswer(null);
    setError(null);
    api<ScheduleAnswer>(withQuery('/v1/schedule', { expression, timezone, count: PREVIEW_SLOTS })).then(
      (a) => !stale && setAnswer(a),
      (err) => !stale && setError(err instanceof ApiError ? err : new ApiError(0, 'error', String(err))),
    );
    return () => {
      stale = true;
    };
  }, [expression, timezone]);

  return (
    <section aria-labelledby="schedule-preview" data-testid="schedule-preview">
      <h2 id="schedule-preview">Next slots</h2>
      <LoadError error={error} />
      {answer === null ? (
        !error && <p class="muted">Computing…</p>
      ) : answer.slots.length === 0 ? (
        <p class="muted">No slot to come: the schedule has ended.</p>
      ) : (
        <div class="table-wrap">
          <table>
            <caption>
              The next {answer.slots.length} slots of <code>{expression}</code> in {timezone}
            </caption>
            <thead>
              <tr>
                <th scope="col">Slot (UTC)</th>
                <th scope="col">Local time</th>
                <th scope="col">Daylight saving</th>
              </tr>
            </thead>
            <tbody>
              {answer.slots.map((s) => (
                <tr key={s.at}>
                  <td>{s.at.replace('.000Z', 'Z')}</td>
                  <td>{s.local}</td>
                  <td data-testid="dst-note">{s.notes.join('; ')}</td>
                </tr>
              ))}
            </tbody>
          </table>
          {answer.ended && <p class="muted">No slot after these: the schedule ends.</p>}
          {answer.cut && <p class="muted">The next slots are more than 5 years away: not shown.</p>}
        </div>
      )}
    </section>
  );
}

/** A box to try an expression in a zone before defining a job with it. */
export function ScheduleTry() {
  const [typed, setTyped] = useState({ expression: '', timezone: 'UTC' });
  const tried = useSettled(typed);
  const field = (name: 'expression' | 'timezone') => (e: Event) =>
    setTyped({ ...typed, [name]: (e.target as HTMLInputElement).value.trim() });
  return (
    <details>
      <summary>Preview a schedule</summary>
      <div class="filters">
        <label>
          Expression
          <input
            name="expression"
            value={typed.expression}
            placeholder="0 2 * * *"
            onInput={field('expression')}
          />
        </label>
        <label>
          Timezone
          <input
            name="timezone"
            value={typed.timezone}
            placeholder="Europe/Berlin"
            onInput={field('timezone')}
          />
        </label>
      </div>
      {tried.expression && tried.timezone && (
        <SchedulePreview expression={tried.expression} timezone={tried.timezone} />
      )}
    </details>
  );
}
