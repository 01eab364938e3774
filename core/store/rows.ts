/**
 * The JSONB columns of the run store, validated where they enter the program:
 * a row written by an older version gets the defaults of fields added since
 * (documented per field); a row that is not what the code expects is refused
 * with what is wrong and where, instead of being cast and failing later.
 */
import { z } from 'zod';
import { UserError } from '../errors';
import { ROUTER_STRATEGIES } from '../config';
import { formatZodError } from '../zod-errors';
import type { ChatMessage } from '../policy/trajectory';

export class StoredRowError extends UserError {
  override name = 'StoredRowError';
}

/** Parses a stored JSONB value; `where` names the table, row and column. */
export function parseRow<T extends z.ZodType>(schema: T, value: unknown, where: string): z.infer<T> {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new StoredRowError(`run store: ${where} is not what this version reads:\n${formatZodError(parsed.error)}`);
  return parsed.data;
}

const Counts = z.record(z.string(), z.number());

/** Metrics as JSON keeps them: a non-finite number became null (rows written before they were left out); nulls are dropped. */
const Metrics = z
  .record(z.string(), z.number().nullable())
  .transform((m) => Object.fromEntries(Object.entries(m).filter((e): e is [string, number] => e[1] !== null)));

const SiblingStepStats = z.object({ groupsChosen: z.number(), groupsRescued: z.number(), rollouts: z.number(), successes: z.number() });

const LogprobMismatch = z.object({
  tokens: z.number(),
  meanAbsDiff: z.number(),
  ratioMean: z.number(),
  ratioStd: z.number(),
  ratioMin: z.number(),
  ratioMax: z.number(),
});

/** A mismatch with a non-finite figure (null in JSON) reads as not measured. */
const StoredMismatch = z
  .unknown()
  .optional()
  .transform((value) => {
    const parsed = LogprobMismatch.safeParse(value);
    return parsed.success ? parsed.data : null;
  });

/** steps.summary (core/rl/step-summary.ts StepSummary). */
export const StoredStepSummary = z.object({
  step: z.number().int(),
  policyVersionBefore: z.string(),
  policyVersion: z.string(),
  profileVersion: z.number(),
  tasks: z.number(),
  baseRollouts: z.number(),
  rescueRollouts: z.number(),
  baseSuccessRate: z.number(),
  /** Steps recorded before rewards were summarised have neither: read as null (no reward). */
  baseMeanReward: z.number().nullable().default(null),
  baseRewardStdErr: z.number().nullable().default(null),
  deadGroups: z.number(),
  deadTaskIds: z.array(z.string()).default([]),
  rescuedGroups: z.number(),
  liveGroupFraction: z.number(),
  siblings: z.record(z.string(), z.record(z.string(), SiblingStepStats)),
  datums: z.number(),
  trainerMetrics: Metrics,
  /** Absent from steps recorded before the trainer/sampler mismatch and the publish probe were measured. */
  logprobMismatch: StoredMismatch,
  publishProbeMeanAbsDiff: z.number().nullable().default(null),
  durationSeconds: z.number(),
  /** Absent from steps recorded before the phases were timed and failed groups were kept. */
  phaseSeconds: z
    .object({
      rollout: z.number(),
      train: z.number(),
      publish: z.number(),
      waitForTrainer: z.number().optional(),
      waitToPublish: z.number().optional(),
    })
    .nullable()
    .default(null),
  failedGroups: z.array(z.object({ taskId: z.string(), role: z.enum(['base', 'rescue']), reason: z.string() })).default([]),
  /** Absent from steps that were not pipelined, those recorded before pipelining included: left absent (read as on-policy, staleness 0; the tracker logs no staleness for them). */
  staleness: z.number().int().optional(),
  stalenessHistogram: z.record(z.string(), z.number()).optional(),
  /** Absent from steps recorded before spend was counted: left absent, as no spend is not zero spend (stepSpend counts their rollouts; the tracker logs none). */
  spend: z
    .object({
      rollouts: z.number(),
      promptTokens: z.number(),
      completionTokens: z.number(),
      trainerTokens: z.number(),
      gpuSeconds: z.number().optional(),
    })
    .optional(),
  /** Present where the step filled its batch past its first tasks (sampling.refill). */
  sampling: z
    .object({
      refill: z.enum(['dynamic', 'matched']),
      drawn: z.number().int(),
      dropped: z.array(z.object({ taskId: z.string(), role: z.enum(['base', 'rescue']), reward: z.number() })),
    })
    .optional(),
  liveDrawnFraction: z.number().optional(),
});
export type StoredStepSummary = z.infer<typeof StoredStepSummary>;

const ArmResult = z.object({
  rollouts: z.number(),
  successRate: z.number(),
  byKind: z.record(z.string(), z.object({ rollouts: z.number(), successRate: z.number() })),
});

/** evaluations.summary (core/rl/evaluation.ts EvaluationSummary). */
export const StoredEvaluationSummary = z.object({
  afterSteps: z.number().int(),
  policyVersion: z.string(),
  profileVersion: z.number(),
  tasks: z.number(),
  rolloutsPerTask: z.number(),
  base: ArmResult,
  rank1: ArmResult,
  rank1Routes: z.record(z.string(), z.string()),
});

const ProfileCell = z.object({
  harnessId: z.string(),
  kind: z.string(),
  failureType: z.string(),
  attempts: z.number(),
  successes: z.number(),
  totalTurns: z.number(),
  totalTokens: z.number(),
});

const KindCell = z.object({
  harnessId: z.string(),
  kind: z.string(),
  attempts: z.number(),
  successes: z.number(),
  totalTurns: z.number(),
  /** Absent from per-kind cells stored before rescue evidence was kept per kind. */
  rescueAttempts: z.number().default(0),
  rescueSuccesses: z.number().default(0),
  rescueTurns: z.number().default(0),
  rescueTokens: z.number().default(0),
});

/** profiles.cells: a profile version's evidence. */
export const StoredProfileCells = z.object({
  priorStrength: z.number(),
  /** Absent from versions stored before the base harness was kept with them. */
  baseHarnessId: z.string().nullable().default(null),
  cells: z.array(ProfileCell),
  /** Absent from versions stored before per-kind cells existed. */
  kindCells: z.array(KindCell).default([]),
});

const VoteOutcome = z.union([
  z.object({ voter: z.string(), ok: z.literal(true), ranking: z.array(z.string()), latencyMs: z.number() }),
  z.object({ voter: z.string(), ok: z.literal(false), reason: z.string(), latencyMs: z.number() }),
]);

/** routing_decisions: its JSONB and enum columns. */
export const StoredRoutingColumns = z.object({
  strategy: z.enum(ROUTER_STRATEGIES),
  failureCounts: Counts,
  votes: z.array(VoteOutcome),
  scores: Counts,
  outcome: z.record(z.string(), z.object({ rollouts: z.number(), successes: z.number() })).nullable(),
});

/** trainer_steps: metrics and the publish probe. */
export const StoredTrainerStepColumns = z.object({
  metrics: Metrics,
  probe: z.object({ tokens: z.array(z.number()), positions: z.array(z.number()), logprobs: z.array(z.number()) }).nullable(),
});

/**
 * PostgreSQL's jsonb cannot hold the NUL character, which a model's text may
 * contain (a byte-level tokenizer can emit byte 0): it is stored as U+FFFD.
 * Training never reads the text back; it uses the stored token ids.
 */
export function storableMessage(message: ChatMessage): ChatMessage {
  return message.content.includes('\u0000') ? { ...message, content: message.content.replace(/\u0000/g, '\ufffd') } : message;
}
