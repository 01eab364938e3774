/**
 * Harness Behavior Profiles: per sibling harness, per task kind and per base
 * failure type, how often the sibling rescued a task the base harness failed,
 * and at what cost. Pure: measured by activities, read by the router.
 */

export interface ProfileCell {
  harnessId: string;
  kind: string;
  /** The base harness's failure type on the tasks this evidence comes from. */
  failureType: string;
  attempts: number;
  successes: number;
  totalTurns: number;
  totalTokens: number;
}

/**
 * How a harness (the base included) did on the probe tasks of a kind: on all
 * of them, solved by the base or not (what Rank-1 routing reads), and on those
 * the base failed at least once (each attempt counted once, whatever the
 * failure types: what the profile matrix shows).
 */
export interface KindCell {
  harnessId: string;
  kind: string;
  attempts: number;
  successes: number;
  totalTurns: number;
  rescueAttempts: number;
  rescueSuccesses: number;
  rescueTurns: number;
  rescueTokens: number;
}

export interface BehaviorProfiles {
  version: number;
  /** The pool's base harness (null in versions stored before it was kept). */
  baseHarnessId: string | null;
  /** The policy version the evidence was measured with. */
  policyVersion: string;
  priorStrength: number;
  cells: ProfileCell[];
  kindCells: KindCell[];
}

/** What one probe task showed: base attempts, then each sibling's attempts. */
export interface ProbeOutcome {
  taskId: string;
  kind: string;
  baseHarnessId: string;
  /**
   * Part of the fixed probe sample (the default): its attempts count towards
   * every harness's success on the kind. Recent dead groups' tasks are probed
   * for rescue evidence only; counted there they would skew the kind's
   * success towards its hardest tasks.
   */
  fixedSample?: boolean;
  base: Array<{ success: boolean; failureType: string | null; turns: number }>;
  siblings: Record<string, Array<{ success: boolean; turns: number; tokens: number }>>;
}

/** A probe task's outcome from its stored rollouts: the base harness's attempts, then each sibling's. */
export function probeOutcome(args: {
  taskId: string;
  kind: string;
  baseHarnessId: string;
  fixedSample: boolean;
  rollouts: ReadonlyArray<{ harnessId: string; success: boolean; failureType: string | null; turns: number; tokens: number }>;
}): ProbeOutcome {
  const siblings: ProbeOutcome['siblings'] = {};
  for (const r of args.rollouts) {
    if (r.harnessId === args.baseHarnessId) continue;
    (siblings[r.harnessId] ??= []).push({ success: r.success, turns: r.turns, tokens: r.tokens });
  }
  return {
    taskId: args.taskId,
    kind: args.kind,
    baseHarnessId: args.baseHarnessId,
    fixedSample: args.fixedSample,
    base: args.rollouts.filter((r) => r.harnessId === args.baseHarnessId),
    siblings,
  };
}

const cellKey = (harnessId: string, kind: string, failureType: string) => `${harnessId}\u0000${kind}\u0000${failureType}`;

/**
 * Attributes each sibling's attempts on a probe task to every failure type the
 * base harness showed on it; tasks the base always solved carry no rescue evidence.
 */
