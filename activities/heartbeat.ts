/**
 * Heartbeats on a clock while an activity's work runs, also while one request
 * is held for minutes (a trainer's long poll, an archive download), so the
 * activity's heartbeat timeout only fires when the worker is gone.
 */
import { Context } from '@temporalio/activity';

/** How often a clocked activity tells Temporal it is alive (heartbeat timeouts: 15 s for rollouts, 30 s for the trainer and publishing). */
export const HEARTBEAT_CLOCK_MS = 5000;

export async function withHeartbeatClock<T>(details: () => unknown, work: () => Promise<T>): Promise<T> {
  const context = Context.current();
  const beat = setInterval(() => context.heartbeat(details()), HEARTBEAT_CLOCK_MS);
  try {
    return await work();
  } finally {
    clearInterval(beat);
  }
}
