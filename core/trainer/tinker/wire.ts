/**
 * The Tinker REST API's wire format, defined once for the client and for the
 * stand-in servers (the sim trainer, the tests' recording trainer): JSON bodies
 * and replies as zod schemas, and the protobuf bodies (forward_backward
 * requests, forward/forward_backward/sample results) through tinker.proto.
 *
 * Shapes follow what the official tinker SDK (>= 0.25) sends and what its
 * servers answer; unknown fields in replies are ignored, as the SDK does.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import protobuf from 'protobufjs';
import { z } from 'zod';

export const PROTOBUF_CONTENT_TYPE = 'application/x-protobuf';

/** The SDK release whose wire format this module speaks; sent as `sdk_version` when a session opens. */
export const TINKER_SDK_WIRE_VERSION = '0.25.0';

// ---------------------------------------------------------------- JSON bodies

export const LoraConfig = z.object({
  rank: z.number().int().positive(),
  seed: z.number().int().nullish(),
  train_attn: z.boolean().default(true),
  train_mlp: z.boolean().default(true),
  train_unembed: z.boolean().default(false),
});
export type LoraConfig = z.infer<typeof LoraConfig>;

export const CreateSessionRequest = z.object({
  tags: z.array(z.string()),
  user_metadata: z.record(z.string(), z.unknown()).nullish(),
  sdk_version: z.string(),
  project_id: z.string().nullish(),
  type: z.literal('create_session').optional(),
});
export const CreateSessionResponse = z.object({
  session_id: z.string().min(1),
  info_message: z.string().nullish(),
  warning_message: z.string().nullish(),
  error_message: z.string().nullish(),
});

export const SessionHeartbeatRequest = z.object({ session_id: z.string().min(1), type: z.literal('session_heartbeat').optional() });

export const CreateModelRequest = z.object({
  session_id: z.string().min(1),
  model_seq_id: z.number().int().min(0).optional(),
  base_model: z.string().min(1),
  user_metadata: z.record(z.string(), z.unknown()).nullish(),
  lora_config: LoraConfig,
  type: z.literal('create_model').optional(),
});
export type CreateModelRequest = z.input<typeof CreateModelRequest>;

/** Tinker's AdamParams with its defaults; grad_clip_norm 0 disables clipping. */
export const AdamParams = z.object({
  learning_rate: z.number().min(0).default(1e-4),
  beta1: z.number().min(0).lt(1).default(0.9),
  beta2: z.number().min(0).lt(1).default(0.95),
  eps: z.number().positive().default(1e-12),
  weight_decay: z.number().min(0).default(0),
  grad_clip_norm: z.number().min(0).default(0),
});
export type AdamParams = z.infer<typeof AdamParams>;

export const OptimStepRequest = z.object({
  model_id: z.string().min(1),
  adam_params: AdamParams,
  seq_id: z.number().int().positive().nullish(),
  type: z.literal('optim_step').optional(),
});

/** Checkpoint names become file names on the trainer: SkyRL's pattern. */
export const CHECKPOINT_NAME = /^[A-Za-z0-9_-]{1,255}$/;

export const SaveWeightsForSamplerRequest = z.object({
  model_id: z.string().min(1),
  path: z.string().regex(CHECKPOINT_NAME, 'use letters, digits, "_" and "-" (e.g. "step-3")'),
  seq_id: z.number().int().positive().nullish(),
  type: z.literal('save_weights_for_sampler').optional(),
});

/** The training state (weights and optimizer state) saved under a checkpoint name: the SDK's save_state. */
export const SaveWeightsRequest = z.object({
  model_id: z.string().min(1),
  path: z.string().regex(CHECKPOINT_NAME, 'use letters, digits, "_" and "-" (e.g. "state-3")'),
  seq_id: z.number().int().positive().nullish(),
  type: z.literal('save_weights').nullish(),
});

