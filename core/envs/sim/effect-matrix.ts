/**
 * The effect matrix of a SIMULATED world: success rate of every harness on
 * every task kind under the initial policy, and the failure types the base
 * harness shows, under the initial policy or a trained version. For a user editing world.json to see locality (which kinds a
 * sibling helps) and complementarity (which failures it fixes) before training.
 */
import { runEpisode } from '../../harness/runtime';
import type { Policy } from '../../policy/client';
import { hashSeed } from '../../random';
import { LocalSimPolicy } from './local-policy';
import { SimEnvironment } from './environment';
import type { SimWorld } from './world';

export interface EffectMatrix {
  kinds: string[];
  harnesses: string[];
  /** harness -> kind -> success rate. */
  success: Record<string, Record<string, number>>;
  /** kind -> failure type -> share of the base harness's failures. */
  baseFailures: Record<string, Record<string, number>>;
  episodesPerCell: number;
  /** The policy version measured. */
  model: string;
}

export interface EffectMatrixOptions {
  episodes: number;
  maxTurns: number;
  seed: number;
  /** A served policy (a trained version on the sim cluster); the initial policy in-process when absent. */
  policy?: { client: Policy; model: string };
}

export async function measureEffectMatrix(world: SimWorld, options: EffectMatrixOptions): Promise<EffectMatrix> {
  const env = new SimEnvironment(world);
  const policy = options.policy?.client ?? new LocalSimPolicy(world);
  const model = options.policy?.model ?? world.model.name;
  const kinds = world.kinds.map((k) => k.name);
  const harnesses = env.harnesses();
  const tasks = env.listTasks();
  const success: EffectMatrix['success'] = {};
  const baseFailures: EffectMatrix['baseFailures'] = {};
  for (const harness of harnesses) {
    success[harness.id] = {};
    for (const kind of kinds) {
      const ofKind = tasks.filter((t) => t.kind === kind);
      let wins = 0;
      const failures: Record<string, number> = {};
      for (let i = 0; i < options.episodes; i++) {
        const task = ofKind[i % ofKind.length];
        const trajectory = await runEpisode({
          env,
          harness,
          policy,
          model,
          taskId: task.taskId,
          sample: i,
          maxTurns: options.maxTurns,
          temperature: 1,
          seed: hashSeed(options.seed, harness.id, kind, i),
        });
        if (trajectory.success) wins += 1;
        else failures[trajectory.failureType ?? 'unknown'] = (failures[trajectory.failureType ?? 'unknown'] ?? 0) + 1;
      }
      success[harness.id][kind] = wins / options.episodes;
      if (harness.direction === 'base') {
        const total = options.episodes - wins;
        baseFailures[kind] = Object.fromEntries(Object.entries(failures).map(([type, n]) => [type, total ? n / total : 0]));
      }
    }
  }
  return { kinds, harnesses: harnesses.map((h) => h.id), success, baseFailures, episodesPerCell: options.episodes, model };
}

export function effectMatrixText(matrix: EffectMatrix): string {
  const pct = (x: number) => `${(x * 100).toFixed(0)}%`.padStart(9);
  const lines = [
    `[SIMULATED] success rate per harness x task kind under policy ${matrix.model} (${matrix.episodesPerCell} episodes per cell)`,
    `${'harness'.padEnd(18)}${matrix.kinds.map((k) => k.padStart(12)).join('')}`,
    ...matrix.harnesses.map((h) => `${h.padEnd(18)}${matrix.kinds.map((k) => `${pct(matrix.success[h][k])}   `).join('')}`),
    'base harness failures by type:',
    ...matrix.kinds.map(
      (k) =>
        `  ${k.padEnd(14)} ${
          Object.entries(matrix.baseFailures[k])
            .map(([t, share]) => `${t} ${(share * 100).toFixed(0)}%`)
            .join(', ') || '(none)'
        }`,
    ),
  ];
  return lines.join('\n');
}