export function buildProfiles(
  outcomes: readonly ProbeOutcome[],
  meta: { version: number; policyVersion: string; priorStrength: number },
): BehaviorProfiles {
  const baseHarnessId = outcomes[0]?.baseHarnessId ?? null;
  const cells = new Map<string, ProfileCell>();
  const kindCells = new Map<string, KindCell>();
  const addToKind = (
    harnessId: string,
    kind: string,
    attempts: ReadonlyArray<{ success: boolean; turns: number; tokens?: number }>,
    on: { fixedSample: boolean; baseFailed: boolean },
  ) => {
    const key = cellKey(harnessId, kind, '');
    const cell = kindCells.get(key) ?? {
      harnessId,
      kind,
      attempts: 0,
      successes: 0,
      totalTurns: 0,
      rescueAttempts: 0,
      rescueSuccesses: 0,
      rescueTurns: 0,
      rescueTokens: 0,
    };
    for (const attempt of attempts) {
      if (on.fixedSample) {
        cell.attempts += 1;
        cell.successes += attempt.success ? 1 : 0;
        cell.totalTurns += attempt.turns;
      }
      if (!on.baseFailed) continue;
      cell.rescueAttempts += 1;
      cell.rescueSuccesses += attempt.success ? 1 : 0;
      cell.rescueTurns += attempt.turns;
      cell.rescueTokens += attempt.tokens ?? 0;
    }
    kindCells.set(key, cell);
  };
  for (const outcome of outcomes) {
    const fixedSample = outcome.fixedSample ?? true;
    addToKind(outcome.baseHarnessId, outcome.kind, outcome.base, { fixedSample, baseFailed: false });
    const baseFailed = outcome.base.some((a) => !a.success);
    for (const [harnessId, attempts] of Object.entries(outcome.siblings))
      addToKind(harnessId, outcome.kind, attempts, { fixedSample, baseFailed });
    const failureTypes = [...new Set(outcome.base.filter((a) => !a.success).map((a) => a.failureType ?? 'unknown'))];
    for (const [harnessId, attempts] of Object.entries(outcome.siblings)) {
      for (const failureType of failureTypes) {
        const key = cellKey(harnessId, outcome.kind, failureType);
        const cell = cells.get(key) ?? {
          harnessId,
          kind: outcome.kind,
          failureType,
          attempts: 0,
          successes: 0,
          totalTurns: 0,
          totalTokens: 0,
        };
        for (const attempt of attempts) {
          cell.attempts += 1;
          cell.successes += attempt.success ? 1 : 0;
          cell.totalTurns += attempt.turns;
          cell.totalTokens += attempt.tokens;
        }
        cells.set(key, cell);
      }
    }
  }
  const byKey = <T extends { harnessId: string; kind: string }>(a: T, b: T) =>
    a.harnessId.localeCompare(b.harnessId) || a.kind.localeCompare(b.kind);
  const sorted = [...cells.values()].sort((a, b) => byKey(a, b) || a.failureType.localeCompare(b.failureType));
  return { ...meta, baseHarnessId, cells: sorted, kindCells: [...kindCells.values()].sort(byKey) };
}

/**
 * The prior a cell shrinks towards: the rescue rate of all siblings together on
 * this kind and failure type (how rescuable such a failure is at all), else on
 * this kind, else overall; 0 with no evidence anywhere.
 */
export function priorRate(profiles: BehaviorProfiles, kind: string, failureType: string): number {
  const rate = (cells: ProfileCell[]) => {
    const attempts = cells.reduce((n, c) => n + c.attempts, 0);
    return attempts === 0 ? null : cells.reduce((n, c) => n + c.successes, 0) / attempts;
  };
  const ofKind = profiles.cells.filter((c) => c.kind === kind);
  return rate(ofKind.filter((c) => c.failureType === failureType)) ?? rate(ofKind) ?? rate(profiles.cells) ?? 0;
}

/**
 * Rescue rate with a prior: (successes + s * p0) / (attempts + s), where p0 is
 * the prior rate and s the prior strength. A harness never tried on a cell
 * gets p0; with much evidence the rate approaches the cell's own.
 */
export function smoothedRescueRate(profiles: BehaviorProfiles, harnessId: string, kind: string, failureType: string): number {
  const prior = priorRate(profiles, kind, failureType);
  const cell = profiles.cells.find((c) => c.harnessId === harnessId && c.kind === kind && c.failureType === failureType);
  const s = profiles.priorStrength;
  if (!cell || cell.attempts + s === 0) return prior;
  return (cell.successes + s * prior) / (cell.attempts + s);
}

