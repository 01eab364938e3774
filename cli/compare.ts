/**
 * `harness-s compare`: the ablation. Each arm is the user's config with one
 * change (policy-only: rescue off; harness-s: rescue on; dynamic-sampling,
 * policy-only-matched, harness-s+dynamic-sampling: a batch refill; random-k:
 * k random siblings; all: every sibling; vote: voter LLMs; ...), run once per
 * seed, to equal steps or, with a budget, until each run has spent it.
 * Arms of a seed draw the same task stream at every step (sampling depends on
 * seed and step only) and evaluate on the same eval split. Figures, spend
 * included, are means over seeds.
 */
import type { Client } from '@temporalio/client';
import { parseRunConfig, type RunConfig } from '../core/config';
import { mapWithConcurrency } from '../core/concurrency';
import { CI_METHOD, pairedDifference, rateStdErr, type PairedDifference } from '../core/stats';
import type { RunSummary } from '../workflows/definitions';
import { newRunId, rootCauseMessage, startRun, UserError } from './runs';
import { isSimulatedEnv, SIM_KIND } from '../core/sim-kind';

type RawConfig = Record<string, unknown>;
const section = (raw: RawConfig, key: string) => (raw[key] && typeof raw[key] === 'object' ? (raw[key] as RawConfig) : {});

/** The config with rescue on or off and a batch refill (core/rl/batch-fill.ts). */
const arm =
  (rescue: boolean, refill: 'none' | 'dynamic' | 'matched') =>
  (raw: RawConfig): RawConfig => ({
    ...raw,
    rescue: { ...section(raw, 'rescue'), enabled: rescue },
    sampling: { ...section(raw, 'sampling'), refill },
  });

/** Each arm's change to the user's config. */
export const COMPARE_ARMS: Record<string, (raw: RawConfig) => RawConfig> = {
  'policy-only': arm(false, 'none'),
  'harness-s': arm(true, 'none'),
  /** Rescue off; a group whose rewards are all equal is dropped and a fresh task drawn in its place (DAPO's dynamic sampling). */
  'dynamic-sampling': arm(false, 'dynamic'),
  /** Rescue off; each dead group draws one fresh task instead (the rollouts harness-s spends on rescue, spent on more tasks). */
  'policy-only-matched': arm(false, 'matched'),
  /** Rescue first, then dynamic sampling refills what rescue could not revive. */
  'harness-s+dynamic-sampling': arm(true, 'dynamic'),
  'random-k': (raw) => ({
    ...raw,
    rescue: { ...section(raw, 'rescue'), enabled: true },
    router: { ...section(raw, 'router'), strategy: 'random' },
  }),
  all: (raw) => ({ ...raw, rescue: { ...section(raw, 'rescue'), enabled: true }, router: { ...section(raw, 'router'), strategy: 'all' } }),
  vote: (raw) => ({
    ...raw,
    rescue: { ...section(raw, 'rescue'), enabled: true },
    router: { ...section(raw, 'router'), strategy: 'vote' },
  }),
  /** harness-s with the frozen pool given by `--pool` (an evolved pool) instead of the config's: paired with `harness-s`, evolved against hand-written. */
  'harness-s-pool': (raw) => ({ ...raw, rescue: { ...section(raw, 'rescue'), enabled: true } }),
  /** harness-s, steps in sequence (pipeline.maxStaleness 0): the control of `pipelined`. */
  sync: (raw) => ({
    ...raw,
    rescue: { ...section(raw, 'rescue'), enabled: true },
    pipeline: { ...section(raw, 'pipeline'), maxStaleness: 0 },
  }),
  /** harness-s with step n+1's rollouts overlapping step n's training (pipeline.maxStaleness 1). */
  pipelined: (raw) => ({
    ...raw,
    rescue: { ...section(raw, 'rescue'), enabled: true },
    pipeline: { ...section(raw, 'pipeline'), maxStaleness: 1 },
  }),
};

export interface ArmFigures {
  /** Eval-split success under the base harness after the last step. */
  baseSuccessEnd: number;
  /** Its standard error within the run (binomial over the final evaluation's base rollouts). */
  baseSuccessEndStdErr: number;
  /** Eval-split success under Rank-1 routing after the last step. */
  rank1SuccessEnd: number;
  /** Fraction of groups per step with a non-zero advantage, mean over steps. */
  liveGroupFraction: number;
  /** Dead groups rescued / dead groups (0 without rescue). */
  rescueRate: number;
  /** Rollouts spent on rescue groups over the run. */
  extraRollouts: number;
  /** Wall-clock seconds from the first step's start to the last step's end (on the latency model's clock when it runs, divided by its speedup). */
  trainingSeconds: number;
  /** Steps the run trained (fewer than `steps` where a budget stopped it). */
  steps: number;
  /** What the run's training steps spent. */
  spend: ArmSpend;
}

