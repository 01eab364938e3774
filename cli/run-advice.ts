/** What `harness-s run status` tells the user to do next with a run that is not going on by itself. */

/** The command that continues the run, with why; null while it runs unpaused, once it completed, or for a status no command continues. */
export function nextStepAdvice(view: { runId: string; status: string; live: { paused: boolean } | null }): string | null {
  const run = view.runId;
  if (view.status === 'RUNNING')
    return view.live?.paused ? `paused: \`harness-s run resume ${run}\` continues it, \`harness-s run cancel ${run}\` ends it` : null;
  switch (view.status) {
    case 'FAILED':
    case 'TERMINATED':
    case 'TIMED_OUT':
      return `${view.status.toLowerCase().replace('_', ' ')}: \`harness-s run recover ${run}\` continues it in a new execution from its last completed step`;
    case 'CANCELLED':
      return `cancelled: \`harness-s run recover ${run}\` continues it from its last completed step, if you want it back`;
    default:
      return null;
  }
}
