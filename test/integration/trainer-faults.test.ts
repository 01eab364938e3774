/**
 * A trainer that fails ops (a disk write fails on the SIMULATED trainer, as a
 * full disk would on a real one): the trainer answers the op's future with a
 * server failure and keeps answering its seq_id with it, as SkyRL does. The
 * run goes on: the retried step sends the failed op under a new seq_id (the
 * save under a new checkpoint name), and the model gets one optimizer step
 * per training step.
 */
import { harnessSRun } from '../../workflows';
import { TASK_QUEUES } from '../../workflows/definitions';
import { STEP_OPS } from '../../core/trainer/trainer-ops';
import { TinkerClient } from '../../core/trainer/tinker/client';
import { loadSimWorld } from '../../core/envs/sim/world';
import { startTestStack, type TestStack, uniqueRunId } from './stack';

let stack: TestStack;
beforeAll(async () => {
  stack = await startTestStack();
});
afterAll(() => stack.close());

test('an optim_step and a save that fail on the trainer are sent again under new seq_ids; the run trains exactly once per step', async () => {
  const store = stack.sim.store;
  const writeModel = store.writeTrainingModel.bind(store);
  const writeWeights = store.writeSamplerWeightsOnce.bind(store);
  let optimFailures = 1;
  let saveFailures = 1;
  store.writeTrainingModel = async (record) => {
    if (record.optimSteps === 1 && optimFailures-- > 0) throw new Error('ENOSPC: no space left on device (optim_step)');
    return writeModel(record);
  };
  store.writeSamplerWeightsOnce = async (record, lora) => {
    if (saveFailures-- > 0) throw new Error('ENOSPC: no space left on device (sampler weights)');
    return writeWeights(record, lora);
  };
  try {
    const runId = uniqueRunId('trainer-faults');
    await stack.client.workflow.execute(harnessSRun, {
      taskQueue: TASK_QUEUES.control,
      workflowId: runId,
      args: [{ config: stack.config({ steps: 2 }) }],
    });
    const modelId = (await stack.store.getRun(runId))!.trainerModelId!;
    const ops = await stack.store.trainerOps(runId);
    const failed = ops.filter((o) => o.failed);
    expect(failed.map((o) => o.op).sort()).toEqual([STEP_OPS.optimStep, STEP_OPS.saveWeights].sort());
    expect(failed.every((o) => /ENOSPC/.test(o.failure ?? ''))).toBe(true);
    // Every op that went through did so once, under seq_ids that only grow.
    const live = ops.filter((o) => !o.failed);
    expect(new Set(live.map((o) => `${o.step}/${o.op}`)).size).toBe(live.length);
    expect(ops.map((o) => o.seqId)).toEqual([...ops.map((o) => o.seqId)].sort((a, b) => a - b));

    const firstSave = failed.find((o) => o.op === STEP_OPS.saveWeights)!;
    const resaved = live.find((o) => o.op === STEP_OPS.saveWeights && o.step === firstSave.step)!;
    expect(firstSave.checkpointName).toBe(`step-${firstSave.step}`);
    expect(resaved.checkpointName).toBe(`step-${firstSave.step}-s${resaved.seqId}`);
    expect((await stack.store.trainerStep(runId, firstSave.step))!.samplerPath).toBe(`tinker://${modelId}/${resaved.checkpointName}`);

    const info = (await (
      await fetch(`${stack.sim.url}/api/v1/get_info`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model_id: modelId }),
      })
    ).json()) as { optim_steps: number };
    expect(info.optim_steps).toBe(2);
  } finally {
    store.writeTrainingModel = writeModel;
    store.writeSamplerWeightsOnce = writeWeights;
  }
});

test('a save retried under a name whose save failed (409) is reported as failed, not waited on', async () => {
  const store = stack.sim.store;
  const writeWeights = store.writeSamplerWeightsOnce.bind(store);
  const client = new TinkerClient({ baseUrl: stack.sim.url, apiKey: 'tml-test', pollSeconds: 0.02 });
  const sessionId = await client.createSession(['test'], {});
  const modelId = await client.createModel({
    sessionId,
    modelSeqId: 0,
    baseModel: loadSimWorld().model.name,
    lora: { rank: 8, train_attn: true, train_mlp: true, train_unembed: false },
  });
  store.writeSamplerWeightsOnce = async () => {
    throw new Error('ENOSPC: no space left on device');
  };
  try {
    const failed = await client.saveWeightsForSampler({ modelId, seqId: 1, name: 'lost' }).catch((err: unknown) => err);
    expect(failed).toMatchObject({ category: 'server', opFailed: true, message: expect.stringContaining('ENOSPC') });
  } finally {
    store.writeSamplerWeightsOnce = writeWeights;
  }
  // A worker that never saw that answer sends the save again: the name is taken (409) by a checkpoint that failed.
  const started = Date.now();
  const again = await client.saveWeightsForSampler({ modelId, seqId: 2, name: 'lost', waitSeconds: 60 }).catch((err: unknown) => err);
  expect(again).toMatchObject({
    category: 'server',
    opFailed: true,
    message: expect.stringContaining('Checkpoint creation failed: ENOSPC'),
  });
  expect(Date.now() - started).toBeLessThan(5000);
});

test('a training-state save that fails on the trainer is saved again under a new name, and the run records that checkpoint once', async () => {
  const store = stack.sim.store;
  const writeState = store.writeTrainingState.bind(store);
  let failures = 1;
  store.writeTrainingState = async (record) => {
    if (failures-- > 0) throw new Error('ENOSPC: no space left on device (training state)');
    return writeState(record);
  };
  try {
    const runId = uniqueRunId('state-save-fault');
    await stack.client.workflow.execute(harnessSRun, {
      taskQueue: TASK_QUEUES.control,
      workflowId: runId,
      args: [{ config: stack.config({ steps: 2, checkpoint: { every: 1 } }) }],
    });
    const saves = (await stack.store.trainerOps(runId)).filter((o) => o.op === STEP_OPS.saveState);
    const failed = saves.filter((o) => o.failed);
    expect(failed.map((o) => [o.step, o.checkpointName])).toEqual([[0, 'state-0']]);
    expect(failed[0].failure).toMatch(/ENOSPC/);
    const resaved = saves.find((o) => o.step === 0 && !o.failed)!;
    expect(resaved.checkpointName).toBe(`state-0-s${resaved.seqId}`);
    const modelId = (await stack.store.getRun(runId))!.trainerModelId!;
    expect((await stack.store.checkpoints(runId)).map((c) => [c.step, c.path])).toEqual([
      [0, `tinker://${modelId}/weights/${resaved.checkpointName}`],
      [1, `tinker://${modelId}/weights/state-1`],
    ]);
    // What the run recorded is what the trainer has.
    const listed = await new TinkerClient({ baseUrl: stack.sim.url, apiKey: 'EMPTY', pollSeconds: 0.02 }).listCheckpoints(modelId);
    expect(
      listed
        .filter((c) => c.checkpoint_type === 'training')
        .map((c) => c.tinker_path)
        .sort(),
    ).toEqual((await stack.store.checkpoints(runId)).map((c) => c.path).sort());
  } finally {
    store.writeTrainingState = writeState;
  }
});