export interface ArmSpend {
  rollouts: number;
  /** The policy's prompt + completion tokens, as the inference server processed them. */
  policyTokens: number;
  trainerTokens: number;
  /** SIMULATED GPU-seconds under the sim's latency model; absent where it did not run. */
  gpuSeconds?: number;
}

/** The figures compared between arms (the standard error is per run, not compared). */
export const COMPARED_FIGURES = [
  'baseSuccessEnd',
  'rank1SuccessEnd',
  'liveGroupFraction',
  'rescueRate',
  'extraRollouts',
  'trainingSeconds',
] as const;
export type ComparedFigure = (typeof COMPARED_FIGURES)[number];

export interface CompareResult {
  simulated: boolean;
  /** The budget every arm ran to (`--budget`), or null: arms ran to equal steps. */
  budget: Budget | null;
  seeds: number[];
  /** Mean over seeds, per arm. */
  arms: Record<string, ArmFigures>;
  /**
   * Per pair of arms ("<later arm> - <earlier arm>", in the order given), per
   * figure: the mean difference over the seeds both finished, with its
   * confidence interval (`ciMethod`) and whether the interval excludes 0.
   */
  diffs: Record<string, Record<ComparedFigure, PairedDifference>>;
  ciMethod: string;
  /**
   * arm -> seed -> the run's figures, its id, and the policy version it ended
   * on (its last evaluation's: the adapter the inference server serves under
   * that name, to evaluate further with `harness-s eval --model`).
   */
  runs: Record<string, Record<string, ArmFigures & { runId: string; policyVersion: string }>>;
  /** Runs that did not finish; their arms' means are over the other seeds (an arm with none is left out). */
  failures: Array<{ arm: string; seed: number; runId: string; error: string }>;
}

/** `--budget rollouts=N` or `tokens=N`: each arm trains until its steps have spent N. */
export interface Budget {
  rollouts?: number;
  tokens?: number;
}

/** Reads `rollouts=N` or `tokens=N`. */
export function parseBudget(text: string): Budget {
  const m = /^(rollouts|tokens)=([1-9][0-9]*)$/.exec(text.trim());
  if (!m) throw new UserError(`--budget: '${text}' is not rollouts=N or tokens=N (N a whole number >= 1), e.g. --budget rollouts=2000`);
  return { [m[1]]: Number(m[2]) };
}

/**
 * The steps an arm may take to reach `budget` when `--steps` does not say:
 * for rollouts, the steps the cheapest arm needs (each step runs at least
 * tasksPerStep x groupSize rollouts); for tokens, 10 x the config's steps.
 */
export function budgetStepCap(raw: unknown, budget: Budget): number {
  const config = parseRunConfig(raw, 'compare config');
  if (budget.rollouts !== undefined) return Math.ceil(budget.rollouts / (config.rollout.tasksPerStep * config.rollout.groupSize));
  return 10 * config.steps;
}

export interface ComparePlan {
  arm: string;
  seed: number;
  runId: string;
  raw: RawConfig;
  config: RunConfig;
}

/**
 * Every (arm, seed) run with its validated config; a bad arm or config fails
 * before anything starts. `world`: a sim world file every arm runs on (its
 * env.world).
 */
export function planCompare(
  raw: unknown,
  arms: readonly string[],
  seeds: readonly number[],
  stamp = new Date(),
  world?: string,
  pool?: string,
  budget?: Budget,
): ComparePlan[] {
  if (!raw || typeof raw !== 'object') throw new UserError('compare: the config must be a JSON object');
  if (world !== undefined) {
    const env = section(raw as RawConfig, 'env');
    if ((env.kind ?? SIM_KIND) !== SIM_KIND)
      throw new UserError(`compare: --world is for sim configs; this config's env.kind is '${String(env.kind)}'`);
    raw = { ...(raw as RawConfig), env: { ...env, kind: SIM_KIND, world } };
  }
  if (arms.includes('harness-s-pool') && pool === undefined)
    throw new UserError('compare: the harness-s-pool arm needs --pool HASH (a frozen pool, see `harness-s pool list`)');
  const unknown = arms.filter((a) => !(a in COMPARE_ARMS));
  if (unknown.length) throw new UserError(`compare: unknown arm ${unknown.join(', ')} (arms: ${Object.keys(COMPARE_ARMS).join(', ')})`);
  if (arms.length === 0 || seeds.length === 0) throw new UserError('compare: give at least one arm and one seed');
  const repeated = [...arms, ...seeds.map(String)].filter((x, i, all) => all.indexOf(x) !== i);
  if (repeated.length) throw new UserError(`compare: each arm and seed once; repeated: ${[...new Set(repeated)].join(', ')}`);
  const base = raw as RawConfig;
  const name = typeof base.name === 'string' ? base.name : 'compare';
  return arms.flatMap((arm) =>
    seeds.map((seed) => {
      const armed = COMPARE_ARMS[arm](base);
      const pooled =
        arm === 'harness-s-pool'
          ? { ...armed, env: { ...section(base, 'env'), kind: section(base, 'env').kind ?? SIM_KIND, pool } }
          : armed;
      const armRaw = {
        ...pooled,
        name: `${name}-${arm.replace(/\+/g, '-')}`.slice(0, 63),
        seed,
        eval: { ...section(base, 'eval'), enabled: true },
        ...(budget ? { budget } : {}),
      };
      let config: RunConfig;
      try {
        config = parseRunConfig(armRaw, `config of arm ${arm}`);
      } catch (err) {
        throw new UserError((err as Error).message);
      }
      return { arm, seed, runId: newRunId(`${name}-cmp-${arm.replace(/\+/g, '-')}-s${seed}`, stamp), raw: armRaw, config };
    }),
  );
}

