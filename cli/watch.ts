/** `harness-s run watch`: one line per completed step until the run ends. */
import type { Client } from '@temporalio/client';
import { stepLine, summaryText } from './report';
import { runView, type RunView } from './runs';
import { statusQuery } from '../workflows/definitions';
import { isSimulatedEnv } from '../core/sim-kind';

/** Prints each step as it completes, and the summary (or the status) at the end; returns the run's final view. */
export async function watchRun(client: Client, runId: string, print: (line: string) => void, pollMs = 1000): Promise<RunView> {
  let lastStep = -1;
  let lastPhase = '';
  let lastPaused = false;
  for (;;) {
    const view = await runView(client, runId);
    if (view.live) {
      const { live } = view;
      if (live.phase !== lastPhase) print(`[${runId}] ${live.phase}${isSimulatedEnv(live.env) ? ' (SIMULATED)' : ''}`);
      if (live.paused !== lastPaused) print(live.paused ? `[${runId}] paused: ${live.pauseReason}` : `[${runId}] resumed`);
      for (const step of live.recentSteps.filter((s) => s.step > lastStep)) {
        print(stepLine(step));
        lastStep = step.step;
      }
      lastPhase = live.phase;
      lastPaused = live.paused;
    } else {
      // A closed run still answers queries (a worker replays it): print the steps not yet shown.
      const final = await client.workflow
        .getHandle(runId)
        .query(statusQuery)
        .catch(() => null);
      for (const step of final?.recentSteps.filter((s) => s.step > lastStep) ?? []) print(stepLine(step));
      if (view.summary) print(summaryText(view.summary));
      else {
        print(`[${runId}] ${view.status}${view.failure ? `: ${view.failure}` : ''}`);
        process.exitCode = 1;
      }
      return view;
    }
    await new Promise((resolve) => setTimeout(resolve, pollMs));
  }
}
