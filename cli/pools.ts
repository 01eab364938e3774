/**
 * `harness-s pool ...`: evolve a sibling harness pool (workflow
 * evolveHarnessPool), show a frozen pool (lineage, effects, effect matrix),
 * list the frozen pools. Usable from SDK scripts too.
 */
import { WorkflowExecutionAlreadyStartedError, type Client, type WorkflowHandle } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { contentHash } from '../core/harness/frozen-pool';
import { parseEvolutionConfig, type EvolutionConfig } from '../core/evolution/config';
import { rateOf, type PoolEffect } from '../core/evolution/effect-matrix';
import type { PoolManifest } from '../core/harness/frozen-pool';
import type { EvolutionStore, StoredCandidate } from '../core/store/evolution-store';
import { UserError } from '../core/errors';
import { evolveHarnessPool } from '../workflows';
import { readJsonFile } from './runs';
import { withoutSchemaKey } from '../core/run-input';
import { TASK_QUEUES } from '../workflows/definitions';
import type { EvolutionResult } from '../workflows/evolve-harness-pool';
import { isSimulatedEnv } from '../core/sim-kind';

/** Reads an evolution config file: an EvolutionConfig, or a workflow input {"config": {...}}. */
export function readEvolutionConfigFile(file: string): { raw: unknown; config: EvolutionConfig } {
  const json = withoutSchemaKey(readJsonFile(file));
  const raw =
    json !== null && typeof json === 'object' && 'config' in json && Object.keys(json).length === 1
      ? (json as { config: unknown }).config
      : json;
  return { raw, config: parseEvolutionConfig(raw, file) };
}

export const evolutionWorkflowId = (name: string) => `evolve-${name}`;

/**
 * Starts the evolution, or attaches to it when one of that name is running.
 * A finished, failed or cancelled one of that name is started again: it
 * resumes from what the store recorded.
 */
export async function startEvolution(
  client: Client,
  raw: unknown,
  config: EvolutionConfig,
): Promise<{ handle: WorkflowHandle<typeof evolveHarnessPool>; attached: boolean }> {
  const workflowId = evolutionWorkflowId(config.name);
  try {
    const handle = await client.workflow.start(evolveHarnessPool, {
      workflowId,
      taskQueue: TASK_QUEUES.control,
      args: [{ config: raw as EvolutionConfig }],
      workflowIdReusePolicy: 'ALLOW_DUPLICATE',
      staticSummary: `Harness-S pool evolution ${config.name} (${config.env.kind}${isSimulatedEnv(config.env.kind) ? ', SIMULATED' : ''})`,
    });
    return { handle, attached: false };
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    const handle = client.workflow.getHandle<typeof evolveHarnessPool>(workflowId);
    const running = await runningConfig(handle);
    if (running === null || contentHash(running) !== contentHash(config)) {
      throw new UserError(
        `an evolution named '${config.name}' is running with another config (workflow ${workflowId}); wait for it to finish, or give this one another name`,
      );
    }
    return { handle, attached: true };
  }
}

/** The config a running evolution was started with (the first event of its history), parsed; null when it cannot be read. */
async function runningConfig(handle: WorkflowHandle<typeof evolveHarnessPool>): Promise<EvolutionConfig | null> {
  const history = await handle.fetchHistory();
  const payload = history.events?.[0]?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0];
  if (!payload) return null;
  try {
    const input = defaultPayloadConverter.fromPayload<{ config: unknown }>(payload);
    return parseEvolutionConfig(input.config);
  } catch {
    return null;
  }
}

/** What `pool evolve --json` prints. */
export function evolutionJson(result: EvolutionResult) {
  return {
    pool: result.pool,
    siblings: result.siblings.map((s) => ({
      id: s.id,
      direction: s.direction,
      targetRescueRate: s.targetRescueRate,
      baseRateOnTargets: s.baseRateOnTargets,
    })),
  };
}

const pct = (x: number) => `${(x * 100).toFixed(0)}%`;
const points = (x: number) => `${x >= 0 ? '+' : ''}${(x * 100).toFixed(1)}`;