export function armFigures(summary: RunSummary): ArmFigures {
  if (summary.baseEvalEnd === null || summary.rank1EvalEnd === null) {
    throw new Error(`run ${summary.runId} has no final evaluation; compare needs one`);
  }
  const last = summary.evaluations.at(-1);
  return {
    baseSuccessEnd: summary.baseEvalEnd,
    baseSuccessEndStdErr: rateStdErr(summary.baseEvalEnd, last?.base.rollouts ?? 0),
    rank1SuccessEnd: summary.rank1EvalEnd,
    liveGroupFraction: summary.liveGroupFraction ?? 0,
    rescueRate: summary.deadGroups ? summary.rescuedGroups / summary.deadGroups : 0,
    extraRollouts: summary.rescueRollouts,
    trainingSeconds: summary.trainingSeconds ?? 0, // absent from runs summarized before it was
    steps: summary.stepsCompleted,
    spend: {
      rollouts: summary.spend?.rollouts ?? 0,
      policyTokens: summary.spend?.policyTokens ?? 0,
      trainerTokens: summary.spend?.trainerTokens ?? 0,
      ...(summary.spend?.gpuSeconds != null ? { gpuSeconds: summary.spend.gpuSeconds } : {}),
    },
  };
}

export function meanFigures(runs: readonly ArmFigures[]): ArmFigures {
  const mean = (key: Exclude<keyof ArmFigures, 'spend'>) => runs.reduce((n, r) => n + r[key], 0) / runs.length;
  const meanSpend = (key: keyof ArmSpend) => runs.reduce((n, r) => n + (r.spend[key] ?? 0), 0) / runs.length;
  return {
    baseSuccessEnd: mean('baseSuccessEnd'),
    baseSuccessEndStdErr: mean('baseSuccessEndStdErr'),
    rank1SuccessEnd: mean('rank1SuccessEnd'),
    liveGroupFraction: mean('liveGroupFraction'),
    rescueRate: mean('rescueRate'),
    extraRollouts: mean('extraRollouts'),
    trainingSeconds: mean('trainingSeconds'),
    steps: mean('steps'),
    spend: {
      rollouts: meanSpend('rollouts'),
      policyTokens: meanSpend('policyTokens'),
      trainerTokens: meanSpend('trainerTokens'),
      ...(runs.every((r) => r.spend.gpuSeconds !== undefined) ? { gpuSeconds: meanSpend('gpuSeconds') } : {}),
    },
  };
}

/**
 * Starts every planned run (at most `parallel` at once), waits for each, and
 * aggregates. A run that fails is reported, not fatal: the others' figures stand.
 */
export async function runCompare(options: {
  client: Client;
  plan: readonly ComparePlan[];
  parallel: number;
  progress: (line: string) => void;
  budget?: Budget;
}): Promise<CompareResult> {
  const { plan, progress } = options;
  const runs: CompareResult['runs'] = {};
  const failures: CompareResult['failures'] = [];
  let finished = 0;
  await mapWithConcurrency(plan, options.parallel, async (item) => {
    let figures: ArmFigures;
    let policyVersion: string;
    try {
      const handle = await startRun(options.client, item.raw, item.config, item.runId);
      progress(`started ${item.runId} (arm ${item.arm}, seed ${item.seed})`);
      const summary = await handle.result();
      figures = armFigures(summary);
      policyVersion = summary.evaluations.at(-1)!.policyVersion; // armFigures checked that there is one
    } catch (err) {
      finished += 1;
      const error = rootCauseMessage(err);
      failures.push({ arm: item.arm, seed: item.seed, runId: item.runId, error });
      progress(`[${finished}/${plan.length}] ${item.arm} seed ${item.seed}: FAILED (${item.runId}): ${error}`);
      return;
    }
    (runs[item.arm] ??= {})[String(item.seed)] = { ...figures, runId: item.runId, policyVersion };
    finished += 1;
    progress(
      `[${finished}/${plan.length}] ${item.arm} seed ${item.seed}: base ${(figures.baseSuccessEnd * 100).toFixed(1)}%, ` +
        `Rank-1 ${(figures.rank1SuccessEnd * 100).toFixed(1)}%, live groups ${(figures.liveGroupFraction * 100).toFixed(1)}%, ` +
        `${figures.steps} steps, ${figures.spend.rollouts} rollouts`,
    );
  });
  const arms = [...new Set(plan.map((p) => p.arm))].filter((arm) => runs[arm]);
  return {
    simulated: plan.every((p) => isSimulatedEnv(p.config.env.kind)),
    budget: options.budget ?? null,
    seeds: [...new Set(plan.map((p) => p.seed))],
    arms: Object.fromEntries(arms.map((arm) => [arm, meanFigures(Object.values(runs[arm]))])),
    diffs: armDiffs(arms, runs),
    ciMethod: CI_METHOD,
    runs,
    failures,
  };
}

