/**
 * `npm run demo`: the embedded stack, one SIMULATED training run with live
 * progress, the base policy evaluated on the run's eval tasks (the start of
 * the comparison), its report (.data/reports/<run id>/index.html) and a
 * closing summary (cli/demo-summary.ts). Stops what it started.
 */
import type { Client } from '@temporalio/client';
import { dbPoolSizeFromEnv, RunStore } from '../core/store/run-store';
import { startEmbeddedStack } from '../infra/embedded-stack';
import { createLogger } from '../workers/logger';
import { namespaceFromEnv } from '../workers/temporal-env';
import { evaluatePolicy } from '../workflows';
import { TASK_QUEUES, type EvaluationSummary } from '../workflows/definitions';
import type { RunConfig } from '../core/config';
import { connectClient, newRunId, readConfigFile, startRun, validateConfig } from './runs';
import { watchRun } from './watch';
import { defaultReportDir, writeRunReport } from './report/run-report-file';
import { processSettings } from '../core/settings';
import { viewerAddressFromEnv, viewerUrlFromEnv } from '../core/viewer-address';
import { serveRunStore } from '../viewer/server';
import { demoSummary, type DemoSummary } from './demo-summary';
import { isSimulatedEnv } from '../core/sim-kind';

export async function runDemo(options: { configFile: string; steps?: number; log: (line: string) => void }): Promise<DemoSummary> {
  const { log } = options;
  const started = Date.now();
  const { raw } = readConfigFile(options.configFile);
  const input = options.steps ? { ...(raw as object), steps: options.steps } : raw;
  const config = validateConfig(input, options.configFile);
  // Bad settings fail before anything starts.
  const dbPoolSize = dbPoolSizeFromEnv();
  const viewerAddress = viewerAddressFromEnv();
  const viewerUrl = viewerUrlFromEnv();
  const namespace = namespaceFromEnv();
  const stack = await startEmbeddedStack({ logger: createLogger('harness-s', processSettings().logLevel ?? 'warn'), log });
  const viewer = await serveRunStore({
    databaseUrl: stack.databaseUrl,
    dbPoolSize,
    temporalAddress: stack.temporal.address,
    namespace,
    ...viewerAddress,
  }).catch((err: Error) => {
    // The run goes on without it; only the live view is missing.
    log(`the trajectory viewer did not start: ${err.message}`);
    return null;
  });
  let result: Omit<DemoSummary, 'baseChange' | 'seconds'>;
  try {
    const client = await connectClient();
    const runId = newRunId(config.name);
    const temporalUi = `${stack.temporal.uiUrl}/namespaces/${encodeURIComponent(namespace)}/workflows/${encodeURIComponent(runId)}`;
    const viewerRun = viewerUrl ? `${viewerUrl}/runs/${encodeURIComponent(runId)}` : null;
    const handle = await startRun(client, input, config, runId);
    const sim = isSimulatedEnv(config.env.kind) ? '[SIMULATED] ' : '';
    log(`${sim}run ${runId}: ${config.steps} steps of ${config.rollout.tasksPerStep} tasks x G=${config.rollout.groupSize}`);
    log(`while the demo runs: Temporal Web UI ${temporalUi}`);
    if (viewer && viewerRun) log(`while the demo runs: trajectory viewer ${viewerRun}`);
    await watchRun(client, runId, (line) => (line.startsWith('step') ? log(line) : undefined), 500);
    const summary = await handle.result();
    const store = RunStore.connect(stack.databaseUrl, undefined, dbPoolSize);
    try {
      const evalEnd = summary.evaluations.at(-1) ?? null;
      const evalStart = evalEnd
        ? await evaluateBasePolicy(client, store, runId, config, (line) => log(`${sim}${line}`)).catch((err: Error) => {
            log(`the evaluation before training failed: ${err.message}`);
            return null;
          })
        : null;
      const reportFile = await writeRunReport({ store, runId, dir: defaultReportDir(runId), viewerUrl });
      log(`report: ${reportFile}`);
      log('stopping the stack');
      result = {
        run: summary,
        evalStart,
        evalEnd,
        heldOut: config.eval.heldOut > 0,
        reportFile,
        temporalUi,
        viewer: viewerRun,
      };
    } finally {
      await store.close();
    }
  } finally {
    await viewer?.close();
    await stack.stop();
  }
  return demoSummary({ ...result, seconds: (Date.now() - started) / 1000 });
}

/**
 * The start of the comparison: the base policy (before any training) on the
 * run's eval tasks, the same fixed draw its last evaluation used, under the
 * base harness and under Rank-1 routing by the run's first profiles. Stored
 * as the run's evaluation after 0 steps, so its report shows it too.
 */
async function evaluateBasePolicy(
  client: Client,
  store: RunStore,
  runId: string,
  config: RunConfig,
  log: (line: string) => void,
): Promise<EvaluationSummary> {
  const profiles = await store.profiles(runId, 1);
  if (!profiles?.baseHarnessId) throw new Error(`run ${runId} has no first behaviour profiles to route its evaluation by`);
  log(`evaluating the base policy ${config.policy.model} (before training) on the same eval tasks`);
  return client.workflow.execute(evaluatePolicy, {
    workflowId: `${runId}/eval-0`,
    taskQueue: TASK_QUEUES.control,
    staticSummary: `evaluation of the base policy (0 steps) for Harness-S run ${config.name}`,
    args: [
      {
        runId,
        config,
        afterSteps: 0,
        policyVersion: config.policy.model,
        profileVersion: 1,
        baseHarnessId: profiles.baseHarnessId,
      },
    ],
  });
}