export function evolutionText(result: EvolutionResult): string {
  return [
    `${result.simulated ? '[SIMULATED] ' : ''}evolution ${result.evolutionId} froze pool ${result.pool} (${result.env}) in ${result.dir}`,
    `base ${result.base}: ${pct(result.baseDevSuccess)} success on ${result.devTasks} dev tasks`,
    'siblings (rescue on their targets, fresh rollouts after the choice; the difference paired by task, 95% t interval over tasks):',
    ...result.siblings.map(
      (s) =>
        `  ${s.id.padEnd(10)} ${s.direction.padEnd(22)} rescues ${pct(s.targetRescueRate).padStart(4)} of ${s.targets} target tasks (base ${pct(s.baseRateOnTargets)}; ` +
        `${points(s.difference.mean)} [${points(s.difference.lo)}, ${points(s.difference.hi)}]), ${pct(s.validationRescueRate)} in validation, regression ${pct(s.regressionRate)}`,
    ),
    ...result.withoutSibling.map((w) => `  (no sibling) ${w.direction}: ${w.reason}`),
    `records: ${result.plan.proposals} proposal attempts, ${result.plan.candidates} candidates validated, ${result.plan.dropped} dropped`,
    `train with it: "env": {"kind": "${result.env}", "pool": "${result.pool}"}`,
  ].join('\n');
}

/** The effect matrix as text: success per harness x (kind/failure type) cell, and what it shows. */
export function effectText(effect: PoolEffect): string {
  const width = Math.max(12, ...effect.cells.map((c) => c.length + 2));
  const lines = [
    'success on the dev tasks the base failed, by task kind / base failure type (* the sibling helps: above the base with 95% confidence, paired by task):',
    `${'harness'.padEnd(12)}${effect.cells.map((c) => c.padStart(width)).join('')}`,
    ...effect.harnesses.map(
      (h) =>
        `${h.padEnd(12)}${effect.cells.map((c) => `${pct(rateOf(effect.success[h][c]))}${effect.helps[h]?.includes(c) ? '*' : ' '}`.padStart(width)).join('')}`,
    ),
    `locality: ${effect.locality ? 'yes' : 'no'} (siblings help some cells, none helps all: ${Object.entries(effect.helps)
      .map(([s, c]) => `${s} ${c.length}`)
      .join(', ')} of ${effect.cells.length})`,
    `complementarity: ${effect.complementarity.shown ? 'yes' : 'no'} (the siblings together help ${effect.complementarity.unionCells} cells, the best one alone ${effect.complementarity.bestSingleCells})`,
  ];
  return lines.join('\n');
}

interface Decision {
  ranked?: Array<{ candidateId: string; score: number; targetRescueRate: number; baseRateOnTargets: number; regressionRate: number }>;
  dropped?: Array<{ slot: number; reason: string }>;
}

/** The evolution's candidates as a tree from the base; frozen members marked. */
export function lineageText(
  baseId: string,
  candidates: readonly StoredCandidate[],
  members: ReadonlySet<string>,
  decisions: ReadonlyArray<{ round: number; direction: string; decision: unknown }>,
): string {
  const measured = new Map<string, string>();
  for (const { decision } of decisions) {
    for (const r of (decision as Decision).ranked ?? []) {
      measured.set(
        r.candidateId,
        `rescue ${pct(r.targetRescueRate)} (base ${pct(r.baseRateOnTargets)}), regression ${pct(r.regressionRate)}, score ${r.score.toFixed(2)}`,
      );
    }
  }
  const lines = [`${baseId} (base)`];
  const walk = (parent: string, indent: string) => {
    const children = candidates.filter((c) => c.parent === parent);
    children.forEach((c, i) => {
      const last = i === children.length - 1;
      lines.push(
        `${indent}${last ? '└─' : '├─'} ${c.candidateId}${members.has(c.candidateId) ? ' *' : ''}  ${c.direction}, round ${c.round}: ${measured.get(c.candidateId) ?? 'not measured'}`,
      );
      walk(c.candidateId, `${indent}${last ? '   ' : '│  '}`);
    });
  };
  walk(baseId, '');
  const dropped = decisions.flatMap(({ round, direction, decision }) =>
    ((decision as Decision).dropped ?? []).map((d) => `  round ${round} ${direction} slot ${d.slot}: ${d.reason}`),
  );
  return [...lines, '(* in the frozen pool)', ...(dropped.length ? ['dropped proposals:', ...dropped] : [])].join('\n');
}

