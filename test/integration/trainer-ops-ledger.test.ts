/**
 * The seq_id ledger in PostgreSQL: what makes every trainer op of a step
 * exactly-once under retries, and lets an op the trainer failed be sent anew.
 */
import { runLedgerOp, STEP_OPS } from '../../core/trainer/trainer-ops';
import { TrainerError } from '../../core/trainer/tinker/client';
import { RunStore } from '../../core/store/run-store';
import { TEST_DATABASE_URL } from './env';
import { uniqueRunId } from './stack';

let store: RunStore;
beforeAll(() => {
  store = RunStore.connect(TEST_DATABASE_URL);
});
afterAll(() => store.close());

async function newRun(): Promise<string> {
  const runId = uniqueRunId('ledger');
  await store.registerRun({ runId, name: 'ledger', env: 'sim', config: {}, incarnation: 'i1', takeOver: false });
  return runId;
}

test("a step's ops get the model's next seq_ids in the order they are first sent, and the same ones when sent again", async () => {
  const runId = await newRun();
  const model = `model-${runId}`;
  const seq = (step: number, op: string) => store.trainerOpSeq({ runId, step, op, modelId: model });
  expect((await seq(0, STEP_OPS.forwardBackward(0))).seqId).toBe(1);
  expect((await seq(0, STEP_OPS.optimStep)).seqId).toBe(2);
  expect(await store.trainerOpSeq({ runId, step: 0, op: STEP_OPS.saveWeights, modelId: model, checkpointName: 'step-0' })).toEqual({
    seqId: 3,
    checkpointName: 'step-0',
  });
  // A retried step: the same seq_ids, in any order.
  expect((await seq(0, STEP_OPS.optimStep)).seqId).toBe(2);
  expect((await seq(0, STEP_OPS.forwardBackward(0))).seqId).toBe(1);
  // The next step goes on from the model's highest; another model starts at 1.
  expect((await seq(1, STEP_OPS.forwardBackward(0))).seqId).toBe(4);
  expect((await store.trainerOpSeq({ runId, step: 1, op: STEP_OPS.optimStep, modelId: `${model}-other` })).seqId).toBe(1);
});

test('concurrent attempts of one op get one seq_id; concurrent ops get distinct ones', async () => {
  const runId = await newRun();
  const model = `model-${runId}`;
  const same = await Promise.all(
    Array.from({ length: 6 }, () => store.trainerOpSeq({ runId, step: 0, op: STEP_OPS.optimStep, modelId: model })),
  );
  expect(new Set(same.map((s) => s.seqId)).size).toBe(1);
  const distinct = await Promise.all(
    Array.from({ length: 6 }, (_, c) => store.trainerOpSeq({ runId, step: 1, op: STEP_OPS.forwardBackward(c), modelId: model })),
  );
  expect(distinct.map((s) => s.seqId).sort((a, b) => a - b)).toEqual([2, 3, 4, 5, 6, 7]);
});

test('an op whose future failed on the trainer is sent again under a new seq_id (and a new checkpoint name); one with an unknown outcome under the same', async () => {
  const runId = await newRun();
  const ledger = { store, runId, step: 3, modelId: `model-${runId}` };
  const sent: Array<[number, string | null]> = [];
  const attempt = (fail: TrainerError | null) =>
    runLedgerOp(
      ledger,
      STEP_OPS.saveWeights,
      async (seqId, name) => {
        sent.push([seqId, name]);
        if (fail) throw fail;
        return `tinker://m/${name}`;
      },
      'step-3',
    );

  await expect(attempt(new TrainerError('trainer unreachable', 'server'))).rejects.toThrow('unreachable');
  await expect(attempt(new TrainerError('disk full', 'server', true))).rejects.toThrow('disk full');
  await expect(attempt(null)).resolves.toBe('tinker://m/step-3-s2');
  await expect(attempt(null)).resolves.toBe('tinker://m/step-3-s2');
  expect(sent).toEqual([
    [1, 'step-3'],
    [1, 'step-3'],
    [2, 'step-3-s2'],
    [2, 'step-3-s2'],
  ]);
  expect(await store.trainerOps(runId)).toEqual([
    expect.objectContaining({ seqId: 1, op: STEP_OPS.saveWeights, checkpointName: 'step-3', failed: true, failure: 'disk full' }),
    expect.objectContaining({ seqId: 2, op: STEP_OPS.saveWeights, checkpointName: 'step-3-s2', failed: false, failure: null }),
  ]);
});
