import { assembleTokenSamples } from '../../core/policy/trajectory';
import { buildDatum, countResponseTokens } from '../../core/rl/datums';

// Turn 2's prompt = turn 1's prompt + completion + observation tokens [50, 51].
const turn1 = { promptTokenIds: [1, 2, 3], tokenIds: [10, 11], logprobs: [-0.1, -0.2] };
const turn2 = { promptTokenIds: [1, 2, 3, 10, 11, 50, 51], tokenIds: [12, 13], logprobs: [-0.3, -0.4] };

test('turns whose prompts extend each other make one sample, observation tokens masked out', () => {
  const [sample, ...rest] = assembleTokenSamples([turn1, turn2]);
  expect(rest).toHaveLength(0);
  expect(sample.promptIds).toEqual([1, 2, 3]);
  expect(sample.responseIds).toEqual([10, 11, 50, 51, 12, 13]);
  expect(sample.responseMask).toEqual([1, 1, 0, 0, 1, 1]);
  expect(sample.responseLogprobs).toEqual([-0.1, -0.2, 0, 0, -0.3, -0.4]);
});

test('a turn whose prompt does not extend the previous one splits the trajectory into one sample per turn', () => {
  const rewritten = { ...turn2, promptTokenIds: [1, 2, 99, 10, 11] };
  const samples = assembleTokenSamples([turn1, rewritten]);
  expect(samples).toHaveLength(2);
  expect(samples[1].promptIds).toEqual([1, 2, 99, 10, 11]);
  expect(samples[1].responseMask).toEqual([1, 1]);
});

test('a datum shifts tokens by one and puts advantages only on model tokens, normalised by the batch token count', () => {
  const [sample] = assembleTokenSamples([turn1, turn2]);
  expect(countResponseTokens([sample])).toBe(4);
  const datum = buildDatum(sample, 2, 4);
  const tokens = [1, 2, 3, 10, 11, 50, 51, 12, 13];
  expect(datum.model_input.chunks[0].tokens).toEqual(tokens.slice(0, -1));
  expect(datum.loss_fn_inputs.target_tokens.data).toEqual(tokens.slice(1));
  // Targets: 2, 3, 10, 11, 50, 51, 12, 13 -> model tokens are 10, 11, 12, 13.
  expect(datum.loss_fn_inputs.advantages.data).toEqual([0, 0, 0.5, 0.5, 0, 0, 0.5, 0.5]);
  expect(datum.loss_fn_inputs.logprobs.data).toEqual([0, 0, -0.1, -0.2, 0, 0, -0.3, -0.4]);
  expect(datum.loss_fn_inputs.target_tokens.shape).toEqual([8]);
});