/** A training checkpoint loaded into a model, as its first request: the SDK's load_state (optimizer: load_state_with_optimizer). */
export const LoadWeightsRequest = z.object({
  model_id: z.string().min(1),
  path: z.string().min(1),
  optimizer: z.boolean().default(true),
  seq_id: z.number().int().positive().nullish(),
  type: z.literal('load_weights').nullish(),
});

export const WeightsInfoRequest = z.object({ tinker_path: z.string() });
export const WeightsInfoResponse = z.object({ base_model: z.string(), is_lora: z.boolean(), lora_rank: z.number().int().nullish() });

export const UnloadModelRequest = z.object({ model_id: z.string().min(1), type: z.string().nullish() });

export const RetrieveFutureRequest = z.object({ request_id: z.string().min(1), allow_metadata_only: z.boolean().optional() });

/** What every future-returning op answers. */
export const FutureResponse = z.object({
  request_id: z.coerce.string().min(1),
  future_id: z.coerce.string().nullish(),
  model_id: z.string().nullish(),
});
export type FutureResponse = z.infer<typeof FutureResponse>;

/** create_model answers with the model id at once, and a future for its creation. */
export const CreateModelResponse = FutureResponse.extend({ model_id: z.string().min(1) });

/** A future that is not done: HTTP 408, or 200 with this body. */
export const TryAgain = z.object({ type: z.literal('try_again'), queue_state: z.string().nullish() });

/** A future that failed, as a 200 JSON body (HTTP 400 `{detail}` is the other form). */
export const RequestFailed = z.object({ error: z.string(), category: z.string().nullish() });

