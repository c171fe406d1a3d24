/**
 * Stopping a process group: SIGTERM to every member, SIGKILL after the grace to those that ignore
 * it, and nothing (no throw) for a group that is gone or a command that never started.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { describe, expect, test } from 'vitest';
import { stopGroup, trackGroup } from '../../../src/worker/executors/process-group.js';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Waits for `pid` to be gone; a member whose leader died is reaped by init, which may take a second. */
async function gone(pid: number, withinMs: number): Promise<void> {
  const deadline = Date.now() + withinMs;
  while (alive(pid)) {
    if (Date.now() > deadline) throw new Error(`pid ${pid} still alive after ${withinMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A group whose leader prints its child's pid once both ignore SIGTERM (or not). */
async function startGroup(ignoreTerm: boolean): Promise<{ leader: number; member: number }> {
  const trap = ignoreTerm ? 'trap "" TERM; ' : '';
  const child = spawn('sh', ['-c', `${trap}sleep 30 & echo $!; wait`], {
    detached: true,
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  const [chunk] = (await once(child.stdout!, 'data')) as [Buffer];
  child.unref();
  return { leader: child.pid!, member: Number(chunk.toString().trim()) };
}

describe('stopGroup', () => {
  test('does nothing without a pid, and does not throw for a group that is gone', async () => {
    expect(() => stopGroup(undefined, 10)).not.toThrow();
    const { leader, member } = await startGroup(false);
    process.kill(-leader, 'SIGKILL');
    await gone(member, 10_000);
    await gone(leader, 10_000);
    expect(() => stopGroup(leader, 10)).not.toThrow();
  });

  test('SIGTERM stops every member of a group that heeds it', async () => {
    const { leader, member } = await startGroup(false);
    trackGroup(leader);
    stopGroup(leader, 60_000);
    await gone(member, 10_000);
    await gone(leader, 10_000);
  });

  test('a group that ignores SIGTERM gets SIGKILL after the grace, not before', async () => {
    const { leader, member } = await startGroup(true);
    trackGroup(leader);
    stopGroup(leader, 500);
    await new Promise((r) => setTimeout(r, 200));
    expect(alive(member)).toBe(true);
    await gone(member, 10_000);
    await gone(leader, 10_000);
  });
});
