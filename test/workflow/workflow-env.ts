/**
 * A Temporal dev server of its own (the project's `temporal` CLI, a free
 * port, nothing on disk) with real workers on every task queue, whose
 * activities are the fakes of fake-activities.ts. Workflow code runs as in
 * production; only the activities are stand-ins.
 */
import { readFileSync } from 'node:fs';
import type { Client } from '@temporalio/client';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import type { RunConfigInput } from '../../core/config';
import { findTemporalCli } from '../../infra/temporal-cli';
import { SEARCH_ATTRIBUTES, TASK_QUEUES } from '../../workflows/definitions';
import { createFakeActivities, type FakeActivities } from './fake-activities';

export interface WorkflowTestEnv {
  client: Client;
  fakes: FakeActivities;
  close(): Promise<void>;
}

export interface WorkflowTestEnvOptions {
  /** History length at which the server suggests continue-as-new (its default is thousands of events). */
  suggestContinueAsNewAfter?: number;
}

let runtimeInstalled = false;

export async function startWorkflowTestEnv(options: WorkflowTestEnvOptions = {}): Promise<WorkflowTestEnv> {
  const cli = findTemporalCli();
  if (!cli) throw new Error('no Temporal CLI found: run `npx tsx cli/main.ts setup`, or put `temporal` on PATH, or set TEMPORAL_CLI_PATH');
  if (!runtimeInstalled) {
    // Workers log every workflow task failure they retry; the tests assert on outcomes instead.
    Runtime.install({ logger: new DefaultLogger('ERROR') });
    runtimeInstalled = true;
  }
  const dynamicConfig =
    options.suggestContinueAsNewAfter === undefined
      ? []
      : ['--dynamic-config-value', `limit.historyCount.suggestContinueAsNew=${options.suggestContinueAsNewAfter}`];
  const env = await TestWorkflowEnvironment.createLocal({
    server: {
      executable: { type: 'existing-path', path: cli.path },
      searchAttributes: Object.values(SEARCH_ATTRIBUTES),
      extraArgs: dynamicConfig,
    },
  });
  const fakes = createFakeActivities();
  const bundleFile = process.env.HARNESS_S_WORKFLOW_BUNDLE;
  const workers = await Promise.all(
    Object.values(TASK_QUEUES).map((taskQueue) =>
      Worker.create({
        connection: env.nativeConnection,
        taskQueue,
        activities: fakes.activities,
        // Every workflow (the run and its children) runs on the control queue: the bundle `npm test` built once, or
        // bundled here (a file run alone).
        ...(taskQueue === TASK_QUEUES.control &&
          (bundleFile
            ? { workflowBundle: JSON.parse(readFileSync(bundleFile, 'utf8')) as { code: string } }
            : { workflowsPath: require.resolve('../../workflows') })),
      }),
    ),
  );
  const running = Promise.all(workers.map((worker) => worker.run()));
  return {
    client: env.client,
    fakes,
    async close() {
      fakes.releaseAll();
      for (const worker of workers) worker.shutdown();
      await running;
      await env.teardown();
    },
  };
}

/** Polls `probe` until it returns something truthy. */
export async function waitFor<T>(what: string, probe: () => Promise<T | null | undefined | false>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(50);
  }
}

/** A small run for the fakes: 2 tasks a step, groups of 4, rescue by 2 siblings, no re-anchoring, no evaluation. */
export function smallRunConfig(overrides: Partial<RunConfigInput> = {}): RunConfigInput {
  return {
    name: 'workflow-test',
    steps: 3,
    rollout: { tasksPerStep: 2, groupSize: 4 },
    rescue: { k: 2 },
    router: { reanchorEvery: 0 },
    eval: { enabled: false },
    ...overrides,
  };
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
