import {
  decodeForwardBackwardRequest,
  decodeForwardBackwardResult,
  decodeSampleResult,
  encodeForwardBackwardRequest,
  encodeForwardBackwardResult,
  encodeSampleResult,
  errorMessage,
  parseTinkerPath,
} from '../../core/trainer/tinker/wire';

test('a forward_backward body survives protobuf: tokens as int32, int64 targets, float32 log-probs, seq_id and loss', () => {
  const body = {
    model_id: 'model_1',
    seq_id: 42,
    loss_fn: 'importance_sampling',
    loss_fn_config: null,
    forward_only: false,
    data: [
      {
        model_input: { chunks: [{ type: 'encoded_text' as const, tokens: [1, 2, 70000] }] },
        loss_fn_inputs: {
          target_tokens: { data: [2, 70000, 5], dtype: 'int64' as const, shape: [3] },
          logprobs: { data: [-0.5, -1.25, 0], dtype: 'float32' as const, shape: [3] },
        },
      },
    ],
  };
  expect(decodeForwardBackwardRequest(encodeForwardBackwardRequest(body))).toEqual(body);
});

test('seq_id 0 on the wire means none, and an empty loss_fn_config is none', () => {
  const bytes = encodeForwardBackwardRequest({
    model_id: 'm',
    seq_id: null,
    loss_fn: 'cross_entropy',
    loss_fn_config: {},
    forward_only: true,
    data: [],
  });
  expect(decodeForwardBackwardRequest(bytes)).toMatchObject({ seq_id: null, loss_fn_config: null, forward_only: true });
});

test('forward_backward results keep each datum its own slice of the batched tensor, including an empty one', () => {
  const result = {
    loss_fn_output_type: 'TensorData',
    metrics: { 'loss:sum': -1.5 },
    loss_fn_outputs: [
      { logprobs: { data: [-1, -2], dtype: 'float32' as const } },
      { logprobs: { data: [], dtype: 'float32' as const } },
      { logprobs: { data: [-3.5], dtype: 'float32' as const } },
    ],
  };
  expect(decodeForwardBackwardResult(encodeForwardBackwardResult(result))).toEqual(result);
});

test('sample results carry tokens, log-probs, stop reasons and undefined prompt log-probs as null', () => {
  const result = {
    sequences: [
      { stop_reason: 'length' as const, tokens: [4, 5], logprobs: [-0.25, -0.5] },
      { stop_reason: 'stop' as const, tokens: [6], logprobs: [-1] },
    ],
    prompt_logprobs: [null, -2, -0.5],
  };
  expect(decodeSampleResult(encodeSampleResult(result))).toEqual(result);
});

test('a body that is not protobuf is refused, saying what was being read', () => {
  expect(() => decodeForwardBackwardResult(Buffer.from([0xff, 0xff, 0xff]))).toThrow(
    /forward_backward result: not a valid protobuf ForwardBackwardOutput/,
  );
});

test('tinker paths in SkyRL form and in hosted Tinker form are read; anything else is not a path', () => {
  expect(parseTinkerPath('tinker://model_1/step-3')).toEqual({ modelId: 'model_1', kind: '', name: 'step-3' });
  expect(parseTinkerPath('tinker://run-9/sampler_weights/step-3')).toEqual({ modelId: 'run-9', kind: 'sampler_weights', name: 'step-3' });
  expect(parseTinkerPath('/tmp/adapter')).toBeNull();
  expect(parseTinkerPath('tinker://a/b/c/d')).toBeNull();
});

test('error messages are read from FastAPI detail strings and lists, and from {error} bodies', () => {
  expect(errorMessage({ detail: 'Session not found' })).toBe('Session not found');
  expect(errorMessage({ detail: [{ loc: ['body', 'session_id'], msg: 'Field required' }] })).toBe('body.session_id: Field required');
  expect(errorMessage({ error: 'rank too large', category: 'user' })).toBe('rank too large');
  expect(errorMessage({ something: 1 })).toBeUndefined();
});