/** A stored pool by its hash, a unique prefix of it, or the name of the evolution that froze it. */
export async function findPool(store: EvolutionStore, ref: string) {
  const byEvolution = await store.getEvolution(ref);
  const hash = byEvolution?.poolHash ?? ref;
  const matches = /^[0-9a-f]{1,16}$/.test(hash) ? await store.listPools(hash) : [];
  if (matches.length === 1) return matches[0];
  if (matches.length > 1)
    throw new UserError(`'${ref}' matches ${matches.length} pools (${matches.map((p) => p.poolHash).join(', ')}); give more of the hash`);
  throw new UserError(byEvolution ? `evolution ${ref} has not frozen a pool yet` : `no frozen pool '${ref}' (see \`harness-s pool list\`)`);
}

export async function poolShowText(store: EvolutionStore, ref: string): Promise<string> {
  const pool = await findPool(store, ref);
  const manifest = pool.manifest as PoolManifest;
  const lines = [
    `pool ${pool.poolHash} (${pool.env}${isSimulatedEnv(pool.env) ? ', SIMULATED' : ''}), frozen ${pool.createdAt.toISOString()}${pool.evolutionId ? ` by evolution ${pool.evolutionId}` : ''}`,
  ];
  lines.push('members:');
  for (const m of manifest.members) {
    const measured = m.measured as {
      targetRescueRate?: number;
      baseRateOnTargets?: number;
      regressionRate?: number;
      evolvedFrom?: string;
      difference?: { mean: number; lo: number; hi: number };
    } | null;
    const ci = measured?.difference
      ? ` ${points(measured.difference.mean)} [${points(measured.difference.lo)}, ${points(measured.difference.hi)}]`
      : '';
    lines.push(
      `  ${m.id.padEnd(10)} ${m.direction.padEnd(22)} ${m.version}` +
        (measured?.targetRescueRate !== undefined
          ? `  born round ${m.bornRound} from ${measured.evolvedFrom}; rescues ${pct(measured.targetRescueRate)} of its targets (base ${pct(measured.baseRateOnTargets ?? 0)};${ci}), regression ${pct(measured.regressionRate ?? 0)}; targets ${m.targets.join(', ')}`
          : ''),
    );
  }
  if (pool.evolutionId) {
    const evolution = await store.getEvolution(pool.evolutionId);
    const candidates = await store.candidates(pool.evolutionId);
    lines.push(
      'lineage:',
      lineageText(
        String(evolution?.baseSpec.id ?? manifest.members[0].id),
        candidates,
        new Set(manifest.members.map((m) => m.id)),
        await store.selections(pool.evolutionId),
      ),
    );
  }
  if (manifest.effect) lines.push(effectText(manifest.effect as PoolEffect));
  return lines.join('\n');
}

/** What `pool show --json` prints: the manifest's members and effect, and the evolution's candidates (without their specs). */
export async function poolShowJson(store: EvolutionStore, ref: string) {
  const pool = await findPool(store, ref);
  const manifest = pool.manifest as PoolManifest;
  const candidates = pool.evolutionId ? await store.candidates(pool.evolutionId) : [];
  return {
    pool: pool.poolHash,
    env: pool.env,
    simulated: isSimulatedEnv(pool.env),
    createdAt: pool.createdAt.toISOString(),
    evolution: pool.evolutionId,
    members: manifest.members,
    candidates: candidates.map(({ candidateId, parent, direction, round, slot, version }) => ({
      candidateId,
      parent,
      direction,
      round,
      slot,
      version,
    })),
    effect: manifest.effect ?? null,
  };
}

export async function poolList(store: EvolutionStore) {
  return (await store.listPools()).map((p) => {
    const manifest = p.manifest as PoolManifest;
    return {
      pool: p.poolHash,
      env: p.env,
      evolution: p.evolutionId,
      siblings: manifest.members.filter((m) => m.direction !== 'base').map((m) => `${m.id}:${m.direction}`),
      createdAt: p.createdAt.toISOString(),
    };
  });
}
