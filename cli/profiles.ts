/**
 * `harness-s profiles show RUN`: the behaviour profiles a run's router read
 * (sibling x task kind, thin cells marked), every version with the policy it
 * was measured with, and which siblings the router picked under each version
 * and how often they rescued.
 */
import { profileMatrix, type BehaviorProfiles, type ProfileMatrix } from '../core/router/profiles';
import { picksByProfileVersion, type RouterPicks } from '../core/router/picks';
import { kindSuccessRate, rank1Routes } from '../core/router/rank1';
import type { RunStore } from '../core/store/run-store';
import { UserError } from './runs';

export interface ProfilesView {
  runId: string;
  version: number;
  policyVersion: string;
  priorStrength: number;
  matrix: ProfileMatrix;
  /** Task kind -> the harness Rank-1 evaluation routes it to by this version, with its smoothed success on the kind. */
  rank1: Record<string, { harnessId: string; successRate: number }>;
  versions: Array<{ version: number; policyVersion: string; createdAt: string }>;
  /** profile version -> task kind -> sibling -> how the router used it while that version was current. */
  picks: RouterPicks;
  decisions: number;
}

function rank1View(profiles: BehaviorProfiles): ProfilesView['rank1'] {
  const base = profiles.baseHarnessId;
  if (!base) return {};
  const pool = [...new Set(profiles.kindCells.map((c) => c.harnessId))];
  const kinds = [...new Set(profiles.kindCells.map((c) => c.kind))].sort();
  const routes = rank1Routes(profiles, pool, base, kinds);
  return Object.fromEntries(
    Object.entries(routes).map(([kind, harnessId]) => [kind, { harnessId, successRate: kindSuccessRate(profiles, harnessId, kind) }]),
  );
}

export async function profilesView(store: RunStore, runId: string, version?: number): Promise<ProfilesView> {
  const versions = await store.profileVersions(runId);
  if (versions.length === 0) {
    const run = await store.getRun(runId);
    throw new UserError(run ? `run ${runId} has no behaviour profiles yet (it is still preparing)` : `no run ${runId} in the run store`);
  }
  const wanted = version ?? versions[versions.length - 1].version;
  const profiles = await store.profiles(runId, wanted);
  if (!profiles) throw new UserError(`run ${runId} has no profile version ${wanted} (it has ${versions.map((v) => v.version).join(', ')})`);
  const decisions = await store.routingDecisions(runId);
  return {
    runId,
    version: profiles.version,
    policyVersion: profiles.policyVersion,
    priorStrength: profiles.priorStrength,
    matrix: profileMatrix(profiles),
    rank1: rank1View(profiles),
    versions: versions.map((v) => ({ version: v.version, policyVersion: v.policyVersion, createdAt: v.createdAt.toISOString() })),
    picks: picksByProfileVersion(decisions),
    decisions: decisions.length,
  };
}

const pct = (x: number) => `${(x * 100).toFixed(0)}%`;

export function profilesText(view: ProfilesView, simulated: boolean): string {
  const { matrix } = view;
  const width = Math.max(10, ...matrix.kinds.map((k) => k.length + 2));
  const lines = [
    `behaviour profiles v${view.version} of run ${view.runId}${simulated ? ' [SIMULATED]' : ''}, measured with ${view.policyVersion}`,
    `rescue rate of each sibling on tasks the base harness failed, smoothed with a prior of ${view.priorStrength} pseudo-attempts; (n) attempts; * thin evidence`,
    `  ${'harness'.padEnd(20)}${matrix.kinds.map((k) => k.padStart(width)).join('')}`,
  ];
  if (matrix.kinds.length === 0) lines.push('  (no per-kind evidence in this version: it was stored before the matrix was kept)');
  for (const harnessId of matrix.harnesses) {
    const cells = matrix.kinds.map((kind) => {
      const cell = matrix.cells[harnessId][kind];
      return `${pct(cell.rescueRate)} (${cell.attempts})${cell.thin ? '*' : ' '}`.padStart(width);
    });
    lines.push(`  ${harnessId.padEnd(20)}${cells.join('')}`);
  }
  const routes = Object.entries(view.rank1);
  if (routes.length)
    lines.push(
      `Rank-1 routing by this version: ${routes.map(([kind, r]) => `${kind} -> ${r.harnessId} (${pct(r.successRate)})`).join(', ')}`,
    );
  lines.push('', 'versions: ' + view.versions.map((v) => `v${v.version} (${v.policyVersion})`).join(', '));
  const versions = Object.keys(view.picks).sort((a, b) => Number(a) - Number(b));
  if (versions.length === 0) {
    lines.push('router picks: none yet (no dead group has been routed)');
  } else {
    lines.push(`router picks per profile version and task kind (${view.decisions} decisions): sibling times chosen (rescued/chosen)`);
    for (const v of versions) {
      lines.push(`  v${v}`);
      for (const [kind, byHarness] of Object.entries(view.picks[v]).sort(([a], [b]) => a.localeCompare(b))) {
        const entries = Object.entries(byHarness).sort(([a, x], [b, y]) => y.chosen - x.chosen || a.localeCompare(b));
        lines.push(`    ${kind.padEnd(width)}` + entries.map(([id, s]) => `${id} ${s.chosen} (${s.rescued}/${s.chosen})`).join(', '));
      }
    }
  }
  return lines.join('\n');
}