/** Every later arm minus every earlier one, paired by the seeds both finished. */
export function armDiffs(arms: readonly string[], runs: CompareResult['runs']): CompareResult['diffs'] {
  const diffs: CompareResult['diffs'] = {};
  arms.forEach((b, i) => {
    for (const a of arms.slice(i + 1)) {
      const seeds = Object.keys(runs[a] ?? {}).filter((seed) => runs[b]?.[seed]);
      diffs[`${a} - ${b}`] = Object.fromEntries(
        COMPARED_FIGURES.map((figure) => [
          figure,
          pairedDifference(
            seeds.map((s) => runs[a][s][figure]),
            seeds.map((s) => runs[b][s][figure]),
          ),
        ]),
      ) as Record<ComparedFigure, PairedDifference>;
    }
  });
  return diffs;
}

export function compareText(result: CompareResult): string {
  const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
  const header = [
    'arm',
    'base success end',
    'Rank-1 end',
    'live groups',
    'rescue rate',
    'extra rollouts',
    'training s',
    'steps',
    'rollouts',
    'policy tokens',
    'trainer tokens',
    'GPU-s (SIM)',
  ];
  const rows = Object.entries(result.arms).map(([arm, f]) => [
    arm,
    pct(f.baseSuccessEnd),
    pct(f.rank1SuccessEnd),
    pct(f.liveGroupFraction),
    pct(f.rescueRate),
    f.extraRollouts.toFixed(0),
    (f.trainingSeconds ?? 0).toFixed(1),
    f.steps.toFixed(1),
    f.spend.rollouts.toFixed(0),
    f.spend.policyTokens.toFixed(0),
    f.spend.trainerTokens.toFixed(0),
    f.spend.gpuSeconds?.toFixed(1) ?? '-',
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  const points = (x: number) => `${x >= 0 ? '+' : ''}${(x * 100).toFixed(1)}`;
  const diffLines = Object.entries(result.diffs).flatMap(([pair, figures]) => [
    `${pair} (${figures.baseSuccessEnd.n} seeds):`,
    ...(['baseSuccessEnd', 'rank1SuccessEnd', 'liveGroupFraction'] as const).map((figure) => {
      const d = figures[figure];
      if (d.n === 0) return `  ${figure.padEnd(18)} no seed finished in both arms`;
      if (d.n === 1) return `  ${figure.padEnd(18)} ${points(d.mean)} points, one seed: no interval`;
      return `  ${figure.padEnd(18)} ${points(d.mean)} points, CI [${points(d.lo)}, ${points(d.hi)}]${d.excludesZero ? '  excludes 0' : ''}`;
    }),
  ]);
  const stdErrs = Object.entries(result.arms)
    .map(([arm, f]) => `${arm} ${(f.baseSuccessEndStdErr * 100).toFixed(1)}`)
    .join(', ');
  return [
    `compare over seeds ${result.seeds.join(', ')} (means)${result.simulated ? ' [SIMULATED]' : ''}; success on the eval split; ` +
      (result.budget ? `each arm trained until it spent ${budgetText(result.budget)}` : 'each arm trained the same steps'),
    line(header),
    ...rows.map(line),
    `standard error of base success end within one run (points, binomial over its eval rollouts): ${stdErrs}`,
    ...(diffLines.length ? [`differences, paired by seed (${result.ciMethod}):`, ...diffLines] : []),
    ...result.failures.map((f) => `FAILED: ${f.arm} seed ${f.seed} (${f.runId}): ${f.error}`),
  ].join('\n');
}

export function budgetText(budget: Budget): string {
  return budget.rollouts !== undefined ? `${budget.rollouts} rollouts` : `${budget.tokens} policy tokens`;
}
