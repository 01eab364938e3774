/** The trainer a run trains with (a Tinker-compatible service), and its LoRA and Adam settings. */
import { z } from 'zod';
import { ApiKeyEnv, SIM_CLUSTER_URL, Url } from './config-endpoints';

export const AdamParams = z.strictObject({
  learningRate: z.number().positive().default(0.05),
  beta1: z.number().min(0).max(1).default(0.9),
  beta2: z.number().min(0).max(1).default(0.999),
  eps: z.number().positive().default(1e-8),
  /** Decoupled weight decay (AdamW). */
  weightDecay: z.number().min(0).default(0),
  /** Clip the global gradient norm to this (0: no clipping). */
  gradClipNorm: z.number().min(0).default(0),
});

/** Which layers get LoRA adapters (Tinker's lora_config). */
export const LoraTargets = z.strictObject({
  trainAttn: z.boolean().default(true),
  trainMlp: z.boolean().default(true),
  trainUnembed: z.boolean().default(false),
  /** Seed of the adapters' initialisation; the trainer picks one when absent. */
  seed: z.number().int().min(0).optional(),
});

export const TrainerConfig = z.strictObject({
  /** A Tinker-compatible REST service (SkyRL's Tinker server, verl behind one, the sim cluster). */
  baseUrl: Url.default(SIM_CLUSTER_URL),
  apiKeyEnv: ApiKeyEnv,
  loraRank: z.number().int().positive().default(32),
  lora: LoraTargets.prefault({}),
  adam: AdamParams.prefault({}),
  /** Seconds between retrieve_future polls. */
  pollSeconds: z.number().positive().default(0.2),
  /**
   * The trainer's checkpoints folder as the worker sees it (SkyRL's --checkpoints-base), to unpack sampler
   * weights from; without it they are downloaded through the Tinker API's checkpoint archive.
   */
  checkpointsDir: z.string().min(1).optional(),
});
