/** The trainer a run trains with (a Tinker-compatible service), and its LoRA and Adam settings. */
import { z } from 'zod';
import { ApiKeyEnv, SIM_CLUSTER_URL, Url } from './config-endpoints';

/** The learning rate a trainer section gets when it names none: tuned for the SIMULATED trainer's small model. */
export const SIM_LEARNING_RATE = 0.05;

export const AdamParams = z.strictObject({
  learningRate: z
    .number()
    .positive()
    .default(SIM_LEARNING_RATE)
    .describe(
      'Adam learning rate of each optim_step; the default 0.05 is tuned for the SIMULATED trainer, and the examples on real models use 1e-5.',
    ),
  beta1: z.number().min(0).max(1).default(0.9).describe("Adam's first-moment decay (beta1)."),
  beta2: z.number().min(0).max(1).default(0.999).describe("Adam's second-moment decay (beta2)."),
  eps: z.number().positive().default(1e-8).describe("Adam's epsilon, added to the denominator of each update."),
  weightDecay: z.number().min(0).default(0).describe('Decoupled weight decay (AdamW); 0: none.'),
  gradClipNorm: z.number().min(0).default(0).describe('Clip the global gradient norm to this before each update; 0: no clipping.'),
});

export const LoraTargets = z.strictObject({
  trainAttn: z.boolean().default(true).describe('Put LoRA adapters on the attention layers (Tinker lora_config train_attn).'),
  trainMlp: z.boolean().default(true).describe('Put LoRA adapters on the MLP layers (Tinker lora_config train_mlp).'),
  trainUnembed: z.boolean().default(false).describe('Put a LoRA adapter on the unembedding (Tinker lora_config train_unembed).'),
  seed: z.number().int().min(0).optional().describe("Seed of the adapters' initialisation; the trainer picks one when absent."),
});

export const TrainerConfig = z.strictObject({
  baseUrl: Url.default(SIM_CLUSTER_URL).describe(
    "The Tinker-compatible REST service that trains the run's LoRA (SkyRL's Tinker server, hosted Tinker, verl behind one); the default is the SIMULATED trainer of the embedded sim cluster.",
  ),
  apiKeyEnv: ApiKeyEnv,
  loraRank: z
    .number()
    .int()
    .positive()
    .default(32)
    .describe(
      "LoRA rank of the run's adapter on policy.model (an inference server must allow at least this rank, vLLM's --max-lora-rank).",
    ),
  lora: LoraTargets.prefault({}).describe("Which layers get LoRA adapters, and the adapters' seed (Tinker's lora_config)."),
  adam: AdamParams.prefault({}).describe('The Adam (AdamW) optimizer settings of every optim_step.'),
  pollSeconds: z.number().positive().default(0.2).describe('Seconds between polls of a pending trainer request (retrieve_future).'),
  checkpointsDir: z
    .string()
    .min(1)
    .optional()
    .describe(
      "The trainer's checkpoints folder as the workers that publish adapters see it (SkyRL's --checkpoints-base), to unpack sampler weights from; absent: they are downloaded through the Tinker API's checkpoint archive.",
    ),
});
