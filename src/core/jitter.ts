/**
 * Deterministic jitter spreads a herd of jobs that share a slot (`0 0 * * *`) over a window. A
 * job's offset is `hash(tenant, job_id) mod jitter`: the same on every node and after every
 * restart, never negative, so a run becomes available at or after its slot and keeps the slot as
 * its identity.
 */
import { createHash } from 'node:crypto';

/** The offset, in ms within `[0, jitterSeconds × 1000)`, of a job's runs after their slot. */
export function jitterOffsetMs(tenantId: string, jobId: string, jitterSeconds: number): number {
  if (!(jitterSeconds > 0)) return 0;
  const digest = createHash('sha256').update(`${tenantId}\u0000${jobId}`).digest();
  // 48 bits of the digest: uniform, and exact in a double.
  return digest.readUIntBE(0, 6) % Math.round(jitterSeconds * 1000);
}
