/**
 * A run over two SIMULATED inference replicas (each its own sim process part,
 * serving inference only, forgetting runtime-loaded adapters when it restarts
 * as vLLM does) and a SIMULATED trainer, through Temporal with in-process
 * workers (publishVia shared-storage: the control worker's keeper reloads).
 * One replica restarts in the middle of a step, and is down over a publish:
 * the run goes on without a pause or a failure, the restarted replica takes
 * requests again, and at the end both serve the run's last version.
 */
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadSimWorld } from '../../core/envs/sim/world';
import { harnessSRun } from '../../workflows';
import { statusQuery, TASK_QUEUES } from '../../workflows/definitions';
import { startSimCluster, type SimCluster } from '../../sim-cluster/server';
import { silentLogger, startTestStack, type TestStack, uniqueRunId } from './stack';
import { waitFor } from './waiting';

const world = loadSimWorld();
let stack: TestStack;
let trainer: SimCluster;
const replicas: SimCluster[] = [];

/** An inference replica in SIMULATED GPU time (a turn takes a fraction of a second), so a step's rollouts last long enough to be caught. */
const startReplica = (port = 0) =>
  startSimCluster({
    world,
    dataDir: mkdtempSync(path.join(os.tmpdir(), 'hs-replica-')),
    logger: silentLogger,
    port,
    serve: 'inference',
    latency: { profile: 'balanced', speedup: 20 },
  });

beforeAll(async () => {
  stack = await startTestStack();
  trainer = await startSimCluster({
    world,
    dataDir: mkdtempSync(path.join(os.tmpdir(), 'hs-trainer-')),
    logger: silentLogger,
    serve: 'trainer',
    trainerOpDelayMs: 50,
  });
  replicas.push(await startReplica(), await startReplica());
});

afterAll(async () => {
  await stack?.close();
  for (const r of replicas) await r.close();
  await trainer?.close();
});

async function served(replica: SimCluster): Promise<number> {
  const body = (await (await fetch(`${replica.url}/sim/requests`)).json()) as { chatCompletions: { total: number } };
  return body.chatCompletions.total;
}

async function models(replica: SimCluster): Promise<string[]> {
  const body = (await (await fetch(`${replica.url}/v1/models`)).json()) as { data: Array<{ id: string }> };
  return body.data.map((m) => m.id);
}

test('a replica restarted mid-step and down over a publish: the run goes on, the replica comes back into rotation, and both serve the last version', async () => {
  const runId = uniqueRunId('replicas');
  const servers = replicas.map((r) => `${r.url}/v1`);
  const handle = await stack.client.workflow.start(harnessSRun, {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [
      {
        config: stack.config({
          steps: 5,
          policy: { baseUrl: servers[0], inferenceServers: servers },
          trainer: { baseUrl: trainer.url, pollSeconds: 0.02 },
          rollout: { tasksPerStep: 6, groupSize: 4, maxTurns: 5, concurrency: 4 },
        }),
      },
    ],
  });
  /** Step `step` samples, and has stored a rollout. */
  const inRollouts = (step: number) =>
    waitFor(`step ${step}'s rollouts`, async () => {
      const s = await handle.query(statusQuery);
      if (!s.inFlight?.some((f) => f.step === step && f.phase === 'rollouts')) return false;
      const { rows } = await stack.store.queryForTests(
        "SELECT count(*)::int AS n FROM trajectories WHERE run_id = $1 AND phase = 'train' AND step = $2",
        [runId, step],
      );
      return rows[0].n > 0;
    });

  // Step 1: the second replica restarts, forgetting the version it serves.
  await inRollouts(1);
  const port = replicas[1].port;
  await replicas[1].close();
  replicas[1] = await startReplica(port);
  await waitFor('the restarted replica to take requests', async () => (await served(replicas[1])) > 0);

  // Step 2: it is down over step 2's publish, and back in step 3.
  await inRollouts(2);
  await replicas[1].close();
  await waitFor('step 2 to be published', async () => (await stack.store.steps(runId)).length >= 3);
  replicas[1] = await startReplica(port);

  const summary = await handle.result();
  expect(summary.stepsCompleted).toBe(5);
  const steps = await stack.store.steps(runId);
  const step2 = steps.find((s) => s.step === 2)!.policyVersion;
  // Published while the second replica was down: live on the first, pending on the second until it came back.
  expect(await stack.store.replicas.get(servers[0], step2)).toMatchObject({ state: 'ready' });
  const last = steps.at(-1)!.policyVersion;
  await waitFor('both replicas to serve the last version', async () =>
    (await Promise.all(replicas.map(models))).every((m) => m.includes(last)),
  );
  for (const server of servers) expect(await stack.store.replicas.get(server, last)).toMatchObject({ state: 'ready' });
  expect(await stack.store.countTrajectories(runId)).toBe(steps.reduce((n, s) => n + s.summary.baseRollouts + s.summary.rescueRollouts, 0));
  const status = await handle.query(statusQuery);
  expect(status.replicas?.map((r) => r.replica).sort()).toEqual([...servers].sort());
  expect(status.replicas?.find((r) => r.replica === servers[0])).toMatchObject({ policyVersion: last });
});
