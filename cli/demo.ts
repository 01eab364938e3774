/**
 * `npm run demo`: the embedded stack, one SIMULATED training run with live
 * progress, its report (.data/reports/<run id>/index.html) and its summary.
 * Stops what it started.
 */
import { dbPoolSizeFromEnv, RunStore } from '../core/store/run-store';
import { startEmbeddedStack } from '../infra/embedded-stack';
import { createLogger } from '../workers/logger';
import type { RunSummary } from '../workflows/definitions';
import { connectClient, newRunId, readConfigFile, startRun, validateConfig } from './runs';
import { watchRun } from './watch';
import { defaultReportDir, writeRunReport } from './report/run-report-file';
import { processSettings } from '../core/settings';
import { viewerUrlFromEnv } from '../core/viewer-address';

export async function runDemo(options: { configFile: string; steps?: number; log: (line: string) => void }): Promise<RunSummary> {
  const { log } = options;
  const started = Date.now();
  const { raw } = readConfigFile(options.configFile);
  const input = options.steps ? { ...(raw as object), steps: options.steps } : raw;
  const config = validateConfig(input, options.configFile);
  const dbPoolSize = dbPoolSizeFromEnv(); // a bad value fails before anything starts
  const stack = await startEmbeddedStack({ logger: createLogger('harness-s', processSettings().logLevel ?? 'warn'), log });
  try {
    const client = await connectClient();
    const runId = newRunId(config.name);
    const handle = await startRun(client, input, config, runId);
    log(`[SIMULATED] run ${runId}: ${config.steps} steps of ${config.rollout.tasksPerStep} tasks x G=${config.rollout.groupSize}`);
    log(`Temporal Web UI: ${stack.temporal.uiUrl}/namespaces/default/workflows/${encodeURIComponent(runId)}`);
    await watchRun(client, runId, (line) => (line.startsWith('step') ? log(line) : undefined), 500);
    const summary = await handle.result();
    const store = RunStore.connect(stack.databaseUrl, undefined, dbPoolSize);
    try {
      log(`report: ${await writeRunReport({ store, runId, dir: defaultReportDir(runId), viewerUrl: viewerUrlFromEnv() })}`);
    } finally {
      await store.close();
    }
    log(`demo finished in ${((Date.now() - started) / 1000).toFixed(1)}s; Web UI: ${stack.temporal.uiUrl}`);
    return summary;
  } finally {
    await stack.stop();
  }
}