/** Mean turns per attempt of a harness on a kind (its cost); Infinity without evidence. */
export function meanTurns(profiles: BehaviorProfiles, harnessId: string, kind: string): number {
  let attempts = 0;
  let turns = 0;
  for (const cell of profiles.cells) {
    if (cell.harnessId !== harnessId || cell.kind !== kind) continue;
    attempts += cell.attempts;
    turns += cell.totalTurns;
  }
  return attempts === 0 ? Number.POSITIVE_INFINITY : turns / attempts;
}

/** A cell is thin when it has fewer attempts than twice the prior's pseudo-attempts. */
export function isThinCell(profiles: BehaviorProfiles, cell: ProfileCell): boolean {
  return cell.attempts < Math.max(1, 2 * profiles.priorStrength);
}

/**
 * How far a new profile version moved from the previous one: the mean absolute
 * change of the smoothed rescue rate over every (harness, kind, failure type)
 * cell either version has evidence for.
 */
export function profileShift(previous: BehaviorProfiles, next: BehaviorProfiles): number {
  const keys = new Map<string, ProfileCell>();
  for (const cell of [...previous.cells, ...next.cells]) keys.set(cellKey(cell.harnessId, cell.kind, cell.failureType), cell);
  if (keys.size === 0) return 0;
  let total = 0;
  for (const cell of keys.values()) {
    total += Math.abs(
      smoothedRescueRate(next, cell.harnessId, cell.kind, cell.failureType) -
        smoothedRescueRate(previous, cell.harnessId, cell.kind, cell.failureType),
    );
  }
  return total / keys.size;
}

/** One (harness, kind) entry of the profile matrix: rescue evidence over every base failure type of the kind. */
export interface ProfileMatrixCell {
  attempts: number;
  successes: number;
  /** Smoothed towards the kind's prior, as the router reads it. */
  rescueRate: number;
  thin: boolean;
  meanTurns: number | null;
  meanTokens: number | null;
}

export interface ProfileMatrix {
  kinds: string[];
  harnesses: string[];
  cells: Record<string, Record<string, ProfileMatrixCell>>;
}

/**
 * The sibling x task-kind matrix `harness-s profiles show` prints: each
 * sibling's attempts on the kind's probe tasks the base failed (each attempt
 * once), smoothed towards the kind's rate over all siblings. The router reads
 * the finer cells, per base failure type; this is their summary per kind.
 * Every probed sibling has a row, thin or empty as its evidence is.
 */
export function profileMatrix(profiles: BehaviorProfiles): ProfileMatrix {
  // A version stored before per-kind evidence was kept: nothing to show rather than zeros.
  if (profiles.baseHarnessId === null) return { kinds: [], harnesses: [], cells: {} };
  const siblingCells = profiles.kindCells.filter((c) => c.harnessId !== profiles.baseHarnessId);
  const kinds = [...new Set(profiles.kindCells.map((c) => c.kind))].sort();
  const harnesses = [...new Set(siblingCells.map((c) => c.harnessId))].sort();
  const s = profiles.priorStrength;
  const cells: ProfileMatrix['cells'] = {};
  for (const kind of kinds) {
    const ofKind = siblingCells.filter((c) => c.kind === kind);
    const kindAttempts = ofKind.reduce((n, c) => n + c.rescueAttempts, 0);
    const prior = kindAttempts ? ofKind.reduce((n, c) => n + c.rescueSuccesses, 0) / kindAttempts : 0;
    for (const harnessId of harnesses) {
      const cell = ofKind.find((c) => c.harnessId === harnessId);
      const attempts = cell?.rescueAttempts ?? 0;
      const successes = cell?.rescueSuccesses ?? 0;
      (cells[harnessId] ??= {})[kind] = {
        attempts,
        successes,
        rescueRate: attempts + s === 0 ? prior : (successes + s * prior) / (attempts + s),
        thin: attempts < Math.max(1, 2 * s),
        meanTurns: attempts ? cell!.rescueTurns / attempts : null,
        meanTokens: attempts ? cell!.rescueTokens / attempts : null,
      };
    }
  }
  return { kinds, harnesses, cells };
}
