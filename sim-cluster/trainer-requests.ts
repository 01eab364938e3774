/** The SIMULATED trainer's request bodies and reply shapes (FastAPI's, as SkyRL's server answers). */
import { z } from 'zod';
import { AdamParams, CHECKPOINT_NAME } from '../core/trainer/tinker/wire';
import { type SimHttpReply } from './http';

/** The sim trainer's limit, as SkyRL's max_lora_rank. */
export const SIM_MAX_LORA_RANK = 64;

export const OptimStepBody = z.object({
  model_id: z.string().min(1),
  adam_params: AdamParams,
  seq_id: z.number().int().positive().nullish(),
});

export const SaveWeightsForSamplerBody = z
  .object({
    model_id: z.string().min(1),
    path: z.string().regex(CHECKPOINT_NAME, 'use letters, digits, "_" and "-" (e.g. "step-3")').nullish(),
    sampling_session_seq_id: z.number().int().min(0).nullish(),
    seq_id: z.number().int().positive().nullish(),
  })
  .refine((b) => b.path || (b.sampling_session_seq_id != null && b.seq_id != null), {
    message: "either 'path' or both 'sampling_session_seq_id' and 'seq_id' must be provided",
  });

export const ModelIdBody = z.object({ model_id: z.string().min(1) });

export const CreateSamplingSessionBody = z
  .object({
    session_id: z.string().min(1),
    sampling_session_seq_id: z.number().int().min(0),
    base_model: z.string().nullish(),
    model_path: z.string().nullish(),
  })
  .refine((b) => (b.base_model == null) !== (b.model_path == null), {
    message: 'exactly one of base_model or model_path must be provided',
  });

export const SampleBody = z
  .object({
    num_samples: z.number().int().min(1).default(1),
    prompt: z.object({ chunks: z.array(z.object({ type: z.literal('encoded_text').optional(), tokens: z.array(z.number().int()) })) }),
    sampling_params: z.object({
      max_tokens: z.number().int().positive({ message: 'max_tokens is currently required' }),
      seed: z.number().int().nullish(),
      temperature: z.number().min(0).default(1),
    }),
    base_model: z.string().nullish(),
    model_path: z.string().nullish(),
    sampling_session_id: z.string().nullish(),
    seq_id: z.number().int().nullish(),
    prompt_logprobs: z.boolean().nullish(),
  })
  .refine((b) => b.sampling_session_id != null || (b.base_model == null) !== (b.model_path == null), {
    message: "when 'sampling_session_id' is not provided, exactly one of 'base_model' or 'model_path' must be provided",
  });

export function invalid(error: z.ZodError): SimHttpReply {
  return {
    status: 422,
    json: {
      detail: error.issues.map((issue) => ({
        loc: ['body', ...issue.path.map((p) => (typeof p === 'symbol' ? String(p) : p))],
        msg: issue.message,
      })),
    },
  };
}

export function modelNotFound(): SimHttpReply {
  return { status: 404, json: { detail: 'Model not found' } };
}

export function protoBase64(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString('base64');
}

export function floatOutput(logprobs: number[]) {
  return { logprobs: { data: logprobs, dtype: 'float32' as const } };
}

/** A prompt as a datum (model_input = prompt[:-1], targets = prompt[1:]), for its prompt log-probs. */
export function datumOf(prompt: number[]) {
  return {
    model_input: { chunks: [{ tokens: prompt.slice(0, -1) }] },
    loss_fn_inputs: { target_tokens: { data: prompt.slice(1), dtype: 'int64' as const } },
  };
}
