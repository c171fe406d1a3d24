/**
 * What an operator may do to a job, each asked first: pause or resume it, trigger a run now (with
 * an Idempotency-Key, so a repeated request makes one run), delete it (its pending runs are
 * cancelled). Shown only to a key that may operate.
 */
import { api, seg } from './api.js';
import type { Job, Run } from './types.js';
import { ConfirmButton, type Report } from './ui.js';

export interface JobActionsProps {
  job: Job;
  report: (r: Report) => void;
  /** After an action succeeded: load again. */
  changed: () => void;
  /** After the job was deleted. Default: `changed`. */
  deleted?: () => void;
}

export function JobActions({ job, report, changed, deleted }: JobActionsProps) {
  const id = job.job_id;
  const path = `/v1/jobs/${seg(id)}`;
  return (
    <div class="actions">
      {job.state === 'paused' ? (
        <ConfirmButton
          label="Resume"
          question={`Resume job ${id}? Its next slot is the first one after now.`}
          act={async () => {
            await api(`${path}/resume`, { method: 'POST' });
            changed();
            return `Job ${id} is resumed.`;
          }}
          report={report}
        />
      ) : (
        job.state === 'active' && (
          <ConfirmButton
            label="Pause"
            question={`Pause job ${id}? No slot is scheduled until it is resumed; runs already made still run.`}
            act={async () => {
              await api(`${path}/pause`, { method: 'POST' });
              changed();
              return `Job ${id} is paused.`;
            }}
            report={report}
          />
        )
      )}
      <ConfirmButton
        label="Trigger"
        question={`Trigger a run of job ${id} now?`}
        confirmLabel="Trigger now"
        act={async () => {
          const run = await api<Run>(`${path}/runs`, { method: 'POST', idempotencyKey: crypto.randomUUID() });
          changed();
          return `Run ${run.run_id} of job ${id} is ${run.state}.`;
        }}
        report={report}
      />
      <ConfirmButton
        label="Delete"
        danger
        question={`Delete job ${id}? Its pending runs are cancelled. This cannot be undone.`}
        confirmLabel="Delete job"
        act={async () => {
          await api(path, { method: 'DELETE' });
          (deleted ?? changed)();
          return `Job ${id} is deleted.`;
        }}
        report={report}
      />
    </div>
  );
}
