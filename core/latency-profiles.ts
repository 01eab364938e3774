/**
 * The latency profiles of the SIMULATED cluster (latency-profiles.json beside
 * this file: approximations of published GPU figures, not measurements of
 * this machine) and the pricing of a training step's spend in SIMULATED
 * GPU-seconds under one of them. The sim cluster's latency model
 * (sim-cluster/latency.ts) answers in time from the same profiles.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { UserError } from './errors';

export const DEFAULT_LATENCY_FILE = path.join(__dirname, 'latency-profiles.json');

const rate = z.number().positive();
const seconds = z.number().min(0);

export const LatencyProfile = z.strictObject({
  description: z.string().min(1),
  /** Where the figures come from, and how rough they are. */
  sources: z.string().min(1),
  tokenScale: z.number().positive(),
  inference: z.strictObject({
    servers: z.number().int().min(1),
    prefillTokensPerSecond: rate,
    peakDecodeTokensPerSecond: rate,
    halfSaturationSequences: z.number().min(0),
    maxSequencesPerServer: z.number().int().min(1),
  }),
  trainer: z.strictObject({
    trainTokensPerSecond: rate,
    optimStepSeconds: seconds,
    saveWeightsForSamplerSeconds: seconds,
    saveWeightsSeconds: seconds,
  }),
  publish: z.strictObject({ adapterLoadSeconds: seconds }),
});
export type LatencyProfile = z.infer<typeof LatencyProfile>;

export const LatencyProfileFile = z.strictObject({
  $comment: z.string().optional(),
  profiles: z
    .record(z.string().regex(/^[a-z0-9][a-z0-9-]*$/, 'a profile name is lower case letters, digits and "-"'), LatencyProfile)
    .refine((p) => Object.keys(p).length > 0, 'names no profile'),
});

export class LatencyProfileError extends UserError {
  override name = 'LatencyProfileError';
}

/** Reads and validates a profiles file; each problem names its profile and field. */
export function loadLatencyProfiles(file: string = DEFAULT_LATENCY_FILE): Record<string, LatencyProfile> {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new LatencyProfileError(`[SIMULATED] latency profiles ${file}: cannot read it as JSON: ${(err as Error).message}`);
  }
  const parsed = LatencyProfileFile.safeParse(raw);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((issue) => {
      const [top, name, ...field] = issue.path.map(String);
      const where =
        top === 'profiles' && name !== undefined
          ? `profile '${name}'${field.length ? ` field ${field.join('.')}` : ''}`
          : issue.path.join('.') || '(root)';
      const keys = issue.code === 'unrecognized_keys' ? ` (${issue.keys.join(', ')})` : '';
      return `  - ${where}: ${issue.message}${keys}`;
    });
    throw new LatencyProfileError(`[SIMULATED] latency profiles ${file} are invalid:\n${lines.join('\n')}`);
  }
  return parsed.data.profiles;
}

/** A profile by name; an unknown name is refused, listing the known ones. */
export function latencyProfile(name: string, file: string = DEFAULT_LATENCY_FILE): LatencyProfile {
  const profiles = loadLatencyProfiles(file);
  const profile = profiles[name];
  if (!profile)
    throw new LatencyProfileError(
      `[SIMULATED] unknown latency profile '${name}'; known profiles (${file}): ${Object.keys(profiles).join(', ')}`,
    );
  return profile;
}

/**
 * SIMULATED GPU-seconds a training step costs under a profile, from what it
 * spent (compare's `gpuSeconds`): the time each piece holds a GPU, summed.
 * - Inference: each turn's prefill, P*s / prefillTokensPerSecond, and its
 *   decode at a full batch: a replica holding n = maxSequencesPerServer
 *   sequences decodes n * peak / (n + h) tokens/s in all, so a completion
 *   token costs (n + h) / (n * peak) replica-seconds. Rollouts that leave the
 *   replicas half empty cost more wall time than this; the figure is the cost
 *   of the work, not of the schedule.
 * - Trainer: forward_backward on the step's tokens, its optim_step and
 *   save_weights_for_sampler (the modelled ops of a step).
 * - Publishing: an adapter load on every replica.
 */
export function modelledGpuSeconds(
  profile: LatencyProfile,
  spend: { promptTokens: number; completionTokens: number; trainerTokens: number },
): number {
  const s = profile.tokenScale;
  const { inference: inf, trainer, publish } = profile;
  const n = inf.maxSequencesPerServer;
  const prefill = (spend.promptTokens * s) / inf.prefillTokensPerSecond;
  const decode = (spend.completionTokens * s * (n + inf.halfSaturationSequences)) / (n * inf.peakDecodeTokensPerSecond);
  const train = (spend.trainerTokens * s) / trainer.trainTokensPerSecond + trainer.optimStepSeconds + trainer.saveWeightsForSamplerSeconds;
  return prefill + decode + train + publish.adapterLoadSeconds * inf.servers;
}

/**
 * The profile a worker process prices sim steps with (HARNESS_S_SIM_LATENCY,
 * the name the embedded stack's sim cluster runs with; set it on the workers
 * too when the sim cluster runs apart), or null when it is off. Read once at
 * process start; an unknown name fails there, listing the known ones.
 */
export function latencyProfileFromEnv(): LatencyProfile | null {
  const name = process.env.HARNESS_S_SIM_LATENCY?.trim();
  if (!name) return null;
  return latencyProfile(name);
}