export const CreateModelResult = z.object({ model_id: z.string().min(1), base_model: z.string().nullish() });
export const OptimStepResult = z.object({ metrics: z.record(z.string(), z.number().nullable()).nullish() });
export const SaveWeightsForSamplerResult = z.object({ path: z.string().regex(/^tinker:\/\//, 'must be a tinker:// path') });
export const SaveWeightsResult = z.object({
  path: z.string().regex(/^tinker:\/\/[^/]+\/weights\/[^/]+$/, 'must be a tinker://<model>/weights/<name> path'),
});

export const Checkpoint = z.object({
  checkpoint_id: z.string(),
  checkpoint_type: z.enum(['training', 'sampler']),
  tinker_path: z.string(),
});
export const ListCheckpointsResponse = z.object({ checkpoints: z.array(Checkpoint) });

/** The archive endpoint's JSON form (the other is a 302 to the download). */
export const CheckpointArchiveUrlResponse = z.object({ url: z.string().min(1) });

/** FastAPI's error bodies: `{detail: "..."}` or, for a body that fails validation, `{detail: [{loc, msg}]}`. */
export const ErrorDetail = z.object({
  detail: z.union([z.string(), z.array(z.object({ loc: z.array(z.union([z.string(), z.number()])).optional(), msg: z.string() }))]),
});

/** The message of an error body, whatever its form; undefined when it has none. */
export function errorMessage(body: unknown): string | undefined {
  const parsed = ErrorDetail.safeParse(body);
  if (parsed.success) {
    const { detail } = parsed.data;
    return typeof detail === 'string' ? detail : detail.map((d) => (d.loc ? `${d.loc.join('.')}: ${d.msg}` : d.msg)).join('; ');
  }
  const failed = RequestFailed.safeParse(body);
  return failed.success ? failed.data.error : undefined;
}

// ------------------------------------------------------------ tinker:// paths

export interface TinkerPath {
  /** The training run (model) id. */
  modelId: string;
  /** 'sampler_weights' or 'weights' when the path names it (hosted Tinker); '' for SkyRL's two-part form. */
  kind: string;
  name: string;
}

/** `tinker://<model>/<name>` (SkyRL) or `tinker://<model>/<kind>/<name>` (hosted Tinker); null for anything else. */
export function parseTinkerPath(uri: string): TinkerPath | null {
  const match = /^tinker:\/\/([^/]+)\/(?:([^/]+)\/)?([^/]+)$/.exec(uri);
  if (!match) return null;
  return { modelId: match[1], kind: match[2] ?? '', name: match[3] };
}

// ------------------------------------------------------------------- protobuf

/** A tensor as the client builds it and the servers decode it. */
export interface WireTensor {
  data: number[];
  dtype: 'int64' | 'float32';
  shape?: number[];
}

export interface WireDatum {
  model_input: { chunks: Array<{ type?: 'encoded_text'; tokens: number[] }> };
  loss_fn_inputs: Record<string, WireTensor>;
}

export interface ForwardBackwardBody {
  model_id: string;
  /** null: none (0 on the wire). */
  seq_id: number | null;
  data: WireDatum[];
  loss_fn: string;
  loss_fn_config: Record<string, number> | null;
  forward_only: boolean;
}

export interface ForwardBackwardResult {
  loss_fn_output_type: string;
  /** Per datum: output name (`logprobs`, `elementwise_loss`, ...) -> values. */
  loss_fn_outputs: Array<Record<string, WireTensor>>;
  metrics: Record<string, number>;
}

export interface SampledSequence {
  stop_reason: 'stop' | 'length';
  tokens: number[];
  logprobs: number[] | null;
}

export interface SampleResult {
  sequences: SampledSequence[];
  /** One per prompt token; null where undefined (the first). */
  prompt_logprobs: Array<number | null> | null;
}

const DTYPE = { float32: 1, int64: 2, int32: 3 } as const;

let root: protobuf.Root | undefined;
function messageType(name: string): protobuf.Type {
  root ??= protobuf.parse(readFileSync(path.join(__dirname, 'tinker.proto'), 'utf8'), { keepCase: true }).root;
  return root.lookupType(`tinker_public.${name}`);
}

/** A malformed protobuf body or one that breaks the wire contract; says what and where. */
export class TinkerWireError extends Error {
  override name = 'TinkerWireError';
}

function packInt32(values: readonly number[]): Uint8Array {
  const buffer = Buffer.alloc(values.length * 4);
  values.forEach((v, i) => buffer.writeInt32LE(v, i * 4));
  return buffer;
}

function packTensor(tensor: WireTensor): Uint8Array {
  if (tensor.dtype === 'float32') {
    const buffer = Buffer.alloc(tensor.data.length * 4);
    tensor.data.forEach((v, i) => buffer.writeFloatLE(v, i * 4));
    return buffer;
  }
  const buffer = Buffer.alloc(tensor.data.length * 8);
  tensor.data.forEach((v, i) => buffer.writeBigInt64LE(BigInt(Math.trunc(v)), i * 8));
  return buffer;
}

function unpack(bytes: Uint8Array, dtype: number, where: string): number[] {
  const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const size = dtype === DTYPE.int64 ? 8 : dtype === DTYPE.float32 || dtype === DTYPE.int32 ? 4 : 0;
  if (size === 0) throw new TinkerWireError(`${where}: unsupported dtype ${dtype} (this client reads float32, int64 and int32)`);
  if (buffer.length % size !== 0)
    throw new TinkerWireError(`${where}: ${buffer.length} bytes is not a whole number of ${size}-byte values`);
  const values = new Array<number>(buffer.length / size);
  for (let i = 0; i < values.length; i++) {
    values[i] =
      dtype === DTYPE.int64
        ? Number(buffer.readBigInt64LE(i * size))
        : dtype === DTYPE.float32
          ? buffer.readFloatLE(i * size)
          : buffer.readInt32LE(i * size);
  }
  return values;
}

const dtypeName = (dtype: number, where: string): WireTensor['dtype'] => {
  if (dtype === DTYPE.float32) return 'float32';
  if (dtype === DTYPE.int64 || dtype === DTYPE.int32) return 'int64';
  throw new TinkerWireError(`${where}: unsupported dtype ${dtype}`);
};

function decode(name: string, bytes: Uint8Array, what: string): Record<string, unknown> {
  try {
    const type = messageType(name);
    return type.toObject(type.decode(bytes), { longs: Number, defaults: true, arrays: true, objects: true, oneofs: true }) as Record<
      string,
      unknown
    >;
  } catch (err) {
    throw new TinkerWireError(`${what}: not a valid protobuf ${name}: ${(err as Error).message}`);
  }
}

export function encodeForwardBackwardRequest(body: ForwardBackwardBody): Uint8Array {
  const type = messageType('ForwardBackwardRequest');
  return type
    .encode(
      type.fromObject({
        model_id: body.model_id,
        seq_id: body.seq_id ?? 0,
        loss_fn: body.loss_fn,
        loss_fn_config: body.loss_fn_config ?? {},
        forward_only: body.forward_only,
        data: body.data.map((datum) => ({
          model_input: datum.model_input.chunks.map((chunk) => ({ encoded_text: { tokens: packInt32(chunk.tokens) } })),
          loss_fn_inputs: Object.fromEntries(
            Object.entries(datum.loss_fn_inputs).map(([key, tensor]) => [
              key,
              { dense: packTensor(tensor), dtype: DTYPE[tensor.dtype], shape: tensor.shape ?? [tensor.data.length] },
            ]),
          ),
        })),
      }),
    )
    .finish();
}

interface RawTensor {
  dense?: Uint8Array;
  sparse_csr?: unknown;
  dtype: number;
  shape: number[];
}

export function decodeForwardBackwardRequest(bytes: Uint8Array): ForwardBackwardBody {
  const raw = decode('ForwardBackwardRequest', bytes, 'forward_backward body') as {
    model_id: string;
    seq_id: number;
    loss_fn: string;
    loss_fn_config: Record<string, number>;
    forward_only: boolean;
    data: Array<{ model_input: Array<{ encoded_text?: { tokens: Uint8Array } }>; loss_fn_inputs: Record<string, RawTensor> }>;
  };
  return {
    model_id: raw.model_id,
    seq_id: raw.seq_id === 0 ? null : raw.seq_id,
    loss_fn: raw.loss_fn,
    loss_fn_config: Object.keys(raw.loss_fn_config).length > 0 ? raw.loss_fn_config : null,
    forward_only: raw.forward_only,
    data: raw.data.map((datum, i) => ({
      model_input: {
        chunks: datum.model_input.map((chunk, j) => {
          if (!chunk.encoded_text) throw new TinkerWireError(`data.${i}.model_input.${j}: only encoded_text chunks are supported`);
          return {
            type: 'encoded_text' as const,
            tokens: unpack(chunk.encoded_text.tokens, DTYPE.int32, `data.${i}.model_input.${j}.tokens`),
          };
        }),
      },
      loss_fn_inputs: Object.fromEntries(
        Object.entries(datum.loss_fn_inputs).map(([key, tensor]) => {
          const where = `data.${i}.loss_fn_inputs.${key}`;
          if (!tensor.dense) throw new TinkerWireError(`${where}: only dense tensors are supported`);
          return [key, { data: unpack(tensor.dense, tensor.dtype, where), dtype: dtypeName(tensor.dtype, where), shape: tensor.shape }];
        }),
      ),
    })),
  };
}

export function encodeForwardBackwardResult(result: ForwardBackwardResult): Uint8Array {
  const type = messageType('ForwardBackwardOutput');
  const names = [...new Set(result.loss_fn_outputs.flatMap((datum) => Object.keys(datum)))];
  const fields = Object.fromEntries(
    names.map((name) => {
      const tensors = result.loss_fn_outputs.map((datum) => datum[name]);
      const dtype = tensors.find((t) => t)?.dtype ?? 'float32';
      const packed = tensors.map((t) => packTensor({ data: t?.data ?? [], dtype }));
      const offsets = Buffer.alloc((packed.length + 1) * 8);
      let at = 0;
      packed.forEach((p, i) => {
        offsets.writeBigInt64LE(BigInt(at), i * 8);
        at += p.length;
      });
      offsets.writeBigInt64LE(BigInt(at), packed.length * 8);
      return [name, { data: Buffer.concat(packed), offsets, dtype: DTYPE[dtype], trailing_shape: [] }];
    }),
  );
  return type
    .encode(
      type.fromObject({
        loss_fn_output_type: result.loss_fn_output_type,
        metrics: result.metrics,
        loss_fn_outputs: result.loss_fn_outputs.length > 0 ? [{ fields, num_datums: result.loss_fn_outputs.length }] : [],
      }),
    )
    .finish();
}

export function decodeForwardBackwardResult(bytes: Uint8Array): ForwardBackwardResult {
  const raw = decode('ForwardBackwardOutput', bytes, 'forward_backward result') as {
    loss_fn_output_type: string;
    metrics: Record<string, number>;
    loss_fn_outputs: Array<{ num_datums: number; fields: Record<string, { data: Uint8Array; offsets: Uint8Array; dtype: number }> }>;
  };
  const outputs: ForwardBackwardResult['loss_fn_outputs'] = [];
  raw.loss_fn_outputs.forEach((record, r) => {
    const datums: Array<Record<string, WireTensor>> = Array.from({ length: record.num_datums }, () => ({}));
    for (const [name, batched] of Object.entries(record.fields)) {
      const where = `loss_fn_outputs.${r}.${name}`;
      const offsets = unpack(batched.offsets, DTYPE.int64, `${where}.offsets`);
      if (offsets.length !== record.num_datums + 1) {
        throw new TinkerWireError(
          `${where}: ${offsets.length} offsets for ${record.num_datums} datums (expected ${record.num_datums + 1})`,
        );
      }
      const dtype = dtypeName(batched.dtype, where);
      for (let i = 0; i < record.num_datums; i++) {
        const slice = batched.data.subarray(offsets[i], offsets[i + 1]);
        datums[i][name] = { data: unpack(slice, batched.dtype, `${where}[${i}]`), dtype };
      }
    }
    outputs.push(...datums);
  });
  return { loss_fn_output_type: raw.loss_fn_output_type, loss_fn_outputs: outputs, metrics: raw.metrics };
}

export function encodeSampleResult(result: SampleResult): Uint8Array {
  const type = messageType('SampleResponse');
  return type
    .encode(
      type.fromObject({
        sequences: result.sequences.map((s) => ({
          stop_reason: s.stop_reason === 'length' ? 1 : 0,
          tokens: packInt32(s.tokens),
          ...(s.logprobs ? { logprobs: packTensor({ data: s.logprobs, dtype: 'float32' }) } : {}),
        })),
        ...(result.prompt_logprobs
          ? { prompt_logprobs: packTensor({ data: result.prompt_logprobs.map((lp) => lp ?? Number.NaN), dtype: 'float32' }) }
          : {}),
      }),
    )
    .finish();
}

export function decodeSampleResult(bytes: Uint8Array): SampleResult {
  const raw = decode('SampleResponse', bytes, 'sample result') as {
    sequences: Array<{ stop_reason: number; tokens: Uint8Array; logprobs?: Uint8Array | null }>;
    prompt_logprobs?: Uint8Array | null;
  };
  return {
    sequences: raw.sequences.map((s, i) => ({
      stop_reason: s.stop_reason === 1 ? 'length' : 'stop',
      tokens: unpack(s.tokens, DTYPE.int32, `sequences.${i}.tokens`),
      logprobs: s.logprobs && s.logprobs.length > 0 ? unpack(s.logprobs, DTYPE.float32, `sequences.${i}.logprobs`) : null,
    })),
    prompt_logprobs: raw.prompt_logprobs
      ? unpack(raw.prompt_logprobs, DTYPE.float32, 'prompt_logprobs').map((lp) => (Number.isNaN(lp) ? null : lp))
      : null,
  };
}
